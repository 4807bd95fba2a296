// The backend-neutral half of a process group: argument checks, the agreement check, events.
#include "tensorlib/distributed/process_group.h"

#include <algorithm>
#include <utility>

#include "profiler/events/events.h"
#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/base/error.h"

namespace tl::distributed {

namespace ev = tidemark::events;

std::string_view reduce_op_name(ReduceOp op) {
  constexpr std::string_view names[] = {"sum", "avg", "max", "min"};
  return names[static_cast<int>(op)];
}

ProcessGroup::ProcessGroup(int rank, int size, std::string backend, uint64_t id)
    : rank_(rank), size_(size), backend_(std::move(backend)), id_(id) {}

ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::check_tensor(const Tensor& t, std::string_view op, std::string_view name) const {
  TL_CHECK(t.defined(), op, ": ", name, " is undefined");
  TL_CHECK(t.device().type() == device_type(), op, ": ", name, " is on ", t.device(), "; the ",
           backend_, " backend takes ",
           device_type() == DeviceType::CPU ? "CPU tensors" : "CUDA tensors");
  TL_CHECK(t.is_contiguous(), op, ": ", name, " must be contiguous (sizes ", t.sizes(),
           ", strides ", t.strides(), "); call .contiguous() first");
}

namespace {

void check_same(const Tensor& t, const Tensor& like, std::string_view op, std::string_view name,
                std::string_view like_name) {
  TL_CHECK(t.dtype() == like.dtype(), op, ": ", name, " is ", t.dtype(), " but ", like_name, " is ",
           like.dtype(), " (the dtypes must match)");
  TL_CHECK(t.numel() == like.numel(), op, ": ", name, " has ", t.numel(), " elements (sizes ",
           t.sizes(), ") but ", like_name, " has ", like.numel(), " (sizes ", like.sizes(), ")");
}

void check_avg(const Tensor& t, ReduceOp op, std::string_view what) {
  TL_CHECK(op != ReduceOp::avg || t.is_floating_point(), what,
           ": avg needs a floating-point tensor, got ", t.dtype());
}

}  // namespace

// Note [Agreement check]
// MPI and NCCL trust every rank to pass the same count and type: a mismatch truncates, reads
// past a buffer or hangs. So before each collective the ranks compare a signature (the
// collective, the dtype, the element count, and the root or reduction) in one small
// all-reduce of its minimum and maximum; when they differ, every rank throws the same
// tl::Error naming the field and the two extreme values, and no rank runs the collective. It
// costs one 64-byte all-reduce per collective (as torch.distributed's
// TORCH_DISTRIBUTED_DEBUG=DETAIL, which PyTorch leaves off by default).

template <class F>
void ProcessGroup::run(uint8_t op, const Tensor* tensor, uint64_t bytes, F&& body) {
  const bool record = ev::enabled();
  const uint64_t t0 = record ? ev::now_ns() : 0;
  body();
  if (!record) return;
  ev::Event e;
  e.device = tensor ? tensor->device().event_id() : ev::DeviceId{};
  e.ts_ns = ev::now_ns();
  const uint64_t duration = e.ts_ns - t0;
  if (blocks_host()) {
    e.kind = ev::Kind::sync;
    e.sync = {ev::SyncKind::collective, 0, duration};
    ev::dispatch(e);
  }
  e.kind = ev::Kind::collective;
  e.collective = {static_cast<ev::CollectiveOp>(op), bytes, static_cast<uint32_t>(size_),
                  static_cast<uint32_t>(rank_),      id_,   duration};
  ev::dispatch(e);
}

void ProcessGroup::all_reduce(const Tensor& tensor, ReduceOp op) {
  check_tensor(tensor, "all_reduce", "the tensor");
  check_avg(tensor, op, "all_reduce");
  run(uint8_t(ev::CollectiveOp::all_reduce), &tensor, tensor.nbytes(), [&] {
    agree({int64_t(ev::CollectiveOp::all_reduce), int64_t(tensor.dtype()), tensor.numel(),
           int64_t(op)},
          "all_reduce");
    do_all_reduce(tensor, op);
  });
  tensor.bump_version();
}

void ProcessGroup::broadcast(const Tensor& tensor, int src) {
  check_tensor(tensor, "broadcast", "the tensor");
  TL_CHECK(src >= 0 && src < size_, "broadcast: source rank ", src, " is not in the group (", size_,
           " ranks: 0 to ", size_ - 1, ")");
  run(uint8_t(ev::CollectiveOp::broadcast), &tensor, tensor.nbytes(), [&] {
    agree({int64_t(ev::CollectiveOp::broadcast), int64_t(tensor.dtype()), tensor.numel(), src},
          "broadcast");
    do_broadcast(tensor, src);
  });
  if (rank_ != src) tensor.bump_version();
}

void ProcessGroup::all_gather_into_tensor(const Tensor& output, const Tensor& input) {
  check_tensor(input, "all_gather", "the input");
  check_tensor(output, "all_gather", "the output");
  TL_CHECK(output.dtype() == input.dtype(), "all_gather: the output is ", output.dtype(),
           " but the input is ", input.dtype(), " (the dtypes must match)");
  TL_CHECK(output.numel() == input.numel() * size_, "all_gather: the output has ", output.numel(),
           " elements; it must hold ", size_, " x ", input.numel(),
           " (the group's size times the input's)");
  run(uint8_t(ev::CollectiveOp::all_gather), &input, input.nbytes(), [&] {
    agree({int64_t(ev::CollectiveOp::all_gather), int64_t(input.dtype()), input.numel(), 0},
          "all_gather");
    do_all_gather(output, input);
  });
  output.bump_version();
}

void ProcessGroup::all_gather(const std::vector<Tensor>& outputs, const Tensor& input) {
  check_tensor(input, "all_gather", "the input");
  TL_CHECK(static_cast<int>(outputs.size()) == size_, "all_gather: ", outputs.size(),
           " outputs for a group of ", size_, " ranks (one per rank)");
  for (size_t r = 0; r < outputs.size(); ++r) {
    TL_CHECK(outputs[r].defined(), "all_gather: output ", r, " is undefined");
    check_same(outputs[r], input, "all_gather", "output " + std::to_string(r), "the input");
  }
  Tensor flat = empty({input.numel() * size_}, input.options());
  all_gather_into_tensor(flat, input);
  NoGradGuard no_grad;
  for (int r = 0; r < size_; ++r) {
    Tensor out = outputs[r];
    out.copy_(flat.narrow(0, r * input.numel(), input.numel()).view(out.sizes()));
  }
}

void ProcessGroup::reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op) {
  check_tensor(input, "reduce_scatter", "the input");
  check_tensor(output, "reduce_scatter", "the output");
  check_avg(output, op, "reduce_scatter");
  TL_CHECK(output.dtype() == input.dtype(), "reduce_scatter: the output is ", output.dtype(),
           " but the input is ", input.dtype(), " (the dtypes must match)");
  TL_CHECK(input.numel() == output.numel() * size_, "reduce_scatter: the input has ", input.numel(),
           " elements; it must hold ", size_, " x ", output.numel(),
           " (the group's size times the output's)");
  run(uint8_t(ev::CollectiveOp::reduce_scatter), &input, input.nbytes(), [&] {
    agree({int64_t(ev::CollectiveOp::reduce_scatter), int64_t(input.dtype()), output.numel(),
           int64_t(op)},
          "reduce_scatter");
    do_reduce_scatter(output, input, op);
  });
  output.bump_version();
}

