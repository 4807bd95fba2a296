// tl::nn::DistributedDataParallel, as torch.nn.parallel.DistributedDataParallel: one replica
// of a module per process, kept identical by averaging the gradients across the processes of
// a group during backward (docs/distributed.md).
//
// Note [DDP buckets]
// As PyTorch's Reducer: the parameters that require grad are packed, in reverse order of
// parameters() (roughly the order backward produces their gradients) and by dtype, into
// buckets: the first closes once it holds 1 MiB (torch.distributed's
// _DEFAULT_FIRST_BUCKET_BYTES, so communication starts early), the others once they hold
// bucket_cap_mb MiB. A bucket is one flat tensor per dtype and device, tagged `comm_buffer`
// for the profiler. When a parameter's gradient is accumulated (its post-accumulate-grad hook),
// it is copied into its place in the bucket; once every gradient of a bucket is in, and every
// bucket before it has been reduced (buckets go in index order, so every rank issues the same
// collectives in the same order), the bucket is all-reduced with ReduceOp::avg and the averages
// are copied back into the parameters' .grad. A parameter that got no gradient leaves its
// bucket unreduced: the next forward() throws, naming it (PyTorch's find_unused_parameters is
// not supported).
#pragma once

#include <memory>
#include <vector>

#include "tensorlib/distributed/process_group.h"
#include "tensorlib/nn/module.h"

namespace tl::nn {

struct DistributedDataParallelOptions {
  // Bucket capacity in MiB (PyTorch's bucket_cap_mb); the first bucket holds 1 MiB.
  double bucket_cap_mb = 25;
  // Broadcast the module's buffers (batch norm statistics) from rank 0 before each forward in
  // training mode.
  bool broadcast_buffers = true;
  // The group to average over; null: the default group (init_process_group).
  std::shared_ptr<distributed::ProcessGroup> process_group;
};

namespace detail {
struct Reducer;
}

class DistributedDataParallel : public Module {
 public:
  // Broadcasts `module`'s parameters and buffers from rank 0 (so every replica starts equal)
  // and hooks its parameters' gradient accumulation. Move the module to its device before
  // wrapping it: the hooks belong to the parameters it has now.
  explicit DistributedDataParallel(std::shared_ptr<Module> module,
                                   DistributedDataParallelOptions options = {});
  ~DistributedDataParallel() override;

  // Runs the module. Throws tl::Error when the previous backward left a bucket unreduced
  // (Note [DDP buckets]).
  Tensor forward(const Tensor& input) override;

  Module& module() { return *module_; }
  const std::shared_ptr<Module>& module_ptr() const { return module_; }
  distributed::ProcessGroup& process_group() const;

  // Skips the gradient reduction while alive, as PyTorch's no_sync(): backward accumulates
  // gradients locally, and the first backward after it reduces the accumulated gradients.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    std::shared_ptr<detail::Reducer> reducer_;
    bool previous_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }

  // The buckets: indices into module().parameters() (those that require grad), in the order
  // they are reduced (Note [DDP buckets]).
  std::vector<std::vector<size_t>> bucket_indices() const;
  // The bucket tensors (one per bucket, flat), for tests and tools.
  std::vector<Tensor> bucket_tensors() const;

 private:
  std::shared_ptr<Module> module_;
  DistributedDataParallelOptions options_;
  std::shared_ptr<detail::Reducer> reducer_;
};

}  // namespace tl::nn
