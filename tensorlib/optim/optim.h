// tl::optim in one include: optimizers and learning-rate schedulers.
#pragma once

#include "tensorlib/optim/optimizer.h"
#include "tensorlib/optim/scheduler.h"
