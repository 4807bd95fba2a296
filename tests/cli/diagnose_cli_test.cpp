// `tidemark diagnose` and `check --no-findings` on recorded programs: each pitfall sample's
// leaky trace yields its finding at the sample's own source line and its --fixed trace does
// not; a real training run yields nothing; an imported PyTorch snapshot says which detectors
// cannot run on it. (The detectors of views, copies and the allocator are tested in
// diagnose_allocator_test.cpp.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include <tensorlib/tensorlib.h>

#include "profiler/record/recorder.h"
#include "run_program.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using tl_test::Result;

fs::path dir() {
  return tl_test::temp_dir("tidemark_diagnose_cli");
}

using tl_test::tidemark;

// Records `program args...` once per test suite (by `name`) and returns the trace's path.
std::string recorded(const std::string& name, const std::vector<std::string>& program) {
  static std::map<std::string, std::string> traces;
  if (auto it = traces.find(name); it != traces.end()) return it->second;
  const std::string trace = (dir() / (name + ".db")).string();
  std::vector<std::string> args{"record", "-o", trace, "--stacks", "64", "--"};
  args.insert(args.end(), program.begin(), program.end());
  Result r = tidemark(args);
  EXPECT_EQ(r.rc, 0) << r.err;
  return traces[name] = trace;
}
std::string pitfall(const std::string& sample, bool fixed) {
  std::vector<std::string> program{std::string(TIDEMARK_SAMPLES_BIN) + "/pitfall_" + sample};
  if (fixed) program.push_back("--fixed");
  return recorded(sample + (fixed ? "_fixed" : ""), program);
}

// `all`: minor findings too (diagnose --all; Note [Severity] in profiler/diagnose/diagnose.h).
json diagnose(const std::string& trace, const std::string& only = "", bool all = false) {
  std::vector<std::string> args{"diagnose", trace, "--json"};
  if (!only.empty()) args.insert(args.end(), {"--only", only});
  if (all) args.push_back("--all");
  Result r = tidemark(args);
  EXPECT_EQ(r.rc, 0) << r.err;
  return json::parse(r.out);
}
std::set<std::string> ids(const json& d) {
  std::set<std::string> out;
  for (const json& f : d["findings"]) out.insert(f["id"].get<std::string>());
  return out;
}
json finding(const json& d, const std::string& id) {
  for (const json& f : d["findings"])
    if (f["id"] == id) return f;
  return json();
}

// The 1-based line of the first line of a pitfall sample's source that contains `needle`.
int line_of(const std::string& sample, const std::string& needle) {
  const fs::path src =
      fs::path(__FILE__).parent_path().parent_path().parent_path() / "samples/pitfalls" / sample;
  std::ifstream f(src);
  std::string line;
  for (int n = 1; std::getline(f, line); ++n)
    if (line.find(needle) != std::string::npos) return n;
  ADD_FAILURE() << needle << " not found in " << src;
  return 0;
}
std::string site(const std::string& file, int line) {
  return "main (" + file + ":" + std::to_string(line) + ")";
}

// The detectors of this file's concern (profiler/diagnose: graph_retention.cpp, retained_graph.cpp,
// grad_in_eval.cpp, leak.cpp, sync_in_loop.cpp).
const char* const kMemoryDetectors =
    "graph-retention,retained-graph,grad-in-eval,leak,sync-in-loop";

class DiagnoseCli : public ::testing::Test {
 protected:
  static void TearDownTestSuite() { fs::remove_all(dir()); }
};

