// tl::nn::Module, as torch::nn::Module: parameters, buffers and submodules by name, train/eval,
// zero_grad, state_dict. A module's forward runs inside a profiler scope named by its path
// ("model.features.0"), so a trace attributes memory to layers.
#pragma once

#include <map>
#include <memory>
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

  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Gradients to None (the default, as PyTorch 2) or to zero.
  void zero_grad(bool set_to_none = true);

  // Parameters and buffers by dotted name (relative to this module).
  std::map<std::string, Tensor> state_dict() const;
  // Copies values in; a missing or unexpected key, or a shape mismatch, is an error naming it.
  void load_state_dict(const std::map<std::string, Tensor>& state);

  const std::string& path() const { return path_; }
  void set_path(const std::string& path);

 protected:
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;

 private:
  std::string path_;
};

// y = x W^T + b, with PyTorch's default initialisation: W and b uniform in
// [-1/sqrt(in_features), 1/sqrt(in_features)] (kaiming_uniform with a = sqrt(5)).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;
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
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_(start_dim), end_(end_dim) {}
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

}  // namespace tl::nn
