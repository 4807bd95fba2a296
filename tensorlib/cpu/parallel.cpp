#include "tensorlib/cpu/parallel.h"

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensorlib/base/error.h"

namespace tl {

void set_num_threads(int n) {
  TL_CHECK(n >= 1, "set_num_threads: expected a thread count >= 1, got ", n);
#ifdef _OPENMP
  omp_set_num_threads(n);
#endif
  openblas_set_num_threads(n);
}

int get_num_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace tl
