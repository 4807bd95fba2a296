// The NCCL backend: CUDA tensors, collectives queued on the tensor's current stream (the host
// does not wait for them), the communicator set up over MPI. Compiled when CMake finds NCCL
// and the CUDA backend is built (TIDEMARK_WITH_NCCL); otherwise asking for it is an error.
#include "tensorlib/base/error.h"
#include "tensorlib/distributed/mpi_internal.h"

#if defined(TIDEMARK_WITH_NCCL)

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "tensorlib/cuda/cuda.h"

namespace tl::distributed::detail {

namespace {

void nccl_check(ncclResult_t r, std::string_view what) {
  TL_CHECK(r == ncclSuccess, what, ": NCCL error: ", ncclGetErrorString(r));
}

ncclDataType_t nccl_type(ScalarType dtype, std::string_view op) {
  switch (dtype) {
    case ScalarType::UInt8:
      return ncclUint8;
    case ScalarType::Int8:
      return ncclInt8;
    case ScalarType::Int32:
      return ncclInt32;
    case ScalarType::Int64:
      return ncclInt64;
    case ScalarType::Float16:
      return ncclFloat16;
    case ScalarType::BFloat16:
      return ncclBfloat16;
    case ScalarType::Float32:
      return ncclFloat32;
    case ScalarType::Float64:
      return ncclFloat64;
    default:
      break;
  }
  TL_CHECK(false, op, ": the nccl backend has no ", dtype);
  __builtin_unreachable();
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::avg:
      return ncclAvg;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::min:
      return ncclMin;
  }
  return ncclSum;
}

class ProcessGroupNCCL final : public ProcessGroup {
 public:
  ProcessGroupNCCL(MPI_Comm mpi, int rank, int size, uint64_t id, int device)
      : ProcessGroup(rank, size, "nccl", id), mpi_(mpi), device_(device) {
    cuda::set_device(device_);
    ncclUniqueId unique{};
    if (rank == 0) nccl_check(ncclGetUniqueId(&unique), "init_process_group: ncclGetUniqueId");
    mpi_check(MPI_Bcast(&unique, sizeof unique, MPI_BYTE, 0, mpi_), "init_process_group");
    nccl_check(ncclCommInitRank(&comm_, size, unique, rank),
               "init_process_group: ncclCommInitRank");
  }
  ~ProcessGroupNCCL() override {
    ncclCommDestroy(comm_);
    free_comm(mpi_);
  }

 protected:
  void agree(const int64_t (&signature)[4], std::string_view what) override {
    mpi_agree(mpi_, signature, what);
  }
  void do_all_reduce(const Tensor& t, ReduceOp op) override {
    nccl_check(ncclAllReduce(t.data_ptr(), t.data_ptr(), size_t(t.numel()),
                             nccl_type(t.dtype(), "all_reduce"), nccl_op(op), comm_, stream(t)),
               "all_reduce");
  }
  void do_broadcast(const Tensor& t, int src) override {
    nccl_check(ncclBroadcast(t.data_ptr(), t.data_ptr(), size_t(t.numel()),
                             nccl_type(t.dtype(), "broadcast"), src, comm_, stream(t)),
               "broadcast");
  }
  void do_all_gather(const Tensor& out, const Tensor& in) override {
    stream(out);
    nccl_check(ncclAllGather(in.data_ptr(), out.data_ptr(), size_t(in.numel()),
                             nccl_type(in.dtype(), "all_gather"), comm_, stream(in)),
               "all_gather");
  }
  void do_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) override {
    stream(out);
    nccl_check(
        ncclReduceScatter(in.data_ptr(), out.data_ptr(), size_t(out.numel()),
                          nccl_type(in.dtype(), "reduce_scatter"), nccl_op(op), comm_, stream(in)),
        "reduce_scatter");
  }
  void do_barrier() override {
    // As torch.distributed's NCCL barrier: the device's queued work, then every rank.
    cuda::current_stream(Device(DeviceType::CUDA, static_cast<Device::Index>(device_)))
        .synchronize();
    mpi_check(MPI_Barrier(mpi_), "barrier");
  }
  std::shared_ptr<ProcessGroup> do_split(int color, int key, uint64_t id) override {
    MPI_Comm comm = MPI_COMM_NULL;
    mpi_check(MPI_Comm_split(mpi_, color < 0 ? MPI_UNDEFINED : color, key, &comm), "split");
    if (comm == MPI_COMM_NULL) return nullptr;
    return make_nccl_group(comm, id, device_);
  }
  bool blocks_host() const override { return false; }
  DeviceType device_type() const override { return DeviceType::CUDA; }

 private:
  // The tensor's current stream; the tensor must be on this process's device.
  cudaStream_t stream(const Tensor& t) const {
    TL_CHECK(t.device().index() == device_, "the nccl group of this process runs on cuda:", device_,
             " but the tensor is on ", t.device());
    return static_cast<cudaStream_t>(cuda::current_stream(t.device()).native());
  }

  MPI_Comm mpi_;
  int device_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

bool nccl_built() {
  return true;
}

std::shared_ptr<ProcessGroup> make_nccl_group(MPI_Comm comm, uint64_t id, int local_rank) {
  const int devices = cuda::device_count();
  TL_CHECK(devices > 0, "init_process_group: the nccl backend needs a CUDA device; none found");
  int rank = 0, size = 0;
  mpi_check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  mpi_check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return std::make_shared<ProcessGroupNCCL>(comm, rank, size, id, local_rank % devices);
}

}  // namespace tl::distributed::detail

#else  // !TIDEMARK_WITH_NCCL

namespace tl::distributed::detail {

bool nccl_built() {
  return false;
}

std::shared_ptr<ProcessGroup> make_nccl_group(MPI_Comm, uint64_t, int) {
  TL_CHECK(false, "init_process_group: the nccl backend is not built into this tensorlib");
  __builtin_unreachable();
}

}  // namespace tl::distributed::detail

#endif
