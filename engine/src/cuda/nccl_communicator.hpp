#pragma once
// Bridge from the engine core to the NCCL communicator (through the CUDA plugin's table):
// plain C++ only.

#include <dl/backend.hpp>
#include <dl/communicator.hpp>

#include <memory>

namespace dl::cuda {

/// NCCL over the ranks of `bootstrap` (which sends NCCL's unique id and stays in use for the
/// host-side agreements), summing on `backend`'s compute stream; `backend` must be the CUDA
/// backend. Throws dl::Error(device) when NCCL does not load or refuses (two ranks, one GPU).
std::unique_ptr<Communicator> make_nccl_communicator(Backend& backend, Communicator& bootstrap,
                                                     double timeout_s);

} // namespace dl::cuda
