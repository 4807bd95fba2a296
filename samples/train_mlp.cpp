// Trains a small MLP (samples/mlp.h) and prints its loss and accuracy. Linked with
// Tidemark::autostart: run it with TIDEMARK_OUTPUT=run.db to record the run.
#include <cstdlib>

#include "mlp.h"

int main(int argc, char** argv) {
  samples::MlpConfig c;
  c.verbose = true;
  if (argc > 1) c.steps = std::atoll(argv[1]);
  if (c.steps <= 0) {
    std::fprintf(stderr, "usage: train_mlp [STEPS]  (STEPS must be a positive integer)\n");
    return 2;
  }
  samples::MlpResult r = samples::train_mlp(c);
  std::printf("loss %.4f -> %.4f, held-out accuracy %.1f%%\n", r.first_loss, r.last_loss,
              100 * r.accuracy);
  std::printf("peak allocated %.2f MiB, peak reserved %.2f MiB\n",
              tl::max_memory_allocated() / 1048576.0, tl::max_memory_reserved() / 1048576.0);
  return 0;
}
