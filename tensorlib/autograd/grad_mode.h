// Grad mode, as torch.no_grad / enable_grad / set_grad_enabled: whether ops record the graph.
#pragma once

namespace tl {

namespace autograd {
bool is_grad_enabled();
void set_grad_enabled(bool enabled);
}  // namespace autograd

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

}  // namespace tl
