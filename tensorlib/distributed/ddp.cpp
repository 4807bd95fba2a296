#include "tensorlib/distributed/ddp.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/base/error.h"
#include "tensorlib/core/memory_category.h"

namespace tl::nn {

namespace detail {

// The gradient reduction of one DistributedDataParallel (Note [DDP buckets]). The parameters'
// hooks hold it weakly, so a hook that outlives its DDP does nothing.
struct Reducer {
  struct Bucket {
    Tensor buffer;               // flat; tagged comm_buffer
    std::vector<size_t> params;  // indices into Reducer::params
    std::vector<int64_t> offsets;
    size_t pending = 0;  // gradients still to arrive in this iteration
  };

  std::shared_ptr<distributed::ProcessGroup> group;
  std::vector<Tensor> params;  // those that require grad, in parameters() order
  std::vector<std::string> names;
  std::vector<std::pair<size_t, size_t>> where;  // param -> (bucket, slot in the bucket)
  std::vector<Bucket> buckets;
  std::vector<bool> ready;
  size_t next_bucket = 0;     // the next bucket to reduce
  bool in_iteration = false;  // a gradient arrived and not every bucket is reduced yet
  bool sync = true;           // false inside no_sync()

  void build_buckets(double cap_mb);
  void on_grad(size_t i);
  void reduce_ready_buckets();
  void start_iteration();
  void check_finished();
};

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kFirstBucketBytes = 1 * kMiB;  // torch.distributed._DEFAULT_FIRST_BUCKET_BYTES

}  // namespace

void Reducer::build_buckets(double cap_mb) {
  // As PyTorch's compute_bucket_assignment_by_size: per dtype and device, a bucket closes once
  // it reaches its limit (1 MiB for the first, cap_mb after); buckets are then ordered by the
  // earliest (reversed) parameter they hold.
  struct Open {
    std::vector<size_t> params;
    double bytes = 0;
    bool first = true;
  };
  std::map<std::tuple<int, int, int>, Open> open;
  std::vector<std::vector<size_t>> closed;
  for (size_t k = params.size(); k-- > 0;) {
    const Tensor& p = params[k];
    Open& o = open[{int(p.dtype()), int(p.device().type()), int(p.device().index())}];
    o.params.push_back(k);
    o.bytes += static_cast<double>(p.nbytes());
    if (o.bytes >= (o.first ? kFirstBucketBytes : cap_mb * kMiB)) {
      closed.push_back(std::move(o.params));
      o = {{}, 0, false};
    }
  }
  for (auto& [key, o] : open)
    if (!o.params.empty()) closed.push_back(std::move(o.params));
  // Reversed position of a bucket's first parameter: larger parameter index comes first.
  std::sort(closed.begin(), closed.end(),
            [](const auto& a, const auto& b) { return a.front() > b.front(); });

  where.resize(params.size());
  for (auto& indices : closed) {
    Bucket b;
    int64_t numel = 0;
    for (size_t i : indices) {
      where[i] = {buckets.size(), b.params.size()};
      b.params.push_back(i);
      b.offsets.push_back(numel);
      numel += params[i].numel();
    }
    b.buffer = zeros({numel}, params[indices.front()].options());
    set_memory_category(b.buffer, MemoryCategory::comm_buffer);
    buckets.push_back(std::move(b));
  }
  ready.assign(params.size(), false);
}

void Reducer::start_iteration() {
  for (Bucket& b : buckets) b.pending = b.params.size();
  ready.assign(params.size(), false);
  next_bucket = 0;
  in_iteration = true;
}

void Reducer::on_grad(size_t i) {
  if (!sync) return;
  if (!in_iteration) start_iteration();
  TL_CHECK(!ready[i], "DistributedDataParallel: the gradient of ", names[i],
           " arrived twice before every bucket was reduced (a second backward through a graph "
           "whose first left parameters without a gradient)");
  ready[i] = true;
  auto [bucket, slot] = where[i];
  Bucket& b = buckets[bucket];
  {
    NoGradGuard no_grad;
    const Tensor& grad = params[i].grad();
    b.buffer.narrow(0, b.offsets[slot], params[i].numel()).copy_(grad.reshape({-1}));
  }
  --b.pending;
  reduce_ready_buckets();
}

void Reducer::reduce_ready_buckets() {
  while (next_bucket < buckets.size() && buckets[next_bucket].pending == 0) {
    Bucket& b = buckets[next_bucket];
    group->all_reduce(b.buffer, distributed::ReduceOp::avg);
    NoGradGuard no_grad;
    for (size_t slot = 0; slot < b.params.size(); ++slot) {
      Tensor& grad = params[b.params[slot]].mutable_grad();
      grad.copy_(b.buffer.narrow(0, b.offsets[slot], grad.numel()).view(grad.sizes()));
    }
    ++next_bucket;
  }
  if (next_bucket == buckets.size()) in_iteration = false;
}

void Reducer::check_finished() {
  if (!in_iteration) return;
  std::string missing;
  size_t count = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (ready[i]) continue;
    if (++count <= 5) missing += (missing.empty() ? "" : ", ") + names[i];
  }
  in_iteration = false;  // the next backward starts afresh
  TL_CHECK(false, "DistributedDataParallel: the previous backward gave no gradient to ", count,
           " parameter", count == 1 ? "" : "s", " (", missing, count > 5 ? ", ..." : "",
           "), so their buckets were never reduced: every parameter that requires grad must take "
           "part in the loss");
}

}  // namespace detail

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module,
                                                 DistributedDataParallelOptions options)
    : module_(std::move(module)), options_(std::move(options)) {
  TL_CHECK(module_, "DistributedDataParallel: the module is null");
  TL_CHECK(options_.bucket_cap_mb > 0,
           "DistributedDataParallel: bucket_cap_mb must be positive, got ", options_.bucket_cap_mb);
  register_module("module", module_);
  reducer_ = std::make_shared<detail::Reducer>();
  reducer_->group =
      options_.process_group ? options_.process_group : distributed::default_group_ptr();
  // Every replica starts from rank 0's parameters and buffers.
  for (auto& [name, p] : module_->named_parameters()) reducer_->group->broadcast(p, 0);
  for (auto& [name, b] : module_->named_buffers()) reducer_->group->broadcast(b, 0);
  for (auto& [name, p] : module_->named_parameters()) {
    if (!p.requires_grad()) continue;
    reducer_->params.push_back(p);
    reducer_->names.push_back(name);
  }
  reducer_->build_buckets(options_.bucket_cap_mb);
  std::weak_ptr<detail::Reducer> weak = reducer_;
  for (size_t i = 0; i < reducer_->params.size(); ++i) {
    reducer_->params[i].register_post_accumulate_grad_hook([weak, i](const Tensor&) {
      if (auto r = weak.lock()) r->on_grad(i);
    });
  }
}

DistributedDataParallel::~DistributedDataParallel() = default;

Tensor DistributedDataParallel::forward(const Tensor& input) {
  reducer_->check_finished();
  if (options_.broadcast_buffers && is_training() && is_grad_enabled()) {
    for (auto& [name, b] : module_->named_buffers()) reducer_->group->broadcast(b, 0);
  }
  return (*module_)(input);
}

distributed::ProcessGroup& DistributedDataParallel::process_group() const {
  return *reducer_->group;
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp)
    : reducer_(ddp.reducer_), previous_(ddp.reducer_->sync) {
  reducer_->sync = false;
}

DistributedDataParallel::NoSync::~NoSync() {
  reducer_->sync = previous_;
}

std::vector<std::vector<size_t>> DistributedDataParallel::bucket_indices() const {
  std::vector<std::vector<size_t>> out;
  for (const auto& b : reducer_->buckets) out.push_back(b.params);
  return out;
}

std::vector<Tensor> DistributedDataParallel::bucket_tensors() const {
  std::vector<Tensor> out;
  for (const auto& b : reducer_->buckets) out.push_back(b.buffer);
  return out;
}

}  // namespace tl::nn
