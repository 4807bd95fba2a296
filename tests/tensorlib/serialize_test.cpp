// tl::nn safetensors: a file written by the reference implementation (the `safetensors`
// package, tests/tensorlib/data/safetensors_reference.py) loads with its values; tensorlib's
// files follow the format (header length, padding, sorted keys); module state round trips;
// malformed files fail with the file and the problem named, and a failed save leaves nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include <tensorlib/nn/module.h>
#include <tensorlib/nn/norm.h>
#include <tensorlib/nn/serialize.h>
#include <tensorlib/tensorlib.h>

namespace {

using tl::Tensor;
namespace nn = tl::nn;
namespace fs = std::filesystem;

const fs::path kReference = fs::path(__FILE__).parent_path() / "data" / "reference.safetensors";

class Serialize : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tl_serialize_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  // A file with this header text and data (the 8-byte length is the header's).
  std::string raw(const std::string& name, const std::string& header, const std::string& data) {
    std::string path = file(name);
    std::ofstream out(path, std::ios::binary);
    uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header << data;
    return path;
  }

  // Expects loading `path` to fail with a message naming the file and containing `problem`.
  void expect_load_error(const std::string& path, const std::string& problem) {
    try {
      nn::load_safetensors(path);
      ADD_FAILURE() << "loading " << path << " did not fail (expected: " << problem << ")";
    } catch (const tl::Error& e) {
      std::string what = e.what();
      EXPECT_NE(what.find(path), std::string::npos) << what;
      EXPECT_NE(what.find(problem), std::string::npos) << what;
    }
  }

  fs::path dir_;
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_F(Serialize, LoadsAFileWrittenByTheReferenceImplementation) {
  std::map<std::string, std::string> meta;
  auto t = nn::load_safetensors(kReference.string(), &meta);
  EXPECT_EQ(meta, (std::map<std::string, std::string>{{"source", "safetensors_reference.py"}}));
  ASSERT_EQ(t.size(), 12u);
  EXPECT_EQ(t["f32"].dtype(), tl::kFloat32);
  EXPECT_TRUE(tl::equal(t["f32"], tl::tensor({{1.5f, -2.0f, 3.25f}, {0.0f, 1e-3f, -7.0f}})));
  EXPECT_TRUE(tl::equal(t["f64"], tl::tensor({3.141592653589793, -1e300}, tl::kFloat64)));
  EXPECT_EQ(t["f16"].dtype(), tl::kFloat16);
  EXPECT_TRUE(tl::equal(t["f16"].to(tl::kFloat64),
                        tl::tensor({0.5, -65504.0, 0.333251953125}, tl::kFloat64)));
  EXPECT_EQ(t["bf16"].dtype(), tl::kBFloat16);
  EXPECT_TRUE(tl::equal(t["bf16"].to(tl::kFloat64),
                        tl::tensor({1.0, -3.00405527047391e+38}, tl::kFloat64)));
  EXPECT_TRUE(tl::equal(
      t["i64"], tl::tensor({{-(int64_t(1) << 62), int64_t(7)}, {int64_t(0), int64_t(1) << 40}})));
  EXPECT_TRUE(tl::equal(t["i32"], tl::tensor({-5, 2147483647}, tl::kInt32)));
  EXPECT_EQ(t["i16"].dtype(), tl::kInt16);
  EXPECT_TRUE(tl::equal(t["i16"], tl::tensor({-32768, 1234}, tl::kInt16)));
  EXPECT_EQ(t["i8"].dtype(), tl::kInt8);
  EXPECT_TRUE(tl::equal(t["i8"], tl::tensor({-128, 127, 3}, tl::kInt8)));
  EXPECT_TRUE(tl::equal(t["u8"], tl::tensor({0, 255}, tl::kUInt8)));
  EXPECT_TRUE(tl::equal(t["bool"], tl::tensor({true, false, true})));
  EXPECT_EQ(t["scalar"].dim(), 0);
  EXPECT_EQ(t["scalar"].item<double>(), 2.5);
  EXPECT_EQ(t["empty"].sizes().vec(), (std::vector<int64_t>{0, 3}));
}

TEST_F(Serialize, RoundTripEveryDtypeAndFollowsTheFormat) {
  tl::manual_seed(3);
  std::map<std::string, Tensor> in = {
      {"w", tl::randn({3, 5})},
      {"w_t", tl::randn({4, 6}, tl::kFloat64).t()},  // non-contiguous
      {"h", tl::randn({7}).to(tl::kFloat16)},
      {"b", tl::randn({2, 2}).to(tl::kBFloat16)},
      {"idx", tl::randint(-1000, 1000, {5})},
      {"i", tl::randint(0, 100, {3}, tl::kInt32)},
      {"bytes", tl::randint(0, 256, {9}, tl::kUInt8)},
      {"mask", tl::rand({4}).gt(0.5)},
      {"zero_dim", tl::full({}, 4.0)},
      {"empty", tl::zeros({0})},
  };
  const std::string path = file("all.safetensors");
  nn::save_safetensors(in, path, {{"format", "pt"}, {"note", "round trip"}});
  std::map<std::string, std::string> meta;
  auto out = nn::load_safetensors(path, &meta);
  EXPECT_EQ(meta.at("note"), "round trip");
  ASSERT_EQ(out.size(), in.size());
  for (auto& [name, t] : in) {
    EXPECT_EQ(out[name].dtype(), t.dtype()) << name;
    EXPECT_TRUE(tl::equal(out[name], t)) << name;
  }
  // The format: length, JSON padded with spaces to a multiple of 8, keys in sorted order.
  std::string bytes = read_all(path);
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  std::string header = bytes.substr(8, n);
  ASSERT_EQ(header.front(), '{');
  size_t close = header.find_last_of('}');
  EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos) << "padding is spaces";
  size_t last = 0;
  for (const char* key : {"\"__metadata__\"", "\"b\"", "\"bytes\"", "\"empty\"", "\"h\"", "\"i\"",
                          "\"idx\"", "\"mask\"", "\"w\"", "\"w_t\"", "\"zero_dim\""}) {
    size_t at = header.find(key);
    ASSERT_NE(at, std::string::npos) << key;
    EXPECT_GT(at, last) << key << " out of order in " << header;
    last = at;
  }
  // Data size: every tensor's bytes, nothing more.
  size_t data = 0;
  for (auto& [name, t] : in) data += t.nbytes();
  EXPECT_EQ(bytes.size(), 8 + n + data);
}

