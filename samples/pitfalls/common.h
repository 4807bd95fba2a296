// Shared by the pitfall samples (samples/pitfalls/*.cpp): the command line every sample takes
// and the memory report each prints before and after its loop.
//
// Every sample runs the leaky version by default and the corrected one with --fixed. The
// report is a table for people, then `key: value` lines in bytes for scripts and tests
// (tests/samples/pitfalls_test.cpp reads them). Linked with Tidemark::autostart, so
// `tidemark record -- build/samples/pitfall_accumulated_loss` records a sample as it runs.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <tensorlib/nn/module.h>
#include <tensorlib/tensorlib.h>

namespace pitfalls {

struct Options {
  bool fixed = false;
  int steps = 0;
  tl::Device device{"cpu"};  // where the sample's model and data live (--device)
};

// --fixed, --steps N, --device cpu|cuda, --help. A bad argument prints the usage and exits
// with status 2, as does --device cuda without a usable CUDA device.
inline Options parse(int argc, char** argv, const char* name, const char* what, int default_steps) {
  Options o;
  o.steps = default_steps;
  auto usage = [&](FILE* out) {
    std::fprintf(out,
                 "usage: %s [--fixed] [--steps N] [--device cpu|cuda]\n  %s\n"
                 "  --fixed    run the corrected version\n"
                 "  --steps N  iterations of the loop (default %d)\n"
                 "  --device   where the model and data live (default cpu)\n",
                 name, what, default_steps);
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--fixed") {
      o.fixed = true;
    } else if (a == "--steps" && i + 1 < argc) {
      char* end = nullptr;
      long v = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || v <= 0 || v > 1000000) {
        std::fprintf(stderr, "%s: --steps must be a positive integer, got '%s'\n", name, argv[i]);
        std::exit(2);
      }
      o.steps = static_cast<int>(v);
    } else if (a == "--device" && i + 1 < argc &&
               (std::strcmp(argv[i + 1], "cpu") == 0 || std::strcmp(argv[i + 1], "cuda") == 0)) {
      o.device = tl::Device(argv[++i]);
      try {
        (void)tl::zeros({1}, o.device);  // fails early without a backend or a device
      } catch (const tl::Error& e) {
        std::fprintf(stderr, "%s: %s\n", name, e.what());
        std::exit(2);
      }
    } else if (a == "--help" || a == "-h") {
      usage(stdout);
      std::exit(0);
    } else {
      std::fprintf(stderr, "%s: unknown argument '%s'\n", name, a.c_str());
      usage(stderr);
      std::exit(2);
    }
  }
  std::printf("%s (%s%s)\n  %s\n\n", name, o.fixed ? "fixed" : "leaky",
              o.device.is_cuda() ? ", cuda" : "", what);
  return o;
}

// Moves a model to the sample's device (before its optimizer is made); nothing on the CPU.
inline void place(tl::nn::Module& model, const Options& o) {
  if (o.device.is_cuda()) model.to(o.device);
}

// Allocator statistics of the sample's device at named points, printed as a table and as
// `key: bytes` lines.
class Report {
 public:
  explicit Report(tl::Device device = tl::Device("cpu")) : cpu_(device) {
    tl::reset_peak_memory_stats(cpu_);
  }

  // Records the statistics now under `label` ("before", "after").
  void take(const std::string& label) {
    rows_.push_back({label, tl::memory_allocated(cpu_), tl::memory_reserved(cpu_),
                     tl::max_memory_allocated(cpu_), tl::max_memory_reserved(cpu_)});
  }
  // allocated bytes at the point recorded as `label` (0 if none was).
  int64_t allocated(const std::string& label) const {
    for (const Row& r : rows_)
      if (r.label == label) return r.allocated;
    return 0;
  }
  int64_t reserved(const std::string& label) const {
    for (const Row& r : rows_)
      if (r.label == label) return r.reserved;
    return 0;
  }
  // An extra `key: value` line (bytes or a count) printed after the statistics.
  void add(const std::string& key, int64_t value) { extra_.emplace_back(key, value); }

  void print() const {
    std::printf("  %-28s %14s %14s %14s %14s\n", "", "allocated", "reserved", "peak alloc.",
                "peak reserved");
    for (const Row& r : rows_)
      std::printf("  %-28s %10.2f MiB %10.2f MiB %10.2f MiB %10.2f MiB\n", r.label.c_str(),
                  mib(r.allocated), mib(r.reserved), mib(r.peak_allocated), mib(r.peak_reserved));
    std::printf("\n");
    for (const Row& r : rows_) {
      std::printf("allocated_%s: %lld\n", r.label.c_str(), static_cast<long long>(r.allocated));
      std::printf("reserved_%s: %lld\n", r.label.c_str(), static_cast<long long>(r.reserved));
    }
    std::printf("peak_allocated: %lld\n", static_cast<long long>(tl::max_memory_allocated(cpu_)));
    std::printf("peak_reserved: %lld\n", static_cast<long long>(tl::max_memory_reserved(cpu_)));
    for (const auto& [k, v] : extra_)
      std::printf("%s: %lld\n", k.c_str(), static_cast<long long>(v));
  }

 private:
  static double mib(int64_t b) { return static_cast<double>(b) / 1048576.0; }
  struct Row {
    std::string label;
    int64_t allocated, reserved, peak_allocated, peak_reserved;
  };
  tl::Device cpu_;  // the device whose allocator is reported
  std::vector<Row> rows_;
  std::vector<std::pair<std::string, int64_t>> extra_;
};

}  // namespace pitfalls
