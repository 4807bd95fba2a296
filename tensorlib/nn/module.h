// tl::nn::Module, as torch::nn::Module: parameters, buffers and submodules by name, train/eval,
// zero_grad, state_dict. A module's forward runs inside a profiler scope named by its path
// ("model.features.0"), so a trace attributes memory to layers.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "profiler/events/annotate.h"
#include "tensorlib/core/tensor.h"

namespace tl::nn {

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string name = "model") : path_(std::move(name)) {}
  virtual ~Module() = default;

  // Calls forward inside a Scope named by this module's path.
  Tensor operator()(const Tensor& input) {
    tidemark::events::Scope scope(path_);
    return forward(input);
  }
  virtual Tensor forward(const Tensor& input) = 0;

  // The returned reference stays valid for the module's lifetime (Note [Parameter handles]).
  // An undefined tensor registers an absent parameter (PyTorch's `register_parameter(name,
  // None)`): it is left out of named_parameters and state_dict.
  Tensor& register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor& register_buffer(const std::string& name, Tensor t);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    m->set_path(path_ + "." + name);
    children_.emplace_back(name, m);
    return m;
  }

  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules() const;
  std::vector<std::shared_ptr<Module>> children() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const {
    return children_;
  }

  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Gradients to None (the default, as PyTorch 2) or to zero.
  void zero_grad(bool set_to_none = true);

  // Parameters and buffers by dotted name (relative to this module).
  std::map<std::string, Tensor> state_dict() const;
  // Copies values in; a missing or unexpected key, or a shape mismatch, is an error naming it.
  void load_state_dict(const std::map<std::string, Tensor>& state);

  // Moves or converts every parameter and buffer of this module and its descendants, replacing
  // the registered tensors (Note [Parameter handles]); parameters stay leaves that require
  // grad, their gradients move with them. to(dtype) converts floating point tensors only
  // (num_batches_tracked stays int64), as PyTorch. Create optimizers after calling to().
  Module& to(Device device);
  Module& to(ScalarType dtype);
  Module& to(Device device, ScalarType dtype);

  const std::string& path() const { return path_; }
  void set_path(const std::string& path);

 protected:
  // Note [Parameter handles]
  // tensorlib has no Tensor::set_data, so to() cannot change a tensor in place: it registers
  // new tensors under the same names. The registries are deques, whose elements never move,
  // so a subclass keeps its handles as references bound to register_parameter's result
  // (`Tensor& weight;`) and sees the new tensors; a handle kept by value would go stale.
  std::deque<std::pair<std::string, Tensor>> params_;
  std::deque<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;

 private:
  Module& to_impl(std::optional<Device> device, std::optional<ScalarType> dtype);
  std::string path_;
};

// y = x W^T + b, with PyTorch's default initialisation: W and b uniform in
// [-1/sqrt(in_features), 1/sqrt(in_features)] (kaiming_uniform with a = sqrt(5)).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  Tensor& weight;
  Tensor& bias;  // undefined when constructed with bias = false
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x.relu(); }
};

class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x.tanh(); }
};

class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x.sigmoid(); }
};

class GELU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x.gelu(); }
};

class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : start_(start_dim), end_(end_dim) {}
  Tensor forward(const Tensor& x) override { return x.flatten(start_, end_); }

 private:
  int64_t start_, end_;
};

// Children run in order, named "0", "1", ... as torch.nn.Sequential.
class Sequential : public Module {
 public:
  Sequential() = default;
  template <typename M>
  Sequential& push_back(std::shared_ptr<M> m) {
    register_module(std::to_string(children_.size()), std::move(m));
    return *this;
  }
  Tensor forward(const Tensor& x) override;
  size_t size() const { return children_.size(); }
};

// Holds submodules, named "0", "1", ..., as torch.nn.ModuleList; it has no forward of its own.
class ModuleList : public Module {
 public:
  ModuleList() = default;
  template <typename M>
  ModuleList& push_back(std::shared_ptr<M> m) {
    register_module(std::to_string(children_.size()), std::move(m));
    return *this;
  }
  size_t size() const { return children_.size(); }
  bool empty() const { return children_.empty(); }
  const std::shared_ptr<Module>& operator[](size_t i) const;
  // The i-th module as M (checked): list.at<Linear>(0)->weight.
  template <typename M>
  std::shared_ptr<M> at(size_t i) const {
    auto m = std::dynamic_pointer_cast<M>((*this)[i]);
    TL_CHECK(m, "ModuleList::at: module ", i, " is not of the requested type");
    return m;
  }
  Tensor forward(const Tensor& x) override;

  class const_iterator {
   public:
    using Inner = std::vector<std::pair<std::string, std::shared_ptr<Module>>>::const_iterator;
    explicit const_iterator(Inner it) : it_(it) {}
    const std::shared_ptr<Module>& operator*() const { return it_->second; }
    const_iterator& operator++() {
      ++it_;
      return *this;
    }
    bool operator==(const const_iterator& o) const { return it_ == o.it_; }
    bool operator!=(const const_iterator& o) const { return it_ != o.it_; }

   private:
    Inner it_;
  };
  const_iterator begin() const { return const_iterator(children_.begin()); }
  const_iterator end() const { return const_iterator(children_.end()); }
};

}  // namespace tl::nn
