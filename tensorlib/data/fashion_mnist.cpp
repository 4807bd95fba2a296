#include "tensorlib/data/fashion_mnist.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "tensorlib/autograd/grad_mode.h"

namespace tl::data {

namespace {

constexpr uint32_t kImageMagic = 2051;  // IDX: unsigned bytes, 3 dimensions
constexpr uint32_t kLabelMagic = 2049;  // IDX: unsigned bytes, 1 dimension
// A header claiming more examples than this is corrupt (Fashion-MNIST has 60,000 at most);
// checked before allocating for them.
constexpr uint32_t kMaxExamples = 1'000'000;
constexpr const char* kInstallHint =
    "install it with `apt-get install dataset-fashion-mnist` (or set TIDEMARK_FASHION_MNIST_DIR "
    "to a directory holding the Fashion-MNIST IDX files)";

// A gzip'd (or plain: zlib reads those transparently) file whose errors name the file.
class GzReader {
 public:
  explicit GzReader(std::string path) : path_(std::move(path)) {
    file_ = gzopen(path_.c_str(), "rb");
    TL_CHECK(file_ != nullptr, "Fashion-MNIST: cannot open ", path_, ": ", std::strerror(errno));
    gzbuffer(file_, 1 << 18);
  }
  ~GzReader() { gzclose(file_); }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // What the whole (decompressed) file should hold, for the truncation message.
  void expect_size(uint64_t bytes, std::string layout) {
    expected_size_ = bytes;
    layout_ = std::move(layout);
  }

