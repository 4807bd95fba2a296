// `tidemark predict` on tensorlib's own programs, where the truth can be recorded: each program
// is recorded at three sizes, the peaks at 2x and 4x the largest are predicted, those sizes are
// recorded too, and the prediction is held against what they did -- the requested and reserved
// peaks read from the recorded events by a fold of this test's own, not by Tidemark's analysis.
// Also: bad runs are refused with exit code 2 and a message naming the problem.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "profiler/store/trace_reader.h"
#include "run_program.h"

namespace {

namespace ev = tidemark::events;
using nlohmann::json;

std::string sample(const std::string& name) {
  return std::string(TIDEMARK_SAMPLES_BIN) + "/" + name;
}

std::string record(const std::string& tag, const std::vector<std::string>& program) {
  const std::string trace = (tl_test::temp_dir("tidemark_predict") / (tag + ".db")).string();
  // Deep stacks: a Debug build's frames (the sanitizer build's) are too many for the default
  // 16 to reach the program's own lines, and allocations then look alike to the alignment.
  std::vector<std::string> argv = {TIDEMARK_CLI, "record", "--stacks", "64",
                                   "-o",         trace,    "--force",  "--"};
  argv.insert(argv.end(), program.begin(), program.end());
  tl_test::Result r = tl_test::run(argv, {"OMP_NUM_THREADS=1"});
  EXPECT_EQ(r.rc, 0) << tag << ": " << r.err;
  return trace;
}

struct Peaks {
  uint64_t requested = 0, reserved = 0;
};

// The recorded peaks of the device with the most requested bytes: live requested bytes (up at
// alloc, down at free_requested) and reserved bytes (segment_alloc / map up, free / unmap down).
Peaks recorded_peaks(const std::string& path) {
  struct Device {
    uint64_t requested = 0, reserved = 0;
    Peaks peak;
    std::unordered_map<uint64_t, uint64_t> live;
  };
  std::map<std::pair<int, int>, Device> devices;
  auto reader = tidemark::store::TraceReader::open(path);
  reader.for_each_event([&](const ev::Event& e, uint64_t) {
    Device& d = devices[{static_cast<int>(e.device.type), e.device.index}];
    switch (e.kind) {
      case ev::Kind::alloc:
        d.live[e.block.addr] = e.block.requested_size;
        d.requested += e.block.requested_size;
        d.peak.requested = std::max(d.peak.requested, d.requested);
        break;
      case ev::Kind::free_requested: {
        auto it = d.live.find(e.block.addr);
        if (it != d.live.end()) d.requested -= it->second, d.live.erase(it);
        break;
      }
      case ev::Kind::segment_alloc:
      case ev::Kind::segment_map:
        d.reserved += e.block.size;
        d.peak.reserved = std::max(d.peak.reserved, d.reserved);
        break;
      case ev::Kind::segment_free:
      case ev::Kind::segment_unmap:
        d.reserved -= std::min(d.reserved, e.block.size);
        break;
      default:
        break;
    }
  });
  Peaks best;
  for (const auto& [k, d] : devices)
    if (d.peak.requested > best.requested) best = d.peak;
  return best;
}

json predict(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {TIDEMARK_CLI, "predict", "--json"};
  argv.insert(argv.end(), args.begin(), args.end());
  tl_test::Result r = tl_test::run(argv);
  EXPECT_EQ(r.rc, 0) << r.err;
  return r.rc == 0 ? json::parse(r.out) : json();
}

double rel(uint64_t predicted, uint64_t truth) {
  return std::fabs(static_cast<double>(predicted) - static_cast<double>(truth)) /
         static_cast<double>(truth);
}

// Records `program` (its size option last, given each value), predicts 2x and 4x the largest of
// `sizes`, records those, and compares.
void check_sweep(const std::string& name, const std::vector<std::string>& program,
                 const std::string& option, const std::vector<int>& sizes) {
  auto run_at = [&](int x) {
    std::vector<std::string> p = program;
    p.push_back(option);
    p.push_back(std::to_string(x));
    return record(name + "_" + std::to_string(x), p);
  };
  std::vector<std::string> args;
  for (int x : sizes) args.push_back(std::to_string(x) + "=" + run_at(x));
  const int largest = sizes.back();
  args.push_back("--at");
  args.push_back(std::to_string(2 * largest) + "," + std::to_string(4 * largest));
  const json j = predict(args);
  ASSERT_TRUE(j.contains("predictions")) << name;
  ASSERT_EQ(j["predictions"].size(), 2u);
  for (int k = 0; k < 2; ++k) {
    const int x = (k + 1) * 2 * largest;
    const json& p = j["predictions"][k];
    EXPECT_EQ(p["at"].get<int>(), x);
    const Peaks truth = recorded_peaks(run_at(x));
    const uint64_t requested = p["peak_requested_bytes"], reserved = p["peak_reserved_bytes"];
    std::printf(
        "%s at %s %d: requested %llu predicted, %llu recorded (%.2f%%); reserved %llu predicted, "
        "%llu recorded (%.2f%%); aligned %.1f%%\n",
        name.c_str(), option.c_str(), x, static_cast<unsigned long long>(requested),
        static_cast<unsigned long long>(truth.requested), 100 * rel(requested, truth.requested),
        static_cast<unsigned long long>(reserved), static_cast<unsigned long long>(truth.reserved),
        100 * rel(reserved, truth.reserved), 100 * p["aligned_share"].get<double>());
    EXPECT_LE(rel(requested, truth.requested), 0.01) << name << " at " << x;
    EXPECT_LE(rel(reserved, truth.reserved), 0.02) << name << " at " << x;
    EXPECT_GT(p["aligned_share"].get<double>(), 0.9) << name << " at " << x;
  }
}

TEST(PredictTensorlib, MlpOverTheBatchSize) {
  check_sweep("mlp",
              {sample("train_fashion_mnist"), "--model", "mlp", "--epochs", "1", "--limit", "2048",
               "--test-limit", "1000", "--threads", "1"},
              "--batch-size", {32, 64, 128});
}

TEST(PredictTensorlib, CnnOverTheBatchSize) {
  check_sweep("cnn",
              {sample("train_fashion_mnist"), "--model", "cnn", "--epochs", "1", "--limit", "512",
               "--test-limit", "256", "--threads", "1"},
              "--batch-size", {8, 16, 32});
}

TEST(PredictTensorlib, TransformerOverTheBatchSize) {
  check_sweep("transformer_batch", {sample("train_transformer"), "--seq-len", "32", "--steps", "3"},
              "--batch-size", {2, 4, 8});
}

TEST(PredictTensorlib, TransformerOverTheSequenceLength) {
  // The attention scores grow as the square of the sequence length, the rest linearly, the
  // weights and AdamW's state not at all.
  check_sweep("transformer_seq", {sample("train_transformer"), "--batch-size", "2", "--steps", "3"},
              "--seq-len", {16, 32, 64});
}

TEST(PredictCli, BadRunsAreRefusedWithTheProblem) {
  const std::string a =
      record("bad_a", {sample("train_transformer"), "--seq-len", "16", "--steps", "1"});
  auto refused = [](const std::vector<std::string>& args, const std::string& says) {
    std::vector<std::string> argv = {TIDEMARK_CLI, "predict"};
    argv.insert(argv.end(), args.begin(), args.end());
    tl_test::Result r = tl_test::run(argv);
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  };
  refused({"16=" + a, "--at", "64"}, "two or more sizes");
  refused({"16=" + a, "16=" + a, "--at", "64"}, "give each size once");
  refused({a, "32=" + a, "--at", "64"}, "expected SIZE=FILE");
  refused({"x=" + a, "32=" + a, "--at", "64"}, "not a positive number");
  refused({"16=" + a, "32=/nonexistent.db", "--at", "64"}, "/nonexistent.db");
  refused({"16=" + a, "32=" + a, "--at", "sixty"}, "--at");
  refused({"16=" + a, "32=" + a, "--at", "64", "--alloc-conf", "nope:1"}, "--alloc-conf");
  refused({"16=" + a, "32=" + a, "--at", "64", "--capacity", "lots"}, "--capacity");
}

}  // namespace
