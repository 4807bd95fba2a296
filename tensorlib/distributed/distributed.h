// tl::distributed in one include, as torch.distributed: process groups, their collectives and
// DistributedDataParallel (docs/distributed.md). Link Tidemark::tensorlib_distributed.
#pragma once

#include "tensorlib/distributed/ddp.h"
#include "tensorlib/distributed/process_group.h"