TEST_F(Serialize, ModuleStateRoundTripsThroughAFile) {
  tl::manual_seed(9);
  auto make = [] {
    auto m = std::make_shared<nn::Sequential>();
    m->push_back(std::make_shared<nn::Linear>(4, 3));
    m->push_back(std::make_shared<nn::BatchNorm1d>(3));
    return m;
  };
  auto a = make(), b = make();
  (*a)(tl::randn({8, 4}));  // updates the running statistics
  const std::string path = file("model.safetensors");
  nn::save(*a, path);
  nn::load(*b, path);
  for (auto& [name, t] : a->state_dict()) {
    EXPECT_TRUE(tl::equal(b->state_dict()[name], t)) << name;
    EXPECT_EQ(b->state_dict()[name].dtype(), t.dtype()) << name;
  }
  EXPECT_EQ(b->state_dict()["1.num_batches_tracked"].item<int64_t>(), 1);
  a->eval();
  b->eval();
  Tensor x = tl::randn({2, 4});
  EXPECT_TRUE(tl::equal((*a)(x), (*b)(x)));
  EXPECT_TRUE(b->parameters()[0].requires_grad()) << "loading keeps parameters trainable";

  // Wrong model: the error names the file and the key.
  auto other = std::make_shared<nn::Sequential>();
  other->push_back(std::make_shared<nn::Linear>(4, 2));
  try {
    nn::load(*other, path);
    FAIL();
  } catch (const tl::Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find("unexpected key '1."), std::string::npos) << what;
  }
  auto wider = make();
  wider->push_back(std::make_shared<nn::Linear>(3, 3));
  EXPECT_THROW(nn::load(*wider, path), tl::Error);  // missing 2.weight
  auto sd = a->state_dict();
  sd["0.bias"] = tl::zeros({5});
  nn::save_safetensors(sd, file("bad_shape.safetensors"));
  try {
    nn::load(*b, file("bad_shape.safetensors"));
    FAIL();
  } catch (const tl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("size mismatch for '0.bias'"), std::string::npos);
  }
}