TEST_F(DiagnoseCli, GraphRetentionNamesTheForwardOfTheAccumulatedLoss) {
  json d = diagnose(pitfall("accumulated_loss", false));
  json f = finding(d, "graph-retention");
  ASSERT_FALSE(f.is_null()) << d.dump(2);
  // The retained activations were saved by the model's forward, in the loss line.
  EXPECT_EQ(f["site"], site("accumulated_loss.cpp",
                            line_of("accumulated_loss.cpp", "cross_entropy((*model)(x), y)")));
  EXPECT_EQ(f["device"], "cpu");
  // About one batch of saved activations per step (two 256 x 1024 float ReLU outputs at least),
  // 19 steps fitted after the warm-up boundary.
  EXPECT_GE(f["bytes"].get<int64_t>(), 18 * 2 * 256 * 1024 * 4);
  EXPECT_EQ(f["evidence"][0][0], "growth per step");
  EXPECT_NE(f["evidence"][1][1].get<std::string>().find("19"), std::string::npos);
  // Note [The more specific finding]: the growth is graph-retention's, not also a leak, and
  // the activations no backward used are not also grad-in-eval.
  EXPECT_EQ(ids(d).count("leak"), 0u) << d.dump(2);
  EXPECT_EQ(ids(d).count("grad-in-eval"), 0u) << d.dump(2);

  d = diagnose(pitfall("accumulated_loss", true), kMemoryDetectors);
  EXPECT_EQ(ids(d).count("graph-retention"), 0u) << d.dump(2);
  EXPECT_EQ(ids(d).count("leak"), 0u) << d.dump(2);
  // The fix (loss.detach()) stops the growth, but each batch still saves its activations for
  // a backward that never runs: a mean loss without backward is an evaluation, and the
  // sample's own comment names NoGradGuard as the other fix. grad-in-eval says so.
  EXPECT_EQ(ids(d), std::set<std::string>{"grad-in-eval"}) << d.dump(2);
}

// The same pitfall as a PyTorch user brings it: a snapshot with frames and nothing else (no
// categories, steps or scopes: `export --no-categories`). The importer infers the categories
// and, from the loop's repeated allocations, the 20 steps (Note [Inferred categories], rule
// 5), so graph-retention finds the same growth as on the recording, and says what it rests on.
TEST_F(DiagnoseCli, GraphRetentionOnTheAccumulatedLossAsASnapshot) {
  auto as_snapshot = [&](bool fixed) {
    const std::string name = std::string("accumulated_loss") + (fixed ? "_fixed" : "");
    const std::string pickle = (dir() / (name + ".pickle")).string(),
                      db = (dir() / (name + "_imported.db")).string();
    Result r = tidemark({"export", pitfall("accumulated_loss", fixed), "--format", "snapshot",
                         "--no-categories", "-o", pickle});
    EXPECT_EQ(r.rc, 0) << r.err;
    r = tidemark({"import", pickle, "-o", db});
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("20 steps inferred from the repeated allocations"), std::string::npos)
        << r.out;
    return db;
  };
  const json recorded = finding(diagnose(pitfall("accumulated_loss", false)), "graph-retention");
  ASSERT_FALSE(recorded.is_null());
  json d = diagnose(as_snapshot(false), kMemoryDetectors);
  json f = finding(d, "graph-retention");
  ASSERT_FALSE(f.is_null()) << d.dump(2);
  // The growth per step within 1% (the fit's boundaries are where each iteration ends rather
  // than where the program's step call began it).
  auto growth = [](const json& g) {
    const std::string text = g["evidence"][0][1];  // "2.26 MiB (2,374,647 bytes)"
    std::string digits;
    for (char c : text.substr(text.find('(')))
      if (c >= '0' && c <= '9') digits += c;
    return std::stod(digits);
  };
  EXPECT_EQ(f["evidence"][0][0], "growth per step");
  EXPECT_NEAR(growth(f), growth(recorded), 0.01 * growth(recorded));
  EXPECT_EQ(f["site"], recorded["site"]);
  bool inferred = false;
  for (const json& e : f["evidence"])
    inferred |= e[0] == "steps" &&
                e[1].get<std::string>().find("repeated allocations") != std::string::npos;
  EXPECT_TRUE(inferred) << f.dump(2);
  EXPECT_EQ(ids(diagnose(as_snapshot(true), kMemoryDetectors)).count("graph-retention"), 0u);
}

