// tl::nn in one include, as torch/nn.h: modules, layers, losses and safetensors I/O.
#pragma once

#include "tensorlib/nn/conv.h"
#include "tensorlib/nn/layers.h"
#include "tensorlib/nn/loss.h"
#include "tensorlib/nn/module.h"
#include "tensorlib/nn/norm.h"
#include "tensorlib/nn/pooling.h"
#include "tensorlib/nn/serialize.h"
#include "tensorlib/nn/upsample.h"
