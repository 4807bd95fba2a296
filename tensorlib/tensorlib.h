// tensorlib: tensors, views, autograd-ready ops and an instrumented caching allocator, with
// libtorch's names. `#include <tensorlib/tensorlib.h>` and use namespace tl.
#pragma once

#include "profiler/events/annotate.h"
#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/base/device.h"
#include "tensorlib/base/error.h"
#include "tensorlib/core/dtype.h"
#include "tensorlib/core/memory.h"
#include "tensorlib/core/memory_category.h"
#include "tensorlib/core/scalar.h"
#include "tensorlib/core/tensor.h"
#include "tensorlib/core/tensor_options.h"
#include "tensorlib/cpu/parallel.h"
#include "tensorlib/data/data.h"

// Profiler annotations (recording itself is Tidemark::record's tl::profiler::start/stop).
namespace tl::profiler {
using tidemark::events::mark;
using tidemark::events::Scope;
using tidemark::events::step;
}  // namespace tl::profiler
