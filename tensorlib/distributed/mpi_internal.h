// Internal helpers of tl::distributed's backends over MPI (it includes mpi.h): error checks,
// MPI types, the agreement check (Note [Agreement check] in process_group.cpp) and the
// factories of the groups. Included only by tensorlib/distributed/*.cpp.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string_view>

#include "tensorlib/core/dtype.h"
#include "tensorlib/distributed/process_group.h"

namespace tl::distributed::detail {

// Throws tl::Error naming `what` and MPI's message when `err` is not MPI_SUCCESS.
void mpi_check(int err, std::string_view what);
// The MPI datatype of `dtype`; tl::Error naming `op` and the dtype for one MPI has none of
// (bool, float16, bfloat16).
MPI_Datatype mpi_type(ScalarType dtype, std::string_view op);
// The elements of a tensor as an MPI count; tl::Error beyond MPI's int counts.
int mpi_count(int64_t numel, std::string_view op);
// Initialises MPI (threads serialized) unless the program did; at exit, finalizes it when it
// was initialised here.
void ensure_mpi();
// Finalizes MPI when ensure_mpi initialised it and it is not finalized yet.
void finalize_mpi_if_ours();
// Every rank of `comm` compares `signature` (Note [Agreement check]); throws the same tl::Error
// on every rank when they differ.
void mpi_agree(MPI_Comm comm, const int64_t (&signature)[4], std::string_view what);

// Frees a group's communicator (a split's), never MPI_COMM_WORLD, and not once MPI is
// finalized (a group destroyed at exit after MPI).
void free_comm(MPI_Comm& comm);

// A group over `comm`, which it owns (and frees) unless it is MPI_COMM_WORLD.
std::shared_ptr<ProcessGroup> make_mpi_group(MPI_Comm comm, uint64_t id);
// A NCCL group over the processes of `comm` (which it owns likewise), its communicator set up
// through `comm`; tl::Error when NCCL was not built (nccl_backend.cpp).
std::shared_ptr<ProcessGroup> make_nccl_group(MPI_Comm comm, uint64_t id, int local_rank);
bool nccl_built();

}  // namespace tl::distributed::detail
