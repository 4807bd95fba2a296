// The main of a test program run under mpirun: the default process group lives for the whole
// run (MPI starts once per process), and every rank runs every test. mpirun's exit status is
// non-zero when any rank's is.
#pragma once

#include <gtest/gtest.h>

#include <tensorlib/distributed/process_group.h>

#include <vector>

namespace mpi_test {

class Environment : public ::testing::Environment {
 public:
  void SetUp() override { tl::distributed::init_process_group("mpi"); }
  void TearDown() override { tl::distributed::destroy_process_group(); }
};

// The flattened values of `t` as doubles.
inline std::vector<double> values(const tl::Tensor& t) {
  tl::Tensor d = t.to(tl::kFloat64).contiguous().reshape({-1});
  const double* p = d.data_ptr<double>();
  return {p, p + d.numel()};
}

}  // namespace mpi_test

#define MPI_TEST_MAIN()                                             \
  int main(int argc, char** argv) {                                 \
    ::testing::InitGoogleTest(&argc, argv);                         \
    ::testing::AddGlobalTestEnvironment(new mpi_test::Environment); \
    return RUN_ALL_TESTS();                                         \
  }