TEST_F(Serialize, MalformedFilesNameTheFileAndTheProblem) {
  expect_load_error(file("missing.safetensors"), "cannot open");
  { std::ofstream(file("short.safetensors")) << "abc"; }
  expect_load_error(file("short.safetensors"), "truncated");
  {
    std::ofstream out(file("long_header.safetensors"), std::ios::binary);
    uint64_t n = 64;  // claims 64 bytes of header, has 2
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{}";
  }
  expect_load_error(file("long_header.safetensors"), "truncated: the header needs 64 bytes");
  expect_load_error(raw("json.safetensors", "{\"a\": [1, ", ""), "bad header: not valid JSON");
  expect_load_error(raw("array.safetensors", "[1, 2]", ""), "expected a JSON object");
  const std::string f32x2(8, '\0');
  expect_load_error(
      raw("dtype.safetensors",
          R"({"a": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}})", "xx"),
      "unknown dtype 'F8_E4M3' for tensor 'a'");
  expect_load_error(raw("size.safetensors",
                        R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", f32x2),
                    "tensor 'a': data_offsets [0, 4] do not hold F32 [2]");
  expect_load_error(raw("range.safetensors",
                        R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", "1234"),
                    "out of range");
  expect_load_error(raw("overlap.safetensors",
                        R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                            "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                        std::string(12, '\0')),
                    "tensors 'a' and 'b' overlap");
  expect_load_error(raw("hole.safetensors",
                        R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                            "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                        std::string(12, '\0')),
                    "bytes [4, 8) of the data belong to no tensor");
  expect_load_error(raw("trailing.safetensors",
                        R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                        std::string(10, '\0')),
                    "2 bytes after the last tensor");
  expect_load_error(raw("negative.safetensors",
                        R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", f32x2),
                    "must be a non-negative integer");
  expect_load_error(
      raw("noshape.safetensors", R"({"a": {"dtype": "F32", "data_offsets": [0, 8]}})", f32x2),
      "tensor 'a' has no \"shape\"");
  expect_load_error(
      raw("meta.safetensors",
          R"({"__metadata__": {"k": 1}, "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
          f32x2),
      "__metadata__ value of 'k' is not a string");
  expect_load_error(
      raw("bool.safetensors", R"({"a": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}})",
          std::string("\x01\x07", 2)),
      "not 0 or 1");
  // A valid file cut short: its last tensor's offsets now run past the end.
  nn::save_safetensors({{"x", tl::ones({16})}}, file("whole.safetensors"));
  std::string whole = read_all(file("whole.safetensors"));
  std::ofstream(file("cut.safetensors"), std::ios::binary) << whole.substr(0, whole.size() - 5);
  expect_load_error(file("cut.safetensors"), "out of range");
}

TEST_F(Serialize, AFailedSaveLeavesNoFileBehind) {
  const std::string path = file("keep.safetensors");
  nn::save_safetensors({{"x", tl::ones({3})}}, path);
  const std::string before = read_all(path);
  // An undefined tensor fails the save: the existing file is untouched, no temporary remains.
  EXPECT_THROW(nn::save_safetensors({{"a", tl::ones({2})}, {"b", Tensor()}}, path), tl::Error);
  EXPECT_THROW(nn::save_safetensors({{"__metadata__", tl::ones({2})}}, path), tl::Error);
  EXPECT_EQ(read_all(path), before);
  // An unwritable destination: the error names it, nothing is created.
  const std::string nowhere = file("no_such_dir/x.safetensors");
  try {
    nn::save_safetensors({{"x", tl::ones({3})}}, nowhere);
    FAIL();
  } catch (const tl::Error& e) {
    EXPECT_NE(std::string(e.what()).find(nowhere), std::string::npos) << e.what();
  }
  size_t entries = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    (void)entry;
    ++entries;
  }
  EXPECT_EQ(entries, 1u) << "only keep.safetensors";
}

}  // namespace
