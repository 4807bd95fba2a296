// Pitfall 5: .item() inside the training loop forces a host-device sync every step.
//
// Reading a tensor's value on the host (`loss.item()`, `.cpu()`, printing it) makes the host
// wait until the device has finished every queued kernel, so a GPU goes idle once per step.
// Tidemark records each such wait as a `sync` event with its stack (on the CPU too, where it
// costs nothing but marks where a GPU would stall): `tidemark syncs` names the site and
// `tidemark check --max-syncs-per-step 0` fails CI on it. The fix: accumulate the loss on the
// device with `detach()` and read it once, after the loop (or every N steps).
#include <tensorlib/nn/loss.h>
#include <tensorlib/nn/module.h>
#include <tensorlib/optim/optimizer.h>

#include "common.h"

int main(int argc, char** argv) {
  pitfalls::Options o = pitfalls::parse(
      argc, argv, "pitfall_sync_in_loop",
      "loss.item() in every step for logging (fixed: accumulate loss.detach(), read once)", 20);
  tl::manual_seed(0);
  auto model = std::make_shared<tl::nn::Sequential>();
  model->push_back(std::make_shared<tl::nn::Linear>(64, 128));
  model->push_back(std::make_shared<tl::nn::ReLU>());
  model->push_back(std::make_shared<tl::nn::Linear>(128, 4));
  pitfalls::place(*model, o);
  tl::optim::SGD opt(model->parameters(), {.lr = 0.05});
  tl::Tensor centers = tl::randn({4, 64}, o.device) * 2;

  pitfalls::Report report(o.device);
  report.take("before");
  double logged = 0;
  int64_t syncs = 0;
  {
    tl::Tensor running = tl::zeros({}, o.device);
    for (int step = 0; step < o.steps; ++step) {
      tl::profiler::step();
      tl::Tensor y = tl::randint(0, 4, {128}, o.device);
      tl::Tensor x = centers.index_select(0, y) + tl::randn({128, 64}, o.device);
      opt.zero_grad();
      tl::Tensor loss = tl::nn::functional::cross_entropy((*model)(x), y);
      loss.backward();
      opt.step();
      if (o.fixed) {
        running = running + loss.detach();
      } else {
        logged += loss.item<double>();  // BUG: the host waits for the device every step
        ++syncs;
      }
    }
    if (o.fixed) {
      tl::profiler::mark("epoch end");
      logged = running.item<double>();
      ++syncs;
    }
  }
  report.take("after");
  std::printf("mean loss %.4f over %d steps, %lld host reads of a device value\n\n",
              logged / o.steps, o.steps, static_cast<long long>(syncs));
  report.add("host_reads", syncs);
  report.print();
  return 0;
}
