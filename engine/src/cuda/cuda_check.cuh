#pragma once
// One way to check every CUDA runtime, cuDNN and cuBLAS call: DL_CUDA_CHECK(call) throws
// dl::Error(device) naming the call, the file and the line, and the library's own words.

#include <dl/error.hpp>

#include <cublas_v2.h>

#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

namespace dl::cuda {

inline const char* status_text(cudaError_t status) {
    return cudaGetErrorString(status);
}
inline const char* status_text(cudnnStatus_t status) {
    return cudnnGetErrorString(status);
}
inline const char* status_text(cublasStatus_t status) {
    return cublasGetStatusString(status);
}
inline bool succeeded(cudaError_t status) {
    return status == cudaSuccess;
}
inline bool succeeded(cudnnStatus_t status) {
    return status == CUDNN_STATUS_SUCCESS;
}
inline bool succeeded(cublasStatus_t status) {
    return status == CUBLAS_STATUS_SUCCESS;
}

template <typename Status> void check(Status status, const char* call, const char* file, int line) {
    if (!succeeded(status)) {
        throw Error(ErrorKind::device, std::string(call) + " failed at " + file + ":" +
                                           std::to_string(line) + ": " + status_text(status));
    }
}

} // namespace dl::cuda

#define DL_CUDA_CHECK(call) ::dl::cuda::check((call), #call, __FILE__, __LINE__)
// After a kernel launch: launch errors (bad configuration, no kernel image for this GPU).
#define DL_CUDA_CHECK_LAUNCH() DL_CUDA_CHECK(cudaGetLastError())
