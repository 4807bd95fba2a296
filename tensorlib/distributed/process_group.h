// tl::distributed, as torch.distributed: process groups and their collectives (all_reduce,
// broadcast, all_gather, reduce_scatter, barrier) over MPI for CPU tensors and NCCL for CUDA
// tensors (docs/distributed.md). Built when CMake finds MPI (the NCCL backend when it also
// finds NCCL and the CUDA backend is built); no MPI or NCCL header is needed to use it.
//
// Every collective is a `collective` event, and its host wait a `sync` of kind `collective`
// (Note [Collectives] in profiler/events/events.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensorlib/core/tensor.h"

namespace tl::distributed {

enum class ReduceOp { sum, avg, max, min };
std::string_view reduce_op_name(ReduceOp op);

// Where this process sits in the job, as the launcher's environment says: mpirun's
// OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK, a PMI launcher's PMI_RANK / PMI_SIZE (Hydra's
// MPI_LOCALRANKID), torchrun's RANK / WORLD_SIZE / LOCAL_RANK, in that order of precedence.
struct LaunchEnv {
  std::optional<int> rank, world_size, local_rank;
  std::string
      source;  // the variables read ("OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE"), "" when none
};
// Reads the environment; a variable that is set but is not a number in range throws tl::Error
// naming it and its value.
LaunchEnv launch_environment();

// A set of processes that run collectives together, as torch.distributed.ProcessGroup. Every
// process of the group calls the same collectives in the same order with tensors of the same
// shape and dtype; a mismatch between ranks is detected and thrown as tl::Error on every rank
// (Note [Agreement check] in process_group.cpp). Tensors must be contiguous and on the
// backend's device (CPU for MPI, CUDA for NCCL). Collectives write their results in place and
// bump the written tensors' version counters, as in-place ops do; they are not recorded by
// autograd.
class ProcessGroup {
 public:
  virtual ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // "mpi" or "nccl".
  const std::string& backend() const { return backend_; }
  // 0 for the default group; groups made by split() count up from 1 in creation order.
  uint64_t id() const { return id_; }

  // `tensor` becomes the reduction of every rank's `tensor` (avg: the sum divided by size()).
  void all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::sum);
  // `tensor` becomes rank `src`'s.
  void broadcast(const Tensor& tensor, int src = 0);
  // outputs[r] becomes rank r's `input`; size() outputs of the input's shape and dtype.
  void all_gather(const std::vector<Tensor>& outputs, const Tensor& input);
  // `output` (size() times the input's elements) becomes the ranks' inputs, concatenated.
  void all_gather_into_tensor(const Tensor& output, const Tensor& input);
  // `output` becomes the reduction over ranks of their inputs[rank()]; size() inputs of the
  // output's shape and dtype.
  void reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                      ReduceOp op = ReduceOp::sum);
  // `output` becomes the reduction of the rank()-th of size() equal slices of every rank's
  // `input` (size() times the output's elements).
  void reduce_scatter_tensor(const Tensor& output, const Tensor& input,
                             ReduceOp op = ReduceOp::sum);
  // Returns when every rank of the group has called it.
  void barrier();
  // The groups of processes that pass the same `color`, ranked by `key` (ties by rank()), as
  // MPI_Comm_split; every rank of this group calls it. A color of -1 joins no group (null).
  std::shared_ptr<ProcessGroup> split(int color, std::optional<int> key = std::nullopt);

 protected:
  ProcessGroup(int rank, int size, std::string backend, uint64_t id);

  // The backend's half: called with checked, contiguous tensors on the backend's device.
  // `signature` is what every rank must agree on (Note [Agreement check]).
  virtual void agree(const int64_t (&signature)[4], std::string_view what) = 0;
  virtual void do_all_reduce(const Tensor& tensor, ReduceOp op) = 0;
  virtual void do_broadcast(const Tensor& tensor, int src) = 0;
  virtual void do_all_gather(const Tensor& output, const Tensor& input) = 0;
  virtual void do_reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) = 0;
  virtual void do_barrier() = 0;
  virtual std::shared_ptr<ProcessGroup> do_split(int color, int key, uint64_t id) = 0;
  // Whether a collective returns only once it completed (MPI), so the call is a host wait.
  virtual bool blocks_host() const = 0;
  // The device tensors of this backend live on.
  virtual DeviceType device_type() const = 0;

 private:
  void check_tensor(const Tensor& t, std::string_view op, std::string_view name) const;
  template <class F>
  void run(uint8_t op, const Tensor* tensor, uint64_t bytes, F&& body);

  int rank_, size_;
  std::string backend_;
  uint64_t id_;
};

// ---- The default group, as torch.distributed's module functions -------------------------

// Starts the default group of every process of the job: "mpi" (CPU tensors) or "nccl" (CUDA
// tensors; its communicator is set up over MPI, and each process takes the CUDA device
// LOCAL_RANK modulo the device count). Initialises MPI when the program has not. Throws
// tl::Error when a group already exists, the backend is unknown or not built, or the
// launcher's environment (launch_environment) disagrees with MPI's view of the job (a program
// started by torchrun or by hand rather than by mpirun).
void init_process_group(std::string_view backend = "mpi");
bool is_initialized();
// Whether the backend was built into this tensorlib ("mpi" always, "nccl" when NCCL was found).
bool is_backend_available(std::string_view backend);
// The default group; throws tl::Error naming the call when init_process_group has not run.
ProcessGroup& default_group();
std::shared_ptr<ProcessGroup> default_group_ptr();
int get_rank();
int get_world_size();
// Ends the default group (and MPI, when init_process_group started it; MPI cannot start again
// in the same process). Also done at exit.
void destroy_process_group();

// The collectives of the default group.
void all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::sum);
void broadcast(const Tensor& tensor, int src = 0);
void all_gather(const std::vector<Tensor>& outputs, const Tensor& input);
void reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                    ReduceOp op = ReduceOp::sum);
void barrier();

}  // namespace tl::distributed
