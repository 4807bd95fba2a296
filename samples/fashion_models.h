// The two Fashion-MNIST models of samples/train_fashion_mnist, shared with
// bench/train_step_bench.cpp and mirrored layer for layer by bench/pytorch/train_step.py.
#pragma once

#include <memory>

#include <tensorlib/nn/conv.h>
#include <tensorlib/nn/module.h>
#include <tensorlib/nn/pooling.h>

namespace samples {

namespace nn = tl::nn;

// 784-256-10 with ReLU.
inline std::shared_ptr<nn::Sequential> make_mlp() {
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Flatten>());
  m->push_back(std::make_shared<nn::Linear>(784, 256));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(256, 10));
  return m;
}

// Two conv+pool blocks (32 and 64 channels, 3x3, padding 1) and two linear layers.
inline std::shared_ptr<nn::Sequential> make_cnn() {
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Conv2d>(1, 32, 3, 1, 1));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::MaxPool2d>(2));
  m->push_back(std::make_shared<nn::Conv2d>(32, 64, 3, 1, 1));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::MaxPool2d>(2));
  m->push_back(std::make_shared<nn::Flatten>());
  m->push_back(std::make_shared<nn::Linear>(64 * 7 * 7, 128));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(128, 10));
  return m;
}

}  // namespace samples
