// The MPI backend: CPU tensors, blocking collectives on an MPI communicator.
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>

#include "tensorlib/base/error.h"
#include "tensorlib/distributed/mpi_internal.h"

namespace tl::distributed::detail {

void mpi_check(int err, std::string_view what) {
  if (err == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(err, text, &len);
  TL_CHECK(false, what, ": MPI error: ", std::string_view(text, static_cast<size_t>(len)));
}

MPI_Datatype mpi_type(ScalarType dtype, std::string_view op) {
  switch (dtype) {
    case ScalarType::UInt8:
      return MPI_UINT8_T;
    case ScalarType::Int8:
      return MPI_INT8_T;
    case ScalarType::Int16:
      return MPI_INT16_T;
    case ScalarType::Int32:
      return MPI_INT32_T;
    case ScalarType::Int64:
      return MPI_INT64_T;
    case ScalarType::Float32:
      return MPI_FLOAT;
    case ScalarType::Float64:
      return MPI_DOUBLE;
    default:
      break;
  }
  TL_CHECK(false, op, ": the mpi backend has no ", dtype,
           " (it takes float32, float64 and the integer dtypes)");
  __builtin_unreachable();
}

int mpi_count(int64_t numel, std::string_view op) {
  TL_CHECK(numel <= INT_MAX, op, ": ", numel, " elements are more than one MPI call takes (",
           INT_MAX, ")");
  return static_cast<int>(numel);
}

namespace {

bool g_we_initialised = false;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) destroy_process_group();  // frees the communicators, then finalizes
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::max:
      return MPI_MAX;
    case ReduceOp::min:
      return MPI_MIN;
    case ReduceOp::sum:
    case ReduceOp::avg:
      break;
  }
  return MPI_SUM;  // avg: the sum, divided afterwards
}

void divide_in_place(const Tensor& t, int n) {
  if (t.dtype() == ScalarType::Float32) {
    float* p = t.data_ptr<float>();
    std::for_each(p, p + t.numel(), [n](float& v) { v /= static_cast<float>(n); });
  } else {
    double* p = t.data_ptr<double>();
    std::for_each(p, p + t.numel(), [n](double& v) { v /= n; });
  }
}

class ProcessGroupMPI final : public ProcessGroup {
 public:
  ProcessGroupMPI(MPI_Comm comm, int rank, int size, uint64_t id)
      : ProcessGroup(rank, size, "mpi", id), comm_(comm) {}
  ~ProcessGroupMPI() override { free_comm(comm_); }

 protected:
  void agree(const int64_t (&signature)[4], std::string_view what) override {
    mpi_agree(comm_, signature, what);
  }
  void do_all_reduce(const Tensor& t, ReduceOp op) override {
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, t.data_ptr(), mpi_count(t.numel(), "all_reduce"),
                            mpi_type(t.dtype(), "all_reduce"), mpi_op(op), comm_),
              "all_reduce");
    if (op == ReduceOp::avg) divide_in_place(t, size());
  }
  void do_broadcast(const Tensor& t, int src) override {
    mpi_check(MPI_Bcast(t.data_ptr(), mpi_count(t.numel(), "broadcast"),
                        mpi_type(t.dtype(), "broadcast"), src, comm_),
              "broadcast");
  }
  void do_all_gather(const Tensor& out, const Tensor& in) override {
    const int n = mpi_count(in.numel(), "all_gather");
    mpi_count(out.numel(), "all_gather");
    const MPI_Datatype type = mpi_type(in.dtype(), "all_gather");
    mpi_check(MPI_Allgather(in.data_ptr(), n, type, out.data_ptr(), n, type, comm_), "all_gather");
  }
  void do_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) override {
    mpi_count(in.numel(), "reduce_scatter");
    mpi_check(MPI_Reduce_scatter_block(in.data_ptr(), out.data_ptr(),
                                       mpi_count(out.numel(), "reduce_scatter"),
                                       mpi_type(in.dtype(), "reduce_scatter"), mpi_op(op), comm_),
              "reduce_scatter");
    if (op == ReduceOp::avg) divide_in_place(out, size());
  }
  void do_barrier() override { mpi_check(MPI_Barrier(comm_), "barrier"); }
  std::shared_ptr<ProcessGroup> do_split(int color, int key, uint64_t id) override {
    MPI_Comm comm = MPI_COMM_NULL;
    mpi_check(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &comm), "split");
    if (comm == MPI_COMM_NULL) return nullptr;
    return make_mpi_group(comm, id);
  }
  bool blocks_host() const override { return true; }
  DeviceType device_type() const override { return DeviceType::CPU; }

 private:
  MPI_Comm comm_;
};

}  // namespace

void ensure_mpi() {
  int initialised = 0, finalized = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalized);
  TL_CHECK(!finalized,
           "init_process_group: MPI was finalized in this process and cannot start "
           "again (destroy_process_group ends it)");
  if (initialised) return;
  int provided = 0;
  mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided),
            "init_process_group: MPI_Init_thread");
  g_we_initialised = true;
  std::atexit(finalize_at_exit);
  // Errors come back as codes that mpi_check turns into tl::Error, rather than aborting.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

void finalize_mpi_if_ours() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (g_we_initialised && !finalized) MPI_Finalize();
}

void free_comm(MPI_Comm& comm) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm != MPI_COMM_WORLD) MPI_Comm_free(&comm);
}

void mpi_agree(MPI_Comm comm, const int64_t (&sig)[4], std::string_view what) {
  // The minimum of each field and of its negation: both extremes in one all-reduce.
  int64_t v[8];
  for (int i = 0; i < 4; ++i) {
    v[i] = sig[i];
    v[4 + i] = -sig[i];
  }
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, v, 8, MPI_INT64_T, MPI_MIN, comm), what);
  static constexpr std::string_view kCollectives[] = {"all_reduce", "broadcast", "all_gather",
                                                      "reduce_scatter", "barrier"};
  const int64_t lo[4] = {v[0], v[1], v[2], v[3]}, hi[4] = {-v[4], -v[5], -v[6], -v[7]};
  TL_CHECK(lo[0] == hi[0], what, ": the ranks of the group called different collectives (",
           kCollectives[lo[0]], " and ", kCollectives[hi[0]],
           "); every rank must call the same collectives in the same order");
  TL_CHECK(lo[1] == hi[1], what, ": the ranks of the group passed different dtypes (",
           static_cast<ScalarType>(lo[1]), " and ", static_cast<ScalarType>(hi[1]), ")");
  TL_CHECK(lo[2] == hi[2], what, ": the ranks of the group passed tensors of different sizes (",
           lo[2], " to ", hi[2], " elements); every rank must pass the same shape");
  TL_CHECK(lo[3] == hi[3], what, ": the ranks of the group passed different ",
           sig[0] == 1 ? "source ranks (" : "reductions (",
           sig[0] == 1 ? std::to_string(lo[3]) : std::string(reduce_op_name(ReduceOp(lo[3]))),
           " and ",
           sig[0] == 1 ? std::to_string(hi[3]) : std::string(reduce_op_name(ReduceOp(hi[3]))), ")");
}

std::shared_ptr<ProcessGroup> make_mpi_group(MPI_Comm comm, uint64_t id) {
  int rank = 0, size = 0;
  mpi_check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  mpi_check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return std::make_shared<ProcessGroupMPI>(comm, rank, size, id);
}

}  // namespace tl::distributed::detail
