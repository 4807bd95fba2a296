// A program outside the tree that uses the installed tl::distributed (find_package(Tidemark
// COMPONENTS distributed)): every rank contributes rank + 1, and rank 0 prints the all-reduced
// sum and the world size, which run.sh checks (1 + 2 = 3 on two ranks).
#include <tensorlib/distributed/distributed.h>
#include <tensorlib/tensorlib.h>

#include <cstdio>

int main() {
  tl::distributed::init_process_group("mpi");
  const int rank = tl::distributed::get_rank();
  tl::Tensor x = tl::full({1}, static_cast<double>(rank + 1));
  tl::distributed::all_reduce(x);
  if (rank == 0)
    std::printf("sum %g of %d ranks\n", x.item<float>(), tl::distributed::get_world_size());
  tl::distributed::destroy_process_group();
  return 0;
}
