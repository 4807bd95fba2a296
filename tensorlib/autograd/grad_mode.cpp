#include "tensorlib/autograd/grad_mode.h"

#include <atomic>

namespace tl::autograd {

namespace {
thread_local bool t_grad_enabled = true;
thread_local bool t_inference_mode = false;
}  // namespace

std::atomic<bool> g_anomaly{false};  // process-wide, as PyTorch's
bool is_anomaly_enabled() {
  return g_anomaly.load(std::memory_order_relaxed);
}
void set_detect_anomaly(bool enabled) {
  g_anomaly.store(enabled);
}

bool is_inference_mode_enabled() {
  return t_inference_mode;
}
void set_inference_mode(bool enabled) {
  t_inference_mode = enabled;
}

bool is_grad_enabled() {
  return t_grad_enabled;
}
void set_grad_enabled(bool enabled) {
  t_grad_enabled = enabled;
}

}  // namespace tl::autograd
