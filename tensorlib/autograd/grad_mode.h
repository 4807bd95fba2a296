// Grad mode, as torch.no_grad / enable_grad / set_grad_enabled: whether ops record the graph.
#pragma once

namespace tl {

namespace autograd {
bool is_grad_enabled();
void set_grad_enabled(bool enabled);
bool is_inference_mode_enabled();
void set_inference_mode(bool enabled);
// Anomaly mode (torch.autograd.detect_anomaly): nodes remember where forward created them,
// and backward raises an error naming the node when one returns NaN.
bool is_anomaly_enabled();
void set_detect_anomaly(bool enabled);
}  // namespace autograd

// Anomaly detection for a scope (torch.autograd.detect_anomaly()).
class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard() : prev_(autograd::is_anomaly_enabled()) {
    autograd::set_detect_anomaly(true);
  }
  ~DetectAnomalyGuard() { autograd::set_detect_anomaly(prev_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool prev_;
};

using autograd::is_grad_enabled;
using autograd::set_grad_enabled;

// Sets grad mode for a scope (torch's AutoGradMode).
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : prev_(autograd::is_grad_enabled()) {
    autograd::set_grad_enabled(enabled);
  }
  ~AutoGradMode() { autograd::set_grad_enabled(prev_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool prev_;
};

// Ops inside do not record a graph (torch::NoGradGuard).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(autograd::is_grad_enabled()) { autograd::set_grad_enabled(false); }
  ~NoGradGuard() { autograd::set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Re-enables recording inside a NoGradGuard (torch.enable_grad).
class EnableGradGuard {
 public:
  EnableGradGuard() : prev_(autograd::is_grad_enabled()) { autograd::set_grad_enabled(true); }
  ~EnableGradGuard() { autograd::set_grad_enabled(prev_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

// torch::InferenceMode: no graph, and tensors created inside are inference tensors, which
// may not be saved for backward later (PyTorch's error).
class InferenceMode {
 public:
  explicit InferenceMode(bool enabled = true)
      : prev_grad_(autograd::is_grad_enabled()), prev_(autograd::is_inference_mode_enabled()) {
    autograd::set_inference_mode(enabled);
    if (enabled) autograd::set_grad_enabled(false);
  }
  ~InferenceMode() {
    autograd::set_inference_mode(prev_);
    autograd::set_grad_enabled(prev_grad_);
  }
  InferenceMode(const InferenceMode&) = delete;
  InferenceMode& operator=(const InferenceMode&) = delete;

 private:
  bool prev_grad_, prev_;
};

}  // namespace tl
