// tl::distributed without a process group: the launcher's environment, and the errors of
// using or starting a group wrongly. Runs as a plain test (no mpirun).
#include <gtest/gtest.h>

#include <cstdlib>

#include <tensorlib/distributed/ddp.h>
#include <tensorlib/distributed/process_group.h>
#include <tensorlib/nn/module.h>
#include <tensorlib/tensorlib.h>

#include "tensorlib/expect_error.h"

namespace {

using tl_test::error_of;

namespace dist = tl::distributed;

// Sets the variables for the test's lifetime, clearing every launcher variable first.
class Env {
 public:
  explicit Env(std::vector<std::pair<const char*, const char*>> vars) {
    for (const char* name : kAll) unsetenv(name);
    for (auto [name, value] : vars) setenv(name, value, 1);
  }
  ~Env() {
    for (const char* name : kAll) unsetenv(name);
  }
  static constexpr const char* kAll[] = {"OMPI_COMM_WORLD_RANK",
                                         "OMPI_COMM_WORLD_SIZE",
                                         "OMPI_COMM_WORLD_LOCAL_RANK",
                                         "PMI_RANK",
                                         "PMI_SIZE",
                                         "MPI_LOCALRANKID",
                                         "RANK",
                                         "WORLD_SIZE",
                                         "LOCAL_RANK"};
};

TEST(LaunchEnv, ReadsEachLauncherInOrder) {
  {
    Env env({});
    dist::LaunchEnv e = dist::launch_environment();
    EXPECT_FALSE(e.rank);
    EXPECT_FALSE(e.world_size);
    EXPECT_EQ(e.source, "");
  }
  {
    Env env({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}});
    dist::LaunchEnv e = dist::launch_environment();
    EXPECT_EQ(e.rank, 3);
    EXPECT_EQ(e.world_size, 4);
    EXPECT_EQ(e.local_rank, 1);
    EXPECT_EQ(e.source, "RANK, WORLD_SIZE");
  }
  {
    Env env({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"RANK", "1"}, {"WORLD_SIZE", "2"}});
    dist::LaunchEnv e = dist::launch_environment();
    EXPECT_EQ(e.rank, 0);
    EXPECT_EQ(e.source, "PMI_RANK, PMI_SIZE");
    EXPECT_FALSE(e.local_rank);
  }
  {
    Env env({{"OMPI_COMM_WORLD_RANK", "1"},
             {"OMPI_COMM_WORLD_SIZE", "2"},
             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
             {"PMI_RANK", "0"},
             {"PMI_SIZE", "2"}});
    dist::LaunchEnv e = dist::launch_environment();
    EXPECT_EQ(e.rank, 1);
    EXPECT_EQ(e.world_size, 2);
    EXPECT_EQ(e.local_rank, 1);
    EXPECT_EQ(e.source, "OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE");
  }
}

TEST(LaunchEnv, BadValuesAreNamed) {
  {
    Env env({{"RANK", "one"}, {"WORLD_SIZE", "2"}});
    EXPECT_EQ(error_of([] { dist::launch_environment(); }),
              "init_process_group: RANK='one' is not a rank (an integer from 0)");
  }
  {
    Env env({{"RANK", "0"}, {"WORLD_SIZE", "0"}});
    EXPECT_EQ(error_of([] { dist::launch_environment(); }),
              "init_process_group: WORLD_SIZE='0' is not a process count (an integer from 1)");
  }
  {
    Env env({{"RANK", "2"}, {"WORLD_SIZE", "2"}});
    EXPECT_EQ(error_of([] { dist::launch_environment(); }),
              "init_process_group: RANK=2 is not below WORLD_SIZE=2");
  }
  {
    Env env({{"PMI_RANK", "0"}, {"LOCAL_RANK", "0"}});
    EXPECT_EQ(error_of([] { dist::launch_environment(); }),
              "init_process_group: PMI_RANK is set but PMI_SIZE is not (a launcher sets both)");
  }
}

TEST(DefaultGroup, UsingItBeforeInitNamesTheCall) {
  const std::string expected =
      "tl::distributed: the default process group is not initialised; call "
      "init_process_group() first";
  EXPECT_FALSE(dist::is_initialized());
  EXPECT_EQ(error_of([] { dist::all_reduce(tl::ones({2})); }), expected);
  EXPECT_EQ(error_of([] { dist::get_rank(); }), expected);
  EXPECT_EQ(error_of([] { dist::barrier(); }), expected);
  auto model = std::make_shared<tl::nn::Linear>(2, 2);
  EXPECT_EQ(error_of([&] { tl::nn::DistributedDataParallel ddp(model); }), expected);
}

TEST(DefaultGroup, UnknownOrMissingBackends) {
  EXPECT_EQ(error_of([] { dist::init_process_group("gloo"); }),
            "init_process_group: unknown backend 'gloo' (mpi or nccl)");
  if (dist::is_backend_available("nccl")) GTEST_SKIP() << "NCCL is built in";
  EXPECT_NE(error_of([] {
              dist::init_process_group("nccl");
            }).find("the nccl backend is not built into this tensorlib"),
            std::string::npos);
}

// Last: it starts MPI (as a singleton, outside mpirun).
TEST(DefaultGroup, EnvironmentThatDisagreesWithMpi) {
  Env env({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  EXPECT_EQ(error_of([] { dist::init_process_group("mpi"); }),
            "init_process_group: the environment (RANK, WORLD_SIZE) says rank 1 of 2 but MPI's "
            "world has this process as rank 0 of 1: start the processes with mpirun -np 2 "
            "(tensorlib's process groups run on MPI)");
  EXPECT_FALSE(dist::is_initialized());
}

}  // namespace
