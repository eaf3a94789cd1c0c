#pragma once
// The small, stable part of NCCL's C API that dltrain uses, declared here instead of included
// from nccl.h: NCCL is not in Debian main, so CI has no nccl.h, and GPU machines often have
// NCCL only as a library (PyTorch's pip wheel ships libnccl.so.2 without headers). These are
// the declarations of nccl.h since NCCL 2.4 (ncclCommAbort and ncclCommGetAsyncError arrived
// then), unchanged through 2.28; the library itself is opened with dlopen at run time
// (nccl_communicator.cu), so nothing here is linked.

#include <dl/backend.hpp>

#include <cuda_runtime.h>

#include <cstddef>

extern "C" {

typedef struct ncclComm* ncclComm_t; // NOLINT(modernize-use-using): nccl.h's own spelling

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct { // NOLINT(modernize-use-using)
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum { // NOLINT(modernize-use-using)
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
} ncclResult_t;

typedef enum { // NOLINT(modernize-use-using)
    ncclFloat32 = 7,
} ncclDataType_t;

typedef enum { // NOLINT(modernize-use-using)
    ncclSum = 0,
    ncclMax = 2,
} ncclRedOp_t;

} // extern "C"

namespace dl::cuda::nccl {

// The entry points, by the names dlsym finds them under.
struct Api {
    ncclResult_t (*GetVersion)(int* version);
    ncclResult_t (*GetUniqueId)(ncclUniqueId* id);
    ncclResult_t (*CommInitRank)(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
    ncclResult_t (*AllReduce)(const void* send, void* receive, std::size_t count,
                              ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                              cudaStream_t stream);
    ncclResult_t (*CommGetAsyncError)(ncclComm_t comm, ncclResult_t* error);
    ncclResult_t (*CommAbort)(ncclComm_t comm);
    ncclResult_t (*CommDestroy)(ncclComm_t comm);
    const char* (*GetErrorString)(ncclResult_t result);
};

} // namespace dl::cuda::nccl

namespace dl::cuda {

/// The compute stream of the CUDA backend (cuda_backend.cu): NCCL sums there, ordered after
/// the backward pass and before the update. Throws dl::Error(device) for another backend.
cudaStream_t compute_stream(Backend& backend);

} // namespace dl::cuda
