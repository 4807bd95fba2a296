// Trains an MLP or a small CNN on Fashion-MNIST (the Debian package dataset-fashion-mnist)
// and reports, per epoch, the mean training loss, the test accuracy, the time and the
// throughput; at the end, the device's memory statistics in bytes, one per line.
//
//   train_fashion_mnist --model mlp --epochs 1            # >= 84% test accuracy
//   train_fashion_mnist --model cnn --epochs 2            # >= 88.5%
//   tidemark record -- train_fashion_mnist --model cnn    # the same run, recorded
//   mpirun -np 2 train_fashion_mnist --ddp                # data-parallel over 2 processes
//
// The training loop is written the way Tidemark recommends: the loss is accumulated on the
// device with detach() and read once per epoch (no sync per step), evaluation runs under
// NoGradGuard in eval mode, and each iteration is a profiler step.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <tensorlib/cpu/parallel.h>
#include <tensorlib/data/data.h>
#include <tensorlib/nn/conv.h>
#include <tensorlib/nn/loss.h>
#include <tensorlib/nn/module.h>
#include <tensorlib/nn/pooling.h>
#include <tensorlib/optim/optimizer.h>
#include <tensorlib/tensorlib.h>

#include "fashion_models.h"

#if defined(TIDEMARK_WITH_DISTRIBUTED)
#include <tensorlib/distributed/distributed.h>
#endif

namespace {

namespace nn = tl::nn;

// Fraction of `data` classified correctly (batches of 256, no graph).
double evaluate(nn::Module& model, const tl::data::FashionMNIST& data, tl::Device device) {
  tidemark::events::Scope scope("evaluate");
  model.eval();
  tl::NoGradGuard no_grad;
  tl::data::DataLoader loader(std::make_shared<tl::data::FashionMNIST>(data), {.batch_size = 256});
  tl::Tensor correct = tl::zeros({}, tl::TensorOptions(tl::kInt64).device(device));
  for (auto& batch : loader) {
    tl::Tensor logits = model(batch.data.to(device));
    correct = correct + logits.argmax(1).eq(batch.target.to(device)).sum();
  }
  model.train();
  return static_cast<double>(correct.item<int64_t>()) / static_cast<double>(data.size());
}

#if defined(TIDEMARK_WITH_DISTRIBUTED)
// This rank's share of a dataset, as PyTorch's DistributedSampler without its shuffle: rank r
// of n takes examples r, r + n, r + 2n, ...; every rank gets size / n of them (the rest are
// dropped, so every rank runs the same number of steps).
class RankShard : public tl::data::Dataset {
 public:
  RankShard(std::shared_ptr<const tl::data::Dataset> base, int rank, int size)
      : base_(std::move(base)), rank_(rank), size_(size) {}
  int64_t size() const override { return base_->size() / size_; }
  tl::data::Example get(int64_t i) const override { return base_->get(i * size_ + rank_); }
  tl::data::Example get_batch(tl::IntArrayRef indices) const override {
    std::vector<int64_t> mine(indices.begin(), indices.end());
    for (int64_t& i : mine) i = i * size_ + rank_;
    return base_->get_batch(mine);
  }

