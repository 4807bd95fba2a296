// tensorlib: tensors, views, autograd-ready ops and an instrumented caching allocator, with
// libtorch's names. `#include <tensorlib/tensorlib.h>` and use namespace tl.
#pragma once

#include "tensorlib/core/device.h"
#include "tensorlib/core/dtype.h"
#include "tensorlib/core/error.h"
#include "tensorlib/core/scalar.h"
#include "tensorlib/core/tensor.h"
#include "tensorlib/core/tensor_options.h"
#include "tensorlib/memory/memory.h"