TEST_F(DiagnoseCli, RetainedGraphNamesTheForwardWhoseActivationsOverlapTheNextStep) {
  json d = diagnose(pitfall("retain_graph", false), kMemoryDetectors);
  EXPECT_EQ(ids(d), std::set<std::string>{"retained-graph"}) << d.dump(2);
  json f = finding(d, "retained-graph");
  ASSERT_FALSE(f.is_null());
  EXPECT_EQ(f["site"],
            site("retain_graph.cpp", line_of("retain_graph.cpp", "cross_entropy((*model)(x), y)")));
  // One step of activations (the 2048 x 512 float ReLU outputs among them) is still live at
  // the next step's peak.
  EXPECT_GE(f["bytes"].get<int64_t>(), 2 * 2048 * 512 * 4);
  EXPECT_EQ(ids(diagnose(pitfall("retain_graph", true), kMemoryDetectors)).size(), 0u);
}

// pitfall_attention_scores: at batch 2, 4 heads and 4,096 positions one float32 score matrix
// is 2 x 4 x 4096 x 4096 x 4 bytes = 512 MiB. While softmax writes its output, the scaled
// scores and the masked ones are both still live: three of them, and the 16 MiB causal mask.
// The fix holds one block of 256 queries' scores (32 MiB) at a time: under the detector's
// 1 GiB floor, and no finding, though its function is named for attention too.
TEST_F(DiagnoseCli, AttentionPeakCountsTheScoreMatricesLiveAtThePeak) {
  json d = diagnose(pitfall("attention_scores", false));
  EXPECT_EQ(ids(d), std::set<std::string>{"attention-peak"}) << d.dump(2);
  json f = finding(d, "attention-peak");
  ASSERT_FALSE(f.is_null());
  const int64_t score = int64_t{2} * 4 * 4096 * 4096 * 4;
  EXPECT_GE(f["bytes"].get<int64_t>(), 3 * score);
  EXPECT_LE(f["bytes"].get<int64_t>(), 3 * score + (64 << 20));
  EXPECT_NE(f["title"].get<std::string>().find("3 of 512.00 MiB"), std::string::npos) << f["title"];
  EXPECT_NE(f["site"].get<std::string>().find(
                "attention_scores.cpp:" +
                std::to_string(line_of("attention_scores.cpp", "scores = q.matmul"))),
            std::string::npos)
      << f["site"];
  EXPECT_EQ(ids(diagnose(pitfall("attention_scores", true))).size(), 0u);
}

// The peak_allocated a pitfall sample prints for itself (its allocator's own statistic).
int64_t sample_peak(const std::string& sample, bool fixed) {
  std::vector<std::string> argv{std::string(TIDEMARK_SAMPLES_BIN) + "/pitfall_" + sample};
  if (fixed) argv.push_back("--fixed");
  Result r = tl_test::run(argv);
  EXPECT_EQ(r.rc, 0) << r.err;
  const size_t at = r.out.find("\npeak_allocated: ");
  if (at == std::string::npos) {
    ADD_FAILURE() << "no peak_allocated in " << r.out;
    return 0;
  }
  return std::stoll(r.out.substr(at + 17));
}

// pitfall_stale_grads zeroes the gradients after the forward, so each forward from the second
// step on holds the last step's 16 MiB of gradients beside its activations. The peak without
// them is what the --fixed program, zeroing before the forward, measures for itself.
TEST_F(DiagnoseCli, StaleGradsTakesTheLastStepsGradientsOutOfTheForward) {
  json d = diagnose(pitfall("stale_grads", false));
  EXPECT_EQ(ids(d), std::set<std::string>{"stale-grads"}) << d.dump(2);
  json f = finding(d, "stale-grads");
  ASSERT_FALSE(f.is_null());
  const int64_t leaky = sample_peak("stale_grads", false), fixed = sample_peak("stale_grads", true);
  EXPECT_EQ(f["bytes"].get<int64_t>(), leaky - fixed) << f.dump(2);
  std::map<std::string, std::string> evidence;
  for (const json& e : f["evidence"]) evidence[e[0].get<std::string>()] = e[1].get<std::string>();
  EXPECT_NE(evidence["gradients from earlier steps live in a forward"].find("in 8 allocations"),
            std::string::npos)
      << f.dump(2);  // four weights and four biases
  EXPECT_EQ(evidence["steps whose forward had them"], "9 of 10");
  EXPECT_EQ(evidence["freed before the step's backward"], "yes: zeroed after the forward");
  EXPECT_EQ(f["site"],
            site("stale_grads.cpp", line_of("stale_grads.cpp", "mse_loss((*model)(x), y)")));
  EXPECT_EQ(ids(diagnose(pitfall("stale_grads", true), "", true)).size(), 0u);
}