void ProcessGroup::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                  ReduceOp op) {
  check_tensor(output, "reduce_scatter", "the output");
  TL_CHECK(static_cast<int>(inputs.size()) == size_, "reduce_scatter: ", inputs.size(),
           " inputs for a group of ", size_, " ranks (one per rank)");
  for (size_t r = 0; r < inputs.size(); ++r) {
    TL_CHECK(inputs[r].defined(), "reduce_scatter: input ", r, " is undefined");
    check_same(inputs[r], output, "reduce_scatter", "input " + std::to_string(r), "the output");
  }
  NoGradGuard no_grad;
  Tensor flat = empty({output.numel() * size_}, output.options());
  for (int r = 0; r < size_; ++r)
    flat.narrow(0, r * output.numel(), output.numel()).copy_(inputs[r].reshape({-1}));
  reduce_scatter_tensor(output, flat, op);
}

void ProcessGroup::barrier() {
  run(uint8_t(ev::CollectiveOp::barrier), nullptr, 0, [&] {
    agree({int64_t(ev::CollectiveOp::barrier), 0, 0, 0}, "barrier");
    do_barrier();
  });
}

std::shared_ptr<ProcessGroup> ProcessGroup::split(int color, std::optional<int> key) {
  TL_CHECK(color >= -1, "split: color ", color, " must be -1 (no group) or at least 0");
  static uint64_t next_id = 1;  // creation order is the same on every rank (split is collective)
  return do_split(color, key.value_or(rank_), next_id++);
}

}  // namespace tl::distributed