 private:
  std::shared_ptr<const tl::data::Dataset> base_;
  int rank_, size_;
};
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train an MLP or a small CNN on Fashion-MNIST", "train_fashion_mnist"};
  std::string model_name = "mlp", device_name = "cpu", root;
  int epochs = 1, threads = 0, workers = 0;
  int64_t batch_size = 64, limit = -1, test_limit = -1;
  double lr = 1e-3;
  uint64_t seed = 0;
  app.add_option("--model", model_name, "mlp (784-256-10) or cnn (two conv+pool blocks)")
      ->check(CLI::IsMember({"mlp", "cnn"}));
  app.add_option("--epochs", epochs, "Passes over the training set")->check(CLI::Range(1, 1000));
  app.add_option("--batch-size", batch_size, "Training batch size")->check(CLI::Range(1, 60000));
  app.add_option("--lr", lr, "Adam learning rate")->check(CLI::PositiveNumber);
  app.add_option("--device", device_name, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--threads", threads, "Intra-op threads (default: one per core)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--workers", workers, "DataLoader worker threads")->check(CLI::Range(0, 64));
  app.add_option("--limit", limit, "Train on the first N images only")->check(CLI::Range(1, 60000));
  app.add_option("--test-limit", test_limit, "Evaluate on the first N test images only")
      ->check(CLI::Range(1, 10000));
  app.add_option("--seed", seed, "Seed of the initialisation and the shuffling");
  bool ddp = false;
  app.add_flag("--ddp", ddp,
               "Data-parallel training, one process per rank (under mpirun): each rank trains on "
               "every world-size-th image with batch-size / world-size of them per step, "
               "gradients averaged by DistributedDataParallel; rank 0 reports");
  app.add_option("--data", root,
                 "Dataset directory (default: $TIDEMARK_FASHION_MNIST_DIR or " +
                     std::string(tl::data::FashionMNIST::kDefaultRoot) + ")");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  try {
    int rank = 0, world_size = 1;
#if defined(TIDEMARK_WITH_DISTRIBUTED)
    if (ddp) {
      tl::distributed::init_process_group(device_name == "cuda" ? "nccl" : "mpi");
      rank = tl::distributed::get_rank();
      world_size = tl::distributed::get_world_size();
      TL_CHECK(batch_size % world_size == 0, "--batch-size ", batch_size,
               " is not a multiple of the ", world_size, " ranks");
    }
#else
    TL_CHECK(!ddp,
             "--ddp: this build has no tl::distributed (MPI was not found when it was "
             "configured)");
#endif
    const bool report = rank == 0;
    const tl::Device device(device_name);
    (void)tl::zeros({1}, tl::TensorOptions().device(device));  // fails early without a backend
    if (threads > 0) tl::set_num_threads(threads);
    tl::manual_seed(seed);
    if (root.empty()) root = tl::data::FashionMNIST::default_root();
    tl::data::FashionMNISTOptions data_options;
    data_options.normalize = true;
    data_options.limit = test_limit;  // reads only the first N test images (-1: all)
    const tl::data::FashionMNIST test(root, false, data_options);
    data_options.limit = limit;  // reads only the first N images (-1: all)
    const tl::data::FashionMNIST train(root, true, data_options);
    if (report)
      std::printf(
          "Fashion-MNIST: %lld training, %lld test images; model %s on %s, batch %lld, "
          "Adam lr %g, %d threads%s\n",
          static_cast<long long>(train.size()), static_cast<long long>(test.size()),
          model_name.c_str(), device_name.c_str(), static_cast<long long>(batch_size), lr,
          tl::get_num_threads(),
          ddp ? (", " + std::to_string(world_size) + " ranks (DDP)").c_str() : "");

    std::shared_ptr<nn::Sequential> net =
        model_name == "mlp" ? samples::make_mlp() : samples::make_cnn();
    net->to(device);
    std::shared_ptr<nn::Module> model = net;
    std::shared_ptr<const tl::data::Dataset> train_set =
        std::make_shared<tl::data::FashionMNIST>(train);
#if defined(TIDEMARK_WITH_DISTRIBUTED)
    if (ddp) {
      model = std::make_shared<nn::DistributedDataParallel>(net);
      train_set = std::make_shared<RankShard>(train_set, rank, world_size);
    }
#endif
    tl::optim::Adam optimizer(model->parameters(), {.lr = lr});
    tl::data::DataLoader loader(train_set, {.batch_size = batch_size / world_size,
                                            .shuffle = true,
                                            .num_workers = workers,
                                            .pin_memory = device.is_cuda(),
                                            .seed = seed});

    for (int epoch = 1; epoch <= epochs; ++epoch) {
      const auto t0 = std::chrono::steady_clock::now();
      tl::Tensor loss_sum = tl::zeros({}, tl::TensorOptions(tl::kFloat32).device(device));
      int64_t batches = 0, samples = 0;
      for (auto& batch : loader) {
        tl::profiler::step();
        tl::Tensor x = batch.data.to(device), y = batch.target.to(device);
        optimizer.zero_grad();
        tl::Tensor loss = nn::functional::cross_entropy((*model)(x), y);
        loss.backward();
        optimizer.step();
        loss_sum = loss_sum + loss.detach();  // read once per epoch: no sync per step
        ++batches;
        samples += x.size(0);
      }
      const double train_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
#if defined(TIDEMARK_WITH_DISTRIBUTED)
      if (ddp) tl::distributed::all_reduce(loss_sum, tl::distributed::ReduceOp::avg);
#endif
      const double mean_loss = loss_sum.item<double>() / static_cast<double>(batches);
      samples *= world_size;
      if (!report) continue;  // the replicas are identical: rank 0 evaluates
      const double accuracy = evaluate(*net, test, device);
      std::printf("epoch %d/%d  loss %.4f  test accuracy %.2f%%  time %.1f s  %.0f samples/s\n",
                  epoch, epochs, mean_loss, 100 * accuracy, train_seconds,
                  static_cast<double>(samples) / train_seconds);
      std::fflush(stdout);
    }
#if defined(TIDEMARK_WITH_DISTRIBUTED)
    if (ddp) tl::distributed::destroy_process_group();
#endif
    if (!report) return 0;
    std::printf("max_memory_allocated: %lld\n",
                static_cast<long long>(tl::max_memory_allocated(device)));
    std::printf("max_memory_reserved: %lld\n",
                static_cast<long long>(tl::max_memory_reserved(device)));
    std::printf("memory_allocated: %lld\n", static_cast<long long>(tl::memory_allocated(device)));
    std::printf("memory_reserved: %lld\n", static_cast<long long>(tl::memory_reserved(device)));
  } catch (const tl::Error& e) {
    std::fprintf(stderr, "train_fashion_mnist: %s\n", e.what());
    return 2;
  }
  return 0;
}