// pitfall_warmup_graph: the warm-up's graph lives under every step -- the batch, and each of
// the four layers' linear output and tanh output (tensorlib's unary ops save their input and
// their output), 512 x 1024 floats (2 MiB) each; the fixed warm-up saves nothing.
TEST_F(DiagnoseCli, KeptGraphFindsAWarmUpsSavedTensorsUnderEveryStep) {
  json d = diagnose(pitfall("warmup_graph", false));
  EXPECT_EQ(ids(d), std::set<std::string>{"kept-graph"}) << d.dump(2);
  json f = finding(d, "kept-graph");
  ASSERT_FALSE(f.is_null());
  const int64_t block = int64_t{512} * 1024 * 4;
  EXPECT_EQ(f["bytes"].get<int64_t>(), 9 * block) << f.dump(2);
  // The fix saves that graph but its output, which the fixed program keeps too.
  const int64_t leaky = sample_peak("warmup_graph", false),
                fixed = sample_peak("warmup_graph", true);
  EXPECT_EQ(leaky - fixed, 8 * block);
  EXPECT_EQ(ids(diagnose(pitfall("warmup_graph", true), "", true)).size(), 0u);
}

// pitfall_optimizer_temporaries: AdamW's multi-tensor step holds every parameter's
// denominator at once on top of the weights, gradients and moments, in every step. The peak
// without the temporaries is what the --fixed program, with the fused step, measures.
TEST_F(DiagnoseCli, OptimizerPeakTakesEveryStepsTemporariesOut) {
  json d = diagnose(pitfall("optimizer_temporaries", false));
  EXPECT_EQ(ids(d), std::set<std::string>{"optimizer-peak"}) << d.dump(2);
  json f = finding(d, "optimizer-peak");
  ASSERT_FALSE(f.is_null());
  const int64_t leaky = sample_peak("optimizer_temporaries", false),
                fixed = sample_peak("optimizer_temporaries", true);
  EXPECT_EQ(f["bytes"].get<int64_t>(), leaky - fixed) << f.dump(2);
  EXPECT_EQ(f["site"], site("optimizer_temporaries.cpp",
                            line_of("optimizer_temporaries.cpp", "optimizer.step();")));
  EXPECT_NE(f["fix"].get<std::string>().find("fused=True"), std::string::npos);
  EXPECT_EQ(ids(diagnose(pitfall("optimizer_temporaries", true))).size(), 0u);
}

// Note [Autocast weight copies] on a real forward-only benchmark: a 2.7B model (32 layers of
// q, k, v, o and three feed-forward matrices, and an LM head) under bf16 autocast with grad
// mode on. The expert's account: 6.25 GiB of bf16 weight copies (half the 12.7 GiB of
// weights, the embedding not cast), and about 17.7 GiB of saved activations that no_grad would
// remove. Both findings say so, and grad-in-eval no longer counts the copies as its own.
TEST_F(DiagnoseCli, AutocastCacheCountsTheWeightCopiesOfARealForward) {
  const fs::path work = dir() / "labelled";
  fs::create_directories(work);
  const std::string name = "bolongcheng_xl_fwd_cl512_bf16.pickle";
  Result r = tl_test::run({"tar", "--zstd", "-xf",
                           std::string(TIDEMARK_TEST_DATA) + "/pytorch/labelled/snapshots.tar.zst",
                           "-C", work.string(), name});
  if (r.rc != 0)
    GTEST_SKIP() << "could not unpack the labelled snapshots (is zstd installed?): " << r.err;
  json d = diagnose((work / name).string());
  json cache = finding(d, "autocast-cache"), eval = finding(d, "grad-in-eval");
  ASSERT_FALSE(cache.is_null()) << d.dump(2);
  ASSERT_FALSE(eval.is_null()) << d.dump(2);
  const double gib = double(1 << 30);
  EXPECT_NEAR(cache["bytes"].get<double>() / gib, 6.25, 0.06);
  EXPECT_NE(cache["title"].get<std::string>().find("copy of 225 float32 weights"),
            std::string::npos)
      << cache["title"];  // 32 x 7 matrices and the LM head
  EXPECT_NEAR(eval["bytes"].get<double>() / gib, 17.7, 0.1);
  EXPECT_NE(cache["fix"].get<std::string>().find("inference_mode"), std::string::npos);
}

