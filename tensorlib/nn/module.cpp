#include "tensorlib/nn/module.h"

#include <cmath>
#include <optional>
#include <set>

#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/core/memory_category.h"

namespace tl::nn {

Tensor& Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  TL_CHECK(!name.empty() && name.find('.') == std::string::npos,
           "parameter name must be non-empty and contain no '.', got '", name, "'");
  for (const auto& [n, existing] : params_)
    TL_CHECK(n != name, "attribute '", name, "' already exists");
  if (requires_grad && t.defined()) t.requires_grad_();
  set_memory_category(t, MemoryCategory::parameter);
  params_.emplace_back(name, std::move(t));
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  TL_CHECK(!name.empty() && name.find('.') == std::string::npos,
           "buffer name must be non-empty and contain no '.', got '", name, "'");
  buffers_.emplace_back(name, std::move(t));
  return buffers_.back().second;
}

void Module::set_path(const std::string& path) {
  path_ = path;
  for (auto& [name, child] : children_) child->set_path(path_ + "." + name);
}

namespace {
// Walks the children directly (not named_modules), so a module that is not owned by a
// shared_ptr (a local `nn::BatchNorm2d bn(4);`) can still list its tensors.
template <typename Get>
void collect(const Module& m, const std::string& prefix, bool recurse, Get get,
             std::vector<std::pair<std::string, Tensor>>& out) {
  for (const auto& [name, t] : get(m))
    if (t.defined()) out.emplace_back(prefix + name, t);
  if (!recurse) return;
  for (const auto& [name, child] : m.named_children())
    collect(*child, prefix + name + ".", true, get, out);
}
}  // namespace

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect(
      *this, "", recurse, [](const Module& m) -> const auto& { return m.params_; }, out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect(
      *this, "", recurse, [](const Module& m) -> const auto& { return m.buffers_; }, out);
  return out;
}

// Descendants with their dotted names relative to this module ("" for this module itself).
std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() const {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  out.emplace_back("", std::const_pointer_cast<Module>(shared_from_this()));
  for (const auto& [name, child] : children_) {
    for (auto& [n, m] : child->named_modules())
      out.emplace_back(n.empty() ? name : name + "." + n, m);
  }
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [n, c] : children_) out.push_back(c);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::zero_grad(bool set_to_none) {
  for (Tensor& p : parameters()) {
    if (set_to_none) {
      p.mutable_grad() = Tensor();
    } else if (p.grad().defined()) {
      p.mutable_grad().zero_();
    }
  }
}

std::map<std::string, Tensor> Module::state_dict() const {
  std::map<std::string, Tensor> out;
  for (auto& [n, t] : named_parameters()) out[n] = t;
  for (auto& [n, t] : named_buffers()) out[n] = t;
  return out;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state) {
  auto mine = state_dict();
  for (const auto& [name, t] : state)
    TL_CHECK(mine.count(name), "load_state_dict: unexpected key '", name, "'");
  NoGradGuard no_grad;
  for (auto& [name, t] : mine) {
    auto it = state.find(name);
    TL_CHECK(it != state.end(), "load_state_dict: missing key '", name, "'");
    TL_CHECK(it->second.sizes() == t.sizes(), "load_state_dict: size mismatch for '", name,
             "': copying a param with shape ", it->second.sizes(),
             ", the shape in the current "
             "model is ",
             t.sizes());
    t.copy_(it->second);
  }
}

namespace {
// Uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)].
Tensor uniform_init(IntArrayRef sizes, int64_t in_features, int64_t out_features) {
  TL_CHECK(in_features > 0 && out_features > 0, "Linear: features must be positive, got ",
           in_features, " and ", out_features);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  return tl::rand(sizes) * (2 * bound) - bound;
}
}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias)
    : Module("linear"),
      weight(register_parameter(
          "weight", uniform_init({out_features, in_features}, in_features, out_features))),
      bias(register_parameter(
          "bias", with_bias ? uniform_init({out_features}, in_features, out_features) : Tensor())) {
}

Tensor Linear::forward(const Tensor& x) {
  return bias.defined() ? tl::matmul(x, weight.t()) + bias : tl::matmul(x, weight.t());
}

namespace {
Tensor convert(const Tensor& t, std::optional<Device> device, std::optional<ScalarType> dtype) {
  ScalarType dt = dtype && t.is_floating_point() ? *dtype : t.dtype();
  Device dev = device ? *device : t.device();
  if (dt == t.dtype() && dev.resolved() == t.device().resolved()) return t;
  return t.detach().to(dev, dt, /*copy=*/true);
}

void convert_all(std::deque<std::pair<std::string, Tensor>>& params,
                 std::deque<std::pair<std::string, Tensor>>& buffers, std::optional<Device> device,
                 std::optional<ScalarType> dtype) {
  NoGradGuard no_grad;
  for (auto& [name, p] : params) {
    if (!p.defined()) continue;
    Tensor moved = convert(p, device, dtype);
    if (moved.is_same(p)) continue;
    if (p.requires_grad()) moved.requires_grad_();
    if (p.grad().defined()) moved.mutable_grad() = convert(p.grad(), device, dtype);
    p = moved;
  }
  for (auto& [name, b] : buffers)
    if (b.defined()) b = convert(b, device, dtype);
}
}  // namespace

Module& Module::to(Device device) {
  return to_impl(device, std::nullopt);
}
Module& Module::to(ScalarType dtype) {
  return to_impl(std::nullopt, dtype);
}
Module& Module::to(Device device, ScalarType dtype) {
  return to_impl(device, dtype);
}

Module& Module::to_impl(std::optional<Device> device, std::optional<ScalarType> dtype) {
  TL_CHECK(!dtype || is_floating_point(*dtype),
           "nn.Module.to only accepts floating point dtypes, but got desired dtype=", *dtype);
  convert_all(params_, buffers_, device, dtype);
  for (auto& [name, p] : params_) set_memory_category(p, MemoryCategory::parameter);
  for (auto& [name, child] : children_) child->to_impl(device, dtype);
  return *this;
}

const std::shared_ptr<Module>& ModuleList::operator[](size_t i) const {
  TL_CHECK_INDEX(i < children_.size(), "index ", i, " is out of range for a ModuleList of size ",
                 children_.size());
  return children_[i].second;
}

Tensor ModuleList::forward(const Tensor&) {
  TL_CHECK(false, "ModuleList has no forward: call its modules in a loop");
  return {};
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (auto& [name, m] : children_) y = (*m)(y);
  return y;
}

}  // namespace tl::nn
