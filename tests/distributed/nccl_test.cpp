// The NCCL backend on CUDA tensors, run as every rank of `mpirun -np N` (N up to the GPUs; one
// GPU runs N = 1). Built with the CUDA backend and NCCL; every test skips without a CUDA
// device. Results are computed by hand for N ranks.
#include <gtest/gtest.h>

#include <mutex>

#include <tensorlib/cuda/cuda.h>
#include <tensorlib/distributed/distributed.h>
#include <tensorlib/nn/loss.h>
#include <tensorlib/tensorlib.h>

namespace {

namespace dist = tl::distributed;
namespace ev = tidemark::events;
using tl::Tensor;

bool g_ready = false;

class Nccl : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!g_ready) GTEST_SKIP() << "no CUDA device";
  }
  static Tensor on_gpu(double v, int64_t n = 3) { return tl::full({n}, v).to(tl::Device("cuda")); }
  static double at(const Tensor& t, int64_t i) { return t.cpu()[i].item<double>(); }
};

TEST_F(Nccl, AllReduceBroadcastAllGatherReduceScatter) {
  const int r = dist::get_rank(), n = dist::get_world_size();
  const double sum = n * (n + 1) / 2.0;  // of rank + 1 over the ranks
  Tensor t = on_gpu(r + 1);
  dist::all_reduce(t);
  EXPECT_EQ(at(t, 2), sum);
  t = on_gpu(r + 1);
  dist::all_reduce(t, dist::ReduceOp::avg);
  EXPECT_EQ(at(t, 0), sum / n);
  t = on_gpu(r + 10);
  dist::broadcast(t, 0);
  EXPECT_EQ(at(t, 1), 10);
  std::vector<Tensor> outs;
  for (int i = 0; i < n; ++i) outs.push_back(on_gpu(-1));
  dist::all_gather(outs, on_gpu(r));
  for (int i = 0; i < n; ++i) EXPECT_EQ(at(outs[i], 0), i);
  std::vector<Tensor> ins;
  for (int i = 0; i < n; ++i) ins.push_back(on_gpu(r + 1 + 100 * i));
  Tensor out = on_gpu(0);
  dist::reduce_scatter(out, ins);
  EXPECT_EQ(at(out, 0), sum + 100.0 * r * n);
  dist::barrier();
}

TEST_F(Nccl, CpuTensorsAreRefused) {
  try {
    dist::all_reduce(tl::ones({2}));
    FAIL() << "no error";
  } catch (const tl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("the nccl backend takes CUDA tensors"), std::string::npos);
  }
}

class Log : public ev::Sink {
 public:
  void on_event(const ev::Event& e) noexcept override {
    std::lock_guard lock(mutex);
    if (e.kind == ev::Kind::collective ||
        (e.kind == ev::Kind::sync && e.sync.kind == ev::SyncKind::collective))
      events.push_back(e);
  }
  std::mutex mutex;
  std::vector<ev::Event> events;
};

TEST_F(Nccl, AQueuedCollectiveIsAnEventWithoutAHostWait) {
  Tensor t = on_gpu(1, 8);
  Log log;
  ASSERT_TRUE(ev::add_sink(&log));
  dist::all_reduce(t);
  ev::remove_sink(&log);
  ASSERT_EQ(log.events.size(), 1u);
  EXPECT_EQ(log.events[0].kind, ev::Kind::collective);
  EXPECT_EQ(log.events[0].collective.bytes, 32u);
  EXPECT_EQ(log.events[0].device.type, ev::DeviceType::cuda);
}

TEST_F(Nccl, DdpGradientsOnTheGpuEqualOneProcessOverTheUnion) {
  const int r = dist::get_rank(), n = dist::get_world_size();
  tl::manual_seed(0);
  auto model = std::make_shared<tl::nn::Linear>(4, 3);
  auto reference = std::make_shared<tl::nn::Linear>(4, 3);
  reference->load_state_dict(model->state_dict());
  model->to(tl::Device("cuda"));
  tl::nn::DistributedDataParallel ddp(model);
  tl::manual_seed(1);
  Tensor x = tl::randn({4 * n, 4}), y = tl::randint(0, 3, {4 * n});
  Tensor mine = tl::arange(r, 4 * n, n);
  tl::nn::functional::cross_entropy(ddp(x.index_select(0, mine).to(tl::Device("cuda"))),
                                    y.index_select(0, mine).to(tl::Device("cuda")))
      .backward();
  tl::nn::functional::cross_entropy((*reference)(x), y).backward();
  EXPECT_LT((model->weight.grad().cpu() - reference->weight.grad()).abs().max().item<double>(),
            1e-5);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  g_ready = dist::is_backend_available("nccl") && tl::cuda::is_available();
  if (g_ready) dist::init_process_group("nccl");
  const int status = RUN_ALL_TESTS();
  if (g_ready) dist::destroy_process_group();
  return status;
}