// A finding's advice names the file the user gave: the replay command that
// allocator-settings suggests on a real snapshot is the snapshot's, not the temporary trace it
// was read through (Note [Snapshots as traces]).
TEST_F(DiagnoseCli, AdviceNamesTheSnapshotGiven) {
  const fs::path work = dir() / "labelled";
  fs::create_directories(work);
  const std::string name = "linyun_xl_ctx512_full_step_bf16.pickle";
  Result r = tl_test::run({"tar", "--zstd", "-xf",
                           std::string(TIDEMARK_TEST_DATA) + "/pytorch/labelled/snapshots.tar.zst",
                           "-C", work.string(), name});
  if (r.rc != 0)
    GTEST_SKIP() << "could not unpack the labelled snapshots (is zstd installed?): " << r.err;
  json f = finding(diagnose((work / name).string(), "allocator-settings"), "allocator-settings");
  ASSERT_FALSE(f.is_null());
  EXPECT_NE(f["fix"].get<std::string>().find("`tidemark replay " + (work / name).string() + " "),
            std::string::npos)
      << f["fix"];
}

TEST_F(DiagnoseCli, GradInEvalNamesTheEvaluationForward) {
  json d = diagnose(pitfall("eval_without_no_grad", false), kMemoryDetectors);
  EXPECT_EQ(ids(d), std::set<std::string>{"grad-in-eval"}) << d.dump(2);
  json f = finding(d, "grad-in-eval");
  ASSERT_FALSE(f.is_null());
  EXPECT_EQ(f["site"], site("eval_without_no_grad.cpp",
                            line_of("eval_without_no_grad.cpp", "logits = (*model)(x)")));
  // Six 2048 x 512 float activations saved at once, at least.
  EXPECT_GE(f["bytes"].get<int64_t>(), 6 * 2048 * 512 * 4);
  EXPECT_EQ(ids(diagnose(pitfall("eval_without_no_grad", true), kMemoryDetectors)).size(), 0u);
}

TEST_F(DiagnoseCli, SyncInLoopNamesTheItemCall) {
  // On the CPU the host waits for nothing: microseconds of a run of tenths of a second, a
  // minor finding, shown only with --all (Note [Severity]).
  json d = diagnose(pitfall("sync_in_loop", false), kMemoryDetectors);
  EXPECT_TRUE(d["findings"].empty()) << d.dump(2);
  EXPECT_EQ(d["minor_hidden"], 1);
  d = diagnose(pitfall("sync_in_loop", false), kMemoryDetectors, true);
  EXPECT_EQ(ids(d), std::set<std::string>{"sync-in-loop"}) << d.dump(2);
  json f = finding(d, "sync-in-loop");
  ASSERT_FALSE(f.is_null());
  EXPECT_EQ(f["severity"], "minor");
  EXPECT_LT(f["share"].get<double>(), 0.01);
  EXPECT_EQ(f["site"],
            site("sync_in_loop.cpp", line_of("sync_in_loop.cpp", "logged += loss.item<double>()")));
  EXPECT_EQ(f["bytes"], 0);
  // 19 complete steps (Note [The open last step]), one item() each.
  EXPECT_EQ(f["evidence"][0][1], "19 of 19 complete steps");
  EXPECT_EQ(f["evidence"][1][1], "1.00");
  EXPECT_EQ(f["evidence"][4][1], "item");
  // The fix reads once, after the loop, in the open last step.
  EXPECT_EQ(ids(diagnose(pitfall("sync_in_loop", true), kMemoryDetectors, true)).size(), 0u);
}

