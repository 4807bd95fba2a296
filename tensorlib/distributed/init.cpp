// The default process group: the launcher's environment, init_process_group, and the module
// functions of torch.distributed.
#include <charconv>
#include <cstdlib>
#include <mutex>
#include <string>

#include "tensorlib/base/error.h"
#include "tensorlib/distributed/mpi_internal.h"

namespace tl::distributed {

namespace {

std::mutex g_mutex;
std::shared_ptr<ProcessGroup> g_default;

// The value of `name` as an int in [lo, hi], nullopt when unset.
std::optional<int> env_int(const char* name, int lo, int hi) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  std::string_view s(v);
  int out = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  TL_CHECK(ec == std::errc() && end == s.data() + s.size() && out >= lo && out <= hi,
           "init_process_group: ", name, "='", s, "' is not ",
           lo == 0 ? "a rank (an integer from 0)" : "a process count (an integer from 1)");
  return out;
}

// The first pair of (rank, size) variables that is set.
struct Source {
  const char* rank;
  const char* size;
  const char* local_rank;
};
constexpr Source kSources[] = {
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"RANK", "WORLD_SIZE", "LOCAL_RANK"},
};

}  // namespace

LaunchEnv launch_environment() {
  LaunchEnv env;
  constexpr int kMax = 1 << 24;
  for (const Source& s : kSources) {
    std::optional<int> rank = env_int(s.rank, 0, kMax), size = env_int(s.size, 1, kMax);
    if (!rank && !size) continue;
    TL_CHECK(rank && size, "init_process_group: ", rank ? s.rank : s.size, " is set but ",
             rank ? s.size : s.rank, " is not (a launcher sets both)");
    TL_CHECK(*rank < *size, "init_process_group: ", s.rank, "=", *rank, " is not below ", s.size,
             "=", *size);
    env.rank = rank;
    env.world_size = size;
    env.local_rank = env_int(s.local_rank, 0, kMax);
    env.source = std::string(s.rank) + ", " + s.size;
    break;
  }
  if (!env.local_rank) env.local_rank = env_int("LOCAL_RANK", 0, kMax);
  return env;
}

bool is_backend_available(std::string_view backend) {
  return backend == "mpi" || (backend == "nccl" && detail::nccl_built());
}

void init_process_group(std::string_view backend) {
  std::lock_guard lock(g_mutex);
  TL_CHECK(!g_default, "init_process_group: the default process group is already initialised ", "(",
           g_default->backend(), ", rank ", g_default->rank(), " of ", g_default->size(), ")");
  TL_CHECK(backend == "mpi" || backend == "nccl", "init_process_group: unknown backend '", backend,
           "' (mpi or nccl)");
  TL_CHECK(is_backend_available(backend), "init_process_group: the ", backend,
           " backend is not built into this tensorlib (NCCL and the CUDA backend were not found "
           "when it was configured)");
  const LaunchEnv env = launch_environment();
  detail::ensure_mpi();
  int rank = 0, size = 1;
  detail::mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "init_process_group: MPI_Comm_rank");
  detail::mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &size), "init_process_group: MPI_Comm_size");
  TL_CHECK(!env.rank || (*env.rank == rank && *env.world_size == size),
           "init_process_group: the environment (", env.source, ") says rank ", *env.rank, " of ",
           *env.world_size, " but MPI's world has this process as rank ", rank, " of ", size,
           ": start the processes with mpirun -np ", *env.world_size,
           " (tensorlib's process groups run on MPI)");
  g_default = backend == "mpi"
                  ? detail::make_mpi_group(MPI_COMM_WORLD, 0)
                  : detail::make_nccl_group(MPI_COMM_WORLD, 0, env.local_rank.value_or(0));
}

bool is_initialized() {
  std::lock_guard lock(g_mutex);
  return g_default != nullptr;
}

std::shared_ptr<ProcessGroup> default_group_ptr() {
  std::lock_guard lock(g_mutex);
  TL_CHECK(g_default,
           "tl::distributed: the default process group is not initialised; call "
           "init_process_group() first");
  return g_default;
}

ProcessGroup& default_group() {
  return *default_group_ptr();
}
int get_rank() {
  return default_group().rank();
}
int get_world_size() {
  return default_group().size();
}

void destroy_process_group() {
  std::lock_guard lock(g_mutex);
  g_default.reset();
  detail::finalize_mpi_if_ours();
}

void all_reduce(const Tensor& tensor, ReduceOp op) {
  default_group().all_reduce(tensor, op);
}
void broadcast(const Tensor& tensor, int src) {
  default_group().broadcast(tensor, src);
}
void all_gather(const std::vector<Tensor>& outputs, const Tensor& input) {
  default_group().all_gather(outputs, input);
}
void reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) {
  default_group().reduce_scatter(output, inputs, op);
}
void barrier() {
  default_group().barrier();
}

}  // namespace tl::distributed
