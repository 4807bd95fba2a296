// Intra-op thread count, as torch.set_num_threads / torch.get_num_threads: the OpenMP threads
// of tensorlib's CPU loops (Note [Intra-op parallelism] in loops.h) and OpenBLAS's threads.
#pragma once

namespace tl {

/// Uses `n` (>= 1) threads for CPU ops started from the calling thread and for matmul.
void set_num_threads(int n);
/// The threads a CPU op started from the calling thread may use.
int get_num_threads();

}  // namespace tl