// Today's precision: the fixed pitfalls that read a checksum with .item() every step still
// sync in a loop, which costs nothing on the CPU: a minor finding, hidden by default.
TEST_F(DiagnoseCli, FixedPitfallsThatSyncForAChecksumShowNoFinding) {
  for (const char* sample : {"dataloader_workers", "fragmentation", "transpose_contiguous"}) {
    json d = diagnose(pitfall(sample, true));
    EXPECT_TRUE(d["findings"].empty()) << sample << ": " << d.dump(2);
    d = diagnose(pitfall(sample, true), "", true);
    EXPECT_EQ(ids(d), std::set<std::string>{"sync-in-loop"}) << sample << ": " << d.dump(2);
    for (const json& f : d["findings"]) EXPECT_EQ(f["severity"], "minor") << f.dump(2);
  }
}

// The plain 16-layer step of pitfalls/checkpointing.cpp holds every layer's 1024 x 256 float
// output (1 MiB) at its peak; checkpointing every four Linear+Tanh pairs (its --fixed run)
// keeps the segment outputs and one recomputed segment.
TEST_F(DiagnoseCli, ActivationPeakNamesTheLayersAndEstimatesTheCheckpointedPeak) {
  json d = diagnose(pitfall("checkpointing", false));
  json f = finding(d, "activation-peak");
  ASSERT_FALSE(f.is_null()) << d.dump(2);
  EXPECT_EQ(f["device"], "cpu");
  EXPECT_EQ(f["site"], site("checkpointing.cpp", line_of("checkpointing.cpp", "h = (*seg)(h);")));
  // Most of the peak, but the run fits with room to spare on the host (Note [Severity]).
  EXPECT_EQ(f["severity"], "moderate");
  std::map<std::string, std::string> ev;
  for (const json& e : f["evidence"]) ev[e[0]] = e[1];
  // Each of the 32 modules (model.S.L, a Linear or a Tanh) is a layer holding its 1 MiB output.
  EXPECT_NE(ev["held by model.0.0"].find("1.00 MiB"), std::string::npos) << f.dump(2);
  EXPECT_GE(std::stoi(ev["layers holding them (in forward order)"]), 30) << f.dump(2);
  // The estimate against the real thing: the peak the --fixed run reached, within 10%.
  Result r = tidemark({"summary", pitfall("checkpointing", true), "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto fixed_peak = json::parse(r.out)["devices"][0]["peak_allocated_bytes"].get<double>();
  r = tidemark({"summary", pitfall("checkpointing", false), "--json"});
  const auto leaky_peak = json::parse(r.out)["devices"][0]["peak_allocated_bytes"].get<double>();
  const double predicted = leaky_peak - f["bytes"].get<double>();
  EXPECT_NEAR(predicted / fixed_peak, 1.0, 0.1) << predicted << " vs " << fixed_peak;
  // The fix holds few activations more than one segment: nothing to report, even minor.
  EXPECT_EQ(ids(diagnose(pitfall("checkpointing", true), "activation-peak", true)).size(), 0u);
}

// A leak no pitfall sample has: a history list that keeps one tensor per step, recorded in
// this process and stopped while the list is still alive.
std::string record_history(const std::string& name, bool leaky, int* line) {
  const std::string trace = (dir() / (name + ".db")).string();
  tl::profiler::Options o;
  o.stack_depth = 64;
  tl::profiler::start(trace, o);
  std::vector<tl::Tensor> history;
  tl::Tensor last;
  for (int step = 0; step < 8; ++step) {
    tl::profiler::step();
    tl::Tensor scratch = tl::randn({64, 64}) * 2;  // freed every step
    *line = __LINE__ + 1;
    tl::Tensor kept = tl::randn({256, 256});  // 256 KiB a step
    if (leaky) history.push_back(kept);
    last = kept;
  }
  tl::profiler::stop();
  return trace;
}

TEST_F(DiagnoseCli, LeakNamesTheSiteOfAGrowingHistory) {
  int line = 0;
  json d = diagnose(record_history("history_leaky", true, &line), kMemoryDetectors);
  EXPECT_EQ(ids(d), std::set<std::string>{"leak"}) << d.dump(2);
  json f = finding(d, "leak");
  ASSERT_FALSE(f.is_null());
  EXPECT_NE(
      f["site"].get<std::string>().find("(diagnose_cli_test.cpp:" + std::to_string(line) + ")"),
      std::string::npos)
      << f.dump(2);
  EXPECT_EQ(f["evidence"][0][1], "256.00 KiB (262,144 bytes)");  // growth per step
  bool at_end = false;  // the list is alive when the recording stops: 8 x 256 KiB
  for (const json& e : f["evidence"]) at_end = at_end || e[0] == "still allocated at the end";
  EXPECT_TRUE(at_end) << f.dump(2);
  // Keeping only the latest tensor: one 256 KiB block at the end, no growth.
  EXPECT_EQ(ids(diagnose(record_history("history_fixed", false, &line), kMemoryDetectors)).size(),
            0u);
}

TEST_F(DiagnoseCli, TrainingFashionMnistHasNoFindings) {
  const std::string trace =
      recorded("fashion_mnist", {std::string(TIDEMARK_SAMPLES_BIN) + "/train_fashion_mnist",
                                 "--model", "mlp", "--epochs", "1", "--limit", "3000"});
  // Every detector, not only this file's: a clean training loop is the false-alarm test.
  json d = diagnose(trace);
  EXPECT_EQ(d["findings"].size(), 0u) << d.dump(2);
  for (const json& s : d["skipped"]) ADD_FAILURE() << "skipped on a full recording: " << s.dump();
}

TEST_F(DiagnoseCli, JsonShape) {
  json d = diagnose(pitfall("sync_in_loop", false), "", true);
  EXPECT_EQ(d["json_version"], 2);
  EXPECT_TRUE(d["minor_hidden"].is_number_unsigned());
  EXPECT_TRUE(d["path"].is_string());
  ASSERT_TRUE(d["findings"].is_array());
  ASSERT_FALSE(d["findings"].empty());
  for (const json& f : d["findings"]) {
    for (const char* k : {"id", "title", "device", "site", "fix"})
      EXPECT_TRUE(f[k].is_string()) << k << ": " << f.dump(2);
    EXPECT_TRUE(f["bytes"].is_number_integer());
    EXPECT_TRUE(f["time_ns"].is_number_unsigned());
    EXPECT_TRUE(f["severity"] == "minor" || f["severity"] == "moderate" || f["severity"] == "major")
        << f.dump(2);
    EXPECT_TRUE(f["share"].is_number());
    ASSERT_TRUE(f["stack"].is_array());
    EXPECT_FALSE(f["stack"].empty());
    ASSERT_TRUE(f["evidence"].is_array());
    for (const json& e : f["evidence"]) {
      ASSERT_TRUE(e.is_array() && e.size() == 2) << e.dump();
      EXPECT_TRUE(e[0].is_string() && e[1].is_string()) << e.dump();
    }
  }
  ASSERT_TRUE(d["skipped"].is_array());
  for (const json& s : d["skipped"]) EXPECT_TRUE(s["id"].is_string() && s["reason"].is_string());
}

TEST_F(DiagnoseCli, OnlyRunsTheChosenDetectorsAndRejectsUnknownIds) {
  const std::string leaky = pitfall("sync_in_loop", false);
  EXPECT_EQ(ids(diagnose(leaky, "sync-in-loop", true)), std::set<std::string>{"sync-in-loop"});
  json d = diagnose(leaky, "leak,graph-retention", true);
  EXPECT_TRUE(d["findings"].empty()) << d.dump(2);

  Result r = tidemark({"diagnose", leaky, "--only", "sync-in-loop,no-such-thing"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("unknown finding id 'no-such-thing'"), std::string::npos) << r.err;
  for (const char* id : {"graph-retention", "retained-graph", "grad-in-eval", "leak",
                         "sync-in-loop", "view-retention", "fragmentation"})
    EXPECT_NE(r.err.find(id), std::string::npos) << id << " not listed: " << r.err;

  r = tidemark({"diagnose", leaky});  // text: the minor finding is counted, not shown
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.find("[sync-in-loop]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 minor finding not shown (--all shows it)"), std::string::npos) << r.out;
  r = tidemark({"diagnose", leaky, "--all"});  // the finding, its severity, site and fix
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("[sync-in-loop]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("severity: minor ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("site: main (sync_in_loop.cpp:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fix: "), std::string::npos) << r.out;
}

TEST_F(DiagnoseCli, CheckNoFindingsGatesOnFindings) {
  const std::string leaky = pitfall("sync_in_loop", false), fixed = pitfall("sync_in_loop", true);
  // The CPU's sync-in-loop is minor: it fails the check only with --all.
  Result r = tidemark({"check", leaky, "--no-findings"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("no findings (1 minor, which do not fail the check without --all)"),
            std::string::npos)
      << r.out;
  r = tidemark({"check", leaky, "--no-findings", "--all"});
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAIL --no-findings: sync-in-loop on cpu at main (sync_in_loop.cpp:"),
            std::string::npos)
      << r.out;
  r = tidemark({"check", leaky, "--all"});  // --all qualifies --no-findings
  EXPECT_EQ(r.rc, 2) << r.out << r.err;
  // Only the chosen ids count.
  r = tidemark({"check", leaky, "--no-findings", "leak,graph-retention", "--all"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  r = tidemark({"check", fixed, "--no-findings", "sync-in-loop", "--all"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  // Together with another limit and --junit: one failed testcase, named.
  const std::string xml = (dir() / "check.xml").string();
  r = tidemark({"check", leaky, "--max-peak-allocated", "1GiB", "--no-findings", "sync-in-loop",
                "--all", "--junit", xml});
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  const std::string junit = tl_test::slurp(xml);
  EXPECT_NE(junit.find("tests=\"2\" failures=\"1\""), std::string::npos) << junit;
  EXPECT_NE(junit.find("name=\"no-findings\"><failure"), std::string::npos) << junit;
  r = tidemark({"check", leaky, "--no-findings", "bogus"});
  EXPECT_EQ(r.rc, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("unknown finding id 'bogus'"), std::string::npos) << r.err;
}

TEST_F(DiagnoseCli, ImportedPyTorchSnapshotSaysWhichDetectorsCannotRun) {
  const fs::path snapshot = fs::path(TIDEMARK_TEST_DATA) / "pytorch/snapshot_small_gpu.pickle";
  const std::string trace = (dir() / "snapshot.db").string();
  Result r = tidemark({"import", snapshot.string(), "-o", trace});
  ASSERT_EQ(r.rc, 0) << r.err;
  // A training run (forward, backward, an optimizer step per iteration): the importer infers
  // its steps from the optimizer's frames and its categories (Note [Inferred categories]).
  EXPECT_NE(r.out.find("steps inferred from the optimizer's frames"), std::string::npos) << r.out;
  json d = diagnose(trace, kMemoryDetectors);
  // - graph-retention and leak run on the inferred categories and steps, and find nothing:
  //   the run frees its activations in every backward and does not grow.
  // - grad-in-eval runs on the inferred phases (Note [Phases of the window]): the window runs
  //   backward, so its forwards' activations are used and there is nothing to report.
  // - retained-graph needs the autograd engine's backward scopes, which a snapshot never
  //   has: skipped, saying so.
  // - sync-in-loop: a snapshot records no syncs.
  EXPECT_TRUE(d["findings"].empty()) << d.dump(2);
  std::map<std::string, std::string> skipped;
  for (const json& s : d["skipped"]) skipped[s["id"]] = s["reason"];
  EXPECT_FALSE(skipped.count("graph-retention")) << skipped["graph-retention"];
  EXPECT_FALSE(skipped.count("leak")) << skipped["leak"];
  EXPECT_FALSE(skipped.count("grad-in-eval")) << skipped["grad-in-eval"];
  for (const char* id : {"retained-graph", "sync-in-loop"}) {
    ASSERT_TRUE(skipped.count(id)) << id << ": " << d.dump(2);
    EXPECT_NE(skipped[id].find("imported PyTorch snapshot"), std::string::npos) << skipped[id];
  }
  EXPECT_NE(skipped["retained-graph"].find("backward scopes"), std::string::npos);
  EXPECT_NE(skipped["sync-in-loop"].find("syncs"), std::string::npos);
}

}  // namespace
