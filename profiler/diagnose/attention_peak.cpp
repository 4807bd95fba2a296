// attention-peak (profiler/diagnose/diagnose.h): attention's B x H x S x S score and softmax
// tensors set the peak. docs/diagnoses.md gives its evidence and thresholds.
#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/analysis/memory.h"
#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"

namespace tidemark::diagnose::detail {

namespace {

// What makes it a finding: the scores live at the peak are at least this share of it (they
// dominate it: the share of a major finding, Note [Severity]) and at least kMinAttentionBytes
// (below, the quadratic term is not what limits the run on any accelerator: a fused kernel
// would not change which batch or context fits).
constexpr double kMinAttentionShare = kMajorMemoryShare;
constexpr int64_t kMinAttentionBytes = 1LL << 30;

bool contains_nocase(std::string_view s, std::string_view needle) {
  auto it = std::search(s.begin(), s.end(), needle.begin(), needle.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == b;
  });
  return it != s.end();
}

// Whether an allocation's stack is inside an attention that materialises its scores: a frame
// whose function is named for attention (a hand-written `scaled_dot_product_attention`,
// transformers' `eager_attention_forward` or `_attn`, torch's `multi_head_attention_forward`,
// ATen's `_scaled_dot_product_attention_math`), and no frame of a fused kernel (flash,
// memory-efficient, cuDNN or flex attention), whose allocations are outputs and row
// statistics, never S x S.
struct AttentionFrames {
  bool attention = false, fused = false, math_backend = false;
};
AttentionFrames attention_frames(const Trace& t, uint64_t stack) {
  AttentionFrames a;
  for (const store::ResolvedFrame& r : t.resolved_frames(stack)) {
    const std::string_view fn = r.function;
    if (contains_nocase(fn, "flash") || contains_nocase(fn, "efficient_attention") ||
        contains_nocase(fn, "cudnn_attention") || contains_nocase(fn, "flex_attention"))
      a.fused = true;
    if (contains_nocase(fn, "attention") || contains_nocase(fn, "attn")) a.attention = true;
    if (contains_nocase(fn, "_scaled_dot_product_attention_math")) a.math_backend = true;
  }
  return a;
}

}  // namespace

// Note [Attention peak]: attention written out (scores = q @ k^T / sqrt(d), a mask, softmax,
// dropout) materialises B x H x S x S tensors, several at once, that grow with the square of
// the sequence; a fused kernel (torch.nn.functional.scaled_dot_product_attention's flash or
// memory-efficient backend) computes the same result in tiles and never holds them, and in
// training it recomputes them in backward instead of saving the softmax. The finding: at the
// device's allocated peak, the live allocations made inside an attention function that is not
// a fused kernel are at least kMinAttentionShare of the peak and kMinAttentionBytes. It reports
// them (their count, and the largest size with how many share it: the S x S tensors), the
// phase, and the peak without them as the saving (a fused kernel's own output is B x H x S x D,
// small beside S x S, and is not subtracted). What it cannot see: an attention in a function
// not named for it (a `forward` of a class called Attention: Python frames carry the
// function's name, not its class's), and the scores of a compiled model whose kernels are
// fused by the compiler. A snapshot of one moment has no peak to read (Note [State-only
// snapshots]).
void detect_attention_peak(const Trace& trace, Diagnosis& out) {
  const WindowPhases phases = window_phases(trace);
  for (const DeviceRef& dev : trace.devices()) {
    if (state_only(trace, dev.id)) continue;
    const std::optional<TimePoint> at = peak_point(trace, dev.id);
    const std::optional<store::Peak> pk = peak(trace, dev.id, store::Curve::allocated);
    if (!at || !pk || pk->bytes <= 0) continue;
    std::map<uint64_t, AttentionFrames> memo;
    std::map<uint64_t, uint64_t> by_size;  // size -> count of the attention allocations
    int64_t bytes = 0;
    uint64_t count = 0, largest_stack = 0, largest = 0;
    bool math_backend = false;
    for (const store::AllocationRow& r : live_allocations(trace, dev.id, *at)) {
      if (!r.stack_id) continue;
      auto [it, fresh] = memo.try_emplace(r.stack_id);
      if (fresh) it->second = attention_frames(trace, r.stack_id);
      if (!it->second.attention || it->second.fused) continue;
      bytes += static_cast<int64_t>(r.size);
      ++count;
      ++by_size[r.size];
      math_backend = math_backend || it->second.math_backend;
      if (r.size > largest) largest = r.size, largest_stack = r.stack_id;
    }
    if (count == 0 || bytes < kMinAttentionBytes ||
        static_cast<double>(bytes) < kMinAttentionShare * static_cast<double>(pk->bytes))
      continue;
    const bool backward = phases.known && phases.backward;
    const std::string phase = phase_label(phases);
    Finding f;
    f.id = "attention-peak";
    f.device = dev.name;
    f.bytes = bytes;
    f.title = "attention's score tensors set the peak: " + std::to_string(by_size[largest]) +
              " of " + format_bytes(static_cast<int64_t>(largest)) + " (B x H x S x S) among " +
              format_bytes(bytes) + " live in attention at a " + format_bytes(pk->bytes) + " peak";
    set_site(trace, largest_stack, f);
    f.evidence = {
        {"peak allocated", bytes_text(pk->bytes) + " at " + trace.time_text(pk->ts_ns)},
        {"live in attention at the peak",
         bytes_text(bytes) + " in " + std::to_string(count) + " allocations"},
        {"largest (the scores, S x S per head)",
         std::to_string(by_size[largest]) + " x " + bytes_text(static_cast<int64_t>(largest))},
        {"peak without them", bytes_text(pk->bytes - bytes)}};
    if (!phase.empty()) f.evidence.insert(f.evidence.begin(), {"phase", phase});
    note_inferred(trace, f);
    f.fix = math_backend
                ? "scaled_dot_product_attention ran its math backend, which materialises the "
                  "scores: give it inputs a fused backend takes (float16 or bfloat16, a causal "
                  "flag instead of a dense mask) so flash or memory-efficient attention runs."
                : std::string(
                      "Compute attention with torch.nn.functional.scaled_dot_product_attention "
                      "(is_causal=True for a causal mask): its flash and memory-efficient kernels "
                      "never hold the S x S scores (by hand: a block of queries at a time)") +
                      (backward ? ", and recompute them in backward instead of saving them."
                                : ", so the peak falls to about the one without them.");
    out.findings.push_back(std::move(f));
  }
}

}  // namespace tidemark::diagnose::detail