  // Reads exactly n bytes, or throws naming the file and where its data ends.
  void read(void* dst, size_t n) {
    auto* out = static_cast<unsigned char*>(dst);
    size_t got = 0;
    while (got < n) {
      const auto chunk = static_cast<unsigned>(std::min<size_t>(n - got, INT_MAX));
      const int r = gzread(file_, out + got, chunk);
      if (r < 0) fail_corrupt();
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    pos_ += got;
    if (got < n) {
      const uint64_t expected = std::max<uint64_t>(expected_size_, pos_ - got + n);
      TL_CHECK(false, "Fashion-MNIST: ", path_, " is truncated: its data ends after ", pos_,
               " bytes, expected ", expected, layout_.empty() ? "" : " (", layout_,
               layout_.empty() ? "" : ")", zlib_note());
    }
  }

  // Reads the rest of the stream: it must hold nothing more, and its gzip trailer (CRC and
  // length) must check out.
  void expect_end() {
    unsigned char c;
    const int r = gzread(file_, &c, 1);
    if (r < 0) fail_corrupt();
    TL_CHECK(r == 0, "Fashion-MNIST: ", path_, " has unexpected data after its last example (",
             pos_, " bytes expected)");
    int errnum = Z_OK;
    gzerror(file_, &errnum);
    TL_CHECK(errnum == Z_OK, "Fashion-MNIST: ", path_,
             " is truncated or corrupt after its last example", zlib_note());
  }

  uint32_t read_u32() {
    unsigned char b[4];
    read(b, 4);
    return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
  }

  const std::string& path() const { return path_; }

 private:
  // " (zlib: <reason>)", or nothing when zlib saw no error. gzerror prefixes the path; drop it.
  std::string zlib_note() {
    int errnum = Z_OK;
    std::string msg = gzerror(file_, &errnum);
    if (errnum == Z_OK) return "";
    if (msg.starts_with(path_ + ": ")) msg = msg.substr(path_.size() + 2);
    return " (zlib: " + msg + ")";
  }

  [[noreturn]] void fail_corrupt() {
    TL_CHECK(false, "Fashion-MNIST: ", path_, " is corrupt", zlib_note());
    __builtin_unreachable();
  }

  uint64_t pos_ = 0;
  uint64_t expected_size_ = 0;
  std::string layout_;
  std::string path_;
  gzFile file_ = nullptr;
};

// root/name.gz, else root/name (uncompressed); errors name what is missing.
std::string locate(const std::string& root, const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  TL_CHECK(fs::is_directory(root, ec), "Fashion-MNIST: directory ", root, " not found; ",
           kInstallHint);
  const fs::path gz = fs::path(root) / (name + ".gz");
  if (fs::exists(gz, ec)) return gz.string();
  const fs::path plain = fs::path(root) / name;
  if (fs::exists(plain, ec)) return plain.string();
  TL_CHECK(false, "Fashion-MNIST: ", gz.string(), " not found; ", kInstallHint);
  return {};
}

uint32_t read_count(GzReader& f, uint32_t magic_expected, const char* kind) {
  const uint32_t magic = f.read_u32();
  TL_CHECK(magic == magic_expected, "Fashion-MNIST: ", f.path(), " is not an IDX ", kind,
           " file: magic number ", magic, ", expected ", magic_expected);
  const uint32_t count = f.read_u32();
  TL_CHECK(count > 0 && count <= kMaxExamples, "Fashion-MNIST: ", f.path(), " claims ", count, " ",
           kind, "s, expected between 1 and ", kMaxExamples);
  return count;
}

// Images as float32 [n, 1, 28, 28]: pixel / 255, standardised when `normalize`.
Tensor read_images(const std::string& path, int64_t limit, bool normalize, uint32_t* count) {
  GzReader f(path);
  *count = read_count(f, kImageMagic, "image");
  const uint32_t rows = f.read_u32(), cols = f.read_u32();
  TL_CHECK(rows == FashionMNIST::kRows && cols == FashionMNIST::kCols, "Fashion-MNIST: ", path,
           " holds ", rows, "x", cols, " images, expected 28x28");
  f.expect_size(16 + uint64_t{*count} * rows * cols,
                detail::str("a 16-byte header and ", *count, " 28x28 images"));
  const int64_t n = limit >= 0 ? std::min<int64_t>(limit, *count) : *count;
  constexpr int64_t kPixels = FashionMNIST::kRows * FashionMNIST::kCols;

  float lut[256];
  for (int v = 0; v < 256; ++v) {
    double x = v / 255.0;
    if (normalize) x = (x - FashionMNIST::kMean) / FashionMNIST::kStd;
    lut[v] = static_cast<float>(x);
  }
  Tensor images = empty({n, 1, FashionMNIST::kRows, FashionMNIST::kCols}, kFloat32);
  float* out = images.data_ptr<float>();
  std::vector<unsigned char> buf(size_t{1} << 20);
  int64_t left = n * kPixels;
  while (left > 0) {
    const auto chunk = static_cast<size_t>(std::min<int64_t>(left, buf.size()));
    f.read(buf.data(), chunk);
    for (size_t i = 0; i < chunk; ++i) out[i] = lut[buf[i]];
    out += chunk;
    left -= static_cast<int64_t>(chunk);
  }
  if (n == *count) f.expect_end();
  return images;
}

Tensor read_labels(const std::string& path, int64_t limit, uint32_t* count) {
  GzReader f(path);
  *count = read_count(f, kLabelMagic, "label");
  f.expect_size(8 + uint64_t{*count}, detail::str("an 8-byte header and ", *count, " labels"));
  const int64_t n = limit >= 0 ? std::min<int64_t>(limit, *count) : *count;
  std::vector<unsigned char> raw(static_cast<size_t>(n));
  f.read(raw.data(), raw.size());
  if (n == *count) f.expect_end();
  Tensor labels = empty({n}, kInt64);
  int64_t* out = labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    TL_CHECK(raw[i] < FashionMNIST::kNumClasses, "Fashion-MNIST: ", path, ": label ", int{raw[i]},
             " of example ", i, " is not a class in [0, 10)");
    out[i] = raw[i];
  }
  return labels;
}

}  // namespace

std::string FashionMNIST::default_root() {
  const char* env = std::getenv(kRootEnv);
  return env && *env ? std::string(env) : std::string(kDefaultRoot);
}

FashionMNIST::FashionMNIST(std::string root, bool train, FashionMNISTOptions options)
    : root_(root.empty() ? default_root() : std::move(root)), train_(train) {
  TL_CHECK(options.limit >= -1, "Fashion-MNIST: limit must be -1 (all) or a count, got ",
           options.limit);
  const std::string prefix = train ? "train" : "t10k";
  const std::string image_path = locate(root_, prefix + "-images-idx3-ubyte");
  const std::string label_path = locate(root_, prefix + "-labels-idx1-ubyte");
  NoGradGuard no_grad;
  uint32_t image_count = 0, label_count = 0;
  images_ = read_images(image_path, options.limit, options.normalize, &image_count);
  targets_ = read_labels(label_path, options.limit, &label_count);
  TL_CHECK(image_count == label_count, "Fashion-MNIST: ", image_path, " holds ", image_count,
           " images but ", label_path, " holds ", label_count, " labels");
  announce_input(images_);
  announce_input(targets_);
}

Example FashionMNIST::get(int64_t index) const {
  TL_CHECK_INDEX(index >= 0 && index < size(), "Fashion-MNIST: index ", index,
                 " is out of range for a dataset of size ", size());
  return {images_[index], targets_[index]};
}

Example FashionMNIST::get_batch(IntArrayRef indices) const {
  TL_CHECK(!indices.empty(), "Fashion-MNIST: get_batch expects at least one index");
  for (int64_t i : indices) {
    TL_CHECK_INDEX(i >= 0 && i < size(), "Fashion-MNIST: index ", i,
                   " is out of range for a dataset of size ", size());
  }
  NoGradGuard no_grad;
  Tensor idx = from_blob(const_cast<int64_t*>(indices.data()),
                         {static_cast<int64_t>(indices.size())}, kInt64);
  return {images_.index_select(0, idx), targets_.index_select(0, idx)};
}

FashionMNIST FashionMNIST::subset(int64_t n) const {
  TL_CHECK(n >= 0 && n <= size(), "Fashion-MNIST: subset(", n, ") of a dataset of size ", size());
  FashionMNIST s{Empty{}};
  s.root_ = root_;
  s.train_ = train_;
  s.images_ = images_.narrow(0, 0, n).clone();
  s.targets_ = targets_.narrow(0, 0, n).clone();
  announce_input(s.images_);
  announce_input(s.targets_);
  return s;
}

}  // namespace tl::data
