#include "tensorlib/nn/serialize.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensorlib/autograd/grad_mode.h"

namespace tl::nn {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swapping");

namespace {

using json = nlohmann::json;

// The reference implementation refuses headers over 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

template <typename... Args>
[[noreturn]] void fail(const std::string& path, Args&&... args) {
  throw Error(detail::str("safetensors file '", path, "': ", std::forward<Args>(args)...));
}

const char* dtype_code(ScalarType t) {
  switch (t) {
    case kFloat64:
      return "F64";
    case kFloat32:
      return "F32";
    case kFloat16:
      return "F16";
    case kBFloat16:
      return "BF16";
    case kInt64:
      return "I64";
    case kInt32:
      return "I32";
    case kInt16:
      return "I16";
    case kInt8:
      return "I8";
    case kUInt8:
      return "U8";
    case kBool:
      return "BOOL";
  }
  return nullptr;
}

struct FileDtype {
  ScalarType dtype;   // what the tensor is loaded as
  size_t file_bytes;  // bytes per element in the file
};

bool parse_dtype(const std::string& code, FileDtype& out) {
  static const std::map<std::string, FileDtype> kCodes = {
      {"F64", {kFloat64, 8}},   {"F32", {kFloat32, 4}}, {"F16", {kFloat16, 2}},
      {"BF16", {kBFloat16, 2}}, {"I64", {kInt64, 8}},   {"I32", {kInt32, 4}},
      {"I16", {kInt16, 2}},     {"I8", {kInt8, 1}},     {"U8", {kUInt8, 1}},
      {"BOOL", {kBool, 1}}};
  auto it = kCodes.find(code);
  if (it == kCodes.end()) return false;
  out = it->second;
  return true;
}

// A non-negative integer of the header, or a failure naming what it is.
uint64_t header_uint(const std::string& path, const json& v, const std::string& what) {
  if (!v.is_number_integer() ||
      (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0))
    fail(path, "bad header: ", what, " must be a non-negative integer, got ", v.dump());
  return v.get<uint64_t>();
}

struct Entry {
  std::string name;
  FileDtype dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

Entry parse_entry(const std::string& path, const std::string& name, const json& v) {
  if (!v.is_object()) fail(path, "bad header: entry '", name, "' is not an object");
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!v.contains(field)) fail(path, "bad header: tensor '", name, "' has no \"", field, "\"");
  Entry e{name, {}, {}, 0, 0};
  const json& dt = v["dtype"];
  if (!dt.is_string())
    fail(path, "bad header: tensor '", name, "' has a dtype that is not a string");
  if (!parse_dtype(dt.get<std::string>(), e.dtype))
    fail(path, "unknown dtype '", dt.get<std::string>(), "' for tensor '", name, "'");
  const json& shape = v["shape"];
  if (!shape.is_array())
    fail(path, "bad header: tensor '", name, "' has a shape that is not a list");
  uint64_t numel = 1;
  for (const json& d : shape) {
    uint64_t s = header_uint(path, d, "a dimension of '" + name + "'");
    if (s > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(numel, s, &numel))
      fail(path, "bad header: tensor '", name, "' has a shape too large to address");
    e.shape.push_back(static_cast<int64_t>(s));
  }
  const json& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2)
    fail(path, "bad header: tensor '", name, "' needs data_offsets [begin, end]");
  e.begin = header_uint(path, off[0], "data_offsets of '" + name + "'");
  e.end = header_uint(path, off[1], "data_offsets of '" + name + "'");
  uint64_t nbytes = 0;
  if (e.end < e.begin || __builtin_mul_overflow(numel, e.dtype.file_bytes, &nbytes) ||
      e.end - e.begin != nbytes)
    fail(path, "tensor '", name, "': data_offsets [", e.begin, ", ", e.end, "] do not hold ",
         dt.get<std::string>(), " ", shape.dump(), " (", nbytes, " bytes)");
  return e;
}

// Copies n elements of `bytes`-wide file integers into int32 (I16 and I8, sign-extended).
void widen(const char* src, int32_t* dst, int64_t n, size_t bytes) {
  for (int64_t i = 0; i < n; ++i) {
    if (bytes == 2) {
      int16_t v;
      std::memcpy(&v, src + 2 * i, 2);
      dst[i] = v;
    } else {
      dst[i] = static_cast<int8_t>(src[i]);
    }
  }
}

std::string temp_name(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

}  // namespace

void save_safetensors(const std::map<std::string, Tensor>& tensors, const std::string& path,
                      const std::map<std::string, std::string>& metadata) {
  // Contiguous CPU copies, laid out by decreasing element size, then by name.
  std::vector<std::pair<std::string, Tensor>> order;
  for (const auto& [name, t] : tensors) {
    if (name == kMetadataKey) fail(path, "'", kMetadataKey, "' is reserved, not a tensor name");
    if (!t.defined()) fail(path, "tensor '", name, "' is undefined");
    NoGradGuard no_grad;
    order.emplace_back(name, t.detach().cpu().contiguous());
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.second.element_size() > b.second.element_size();
  });
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : order) {
    header[name] = {{"dtype", dtype_code(t.dtype())},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  const std::string tmp = temp_name(path);
  try {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(path, "cannot create '", tmp, "': ", std::strerror(errno));
    uint64_t n = text.size();
    char len[8];
    std::memcpy(len, &n, 8);
    out.write(len, 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& [name, t] : order)
      if (t.nbytes() > 0)
        out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    out.flush();
    if (!out) fail(path, "write failed: ", std::strerror(errno));
    out.close();
    if (!out) fail(path, "write failed on close: ", std::strerror(errno));
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) fail(path, "cannot rename '", tmp, "' to it: ", ec.message());
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw;
  }
}

std::map<std::string, Tensor> load_safetensors(const std::string& path,
                                               std::map<std::string, std::string>* metadata) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open: ", std::strerror(errno));
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (size < 8) fail(path, "truncated: ", size, " bytes, too short for the 8-byte header length");
  char len[8];
  in.read(len, 8);
  uint64_t n;
  std::memcpy(&n, len, 8);
  if (n > kMaxHeaderBytes) fail(path, "bad header: its length ", n, " exceeds 100 MB");
  if (n > size - 8)
    fail(path, "truncated: the header needs ", n, " bytes, the file has ", size - 8,
         " after the length");
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  if (!in) fail(path, "read failed in the header");
  json header = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) fail(path, "bad header: not valid JSON");
  if (!header.is_object())
    fail(path, "bad header: expected a JSON object, got ", header.type_name());

  const uint64_t data_size = size - 8 - n;
  std::vector<Entry> entries;
  if (metadata) metadata->clear();
  for (const auto& [name, v] : header.items()) {
    if (name == kMetadataKey) {
      if (!v.is_object()) fail(path, "bad header: __metadata__ must be an object of strings");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string())
          fail(path, "bad header: __metadata__ value of '", k, "' is not a string");
        if (metadata) (*metadata)[k] = s.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(path, name, v));
    if (entries.back().end > data_size)
      fail(path, "tensor '", name, "': data_offsets [", entries.back().begin, ", ",
           entries.back().end, "] are out of range of the ", data_size, "-byte data (truncated?)");
  }
  // The tensors must tile the data exactly: no overlap, no gap (as the reference checks).
  std::vector<const Entry*> by_offset;
  for (const Entry& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry* e : by_offset) {
    if (e->begin < covered)
      fail(path, "tensors '", previous->name, "' and '", e->name, "' overlap in the data");
    if (e->begin > covered)
      fail(path, "bytes [", covered, ", ", e->begin, ") of the data belong to no tensor");
    covered = e->end;
    previous = e;
  }
  if (covered != data_size)
    fail(path, "the data has ", data_size - covered, " bytes after the last tensor");

  std::map<std::string, Tensor> out;
  std::vector<char> staging;
  for (const Entry& e : entries) {
    Tensor t = tl::empty(e.shape, e.dtype.dtype);
    const uint64_t nbytes = e.end - e.begin;
    if (nbytes > 0) {
      in.seekg(static_cast<std::streamoff>(8 + n + e.begin));
      const bool direct = e.dtype.file_bytes == t.element_size();
      if (!direct) staging.resize(nbytes);
      char* dst = direct ? static_cast<char*>(t.data_ptr()) : staging.data();
      in.read(dst, static_cast<std::streamsize>(nbytes));
      if (!in) fail(path, "read failed in the data of tensor '", e.name, "'");
      if (!direct) widen(staging.data(), t.data_ptr<int32_t>(), t.numel(), e.dtype.file_bytes);
      if (t.dtype() == kBool) {  // any other byte would be an invalid bool
        const auto* b = static_cast<const unsigned char*>(t.data_ptr());
        for (uint64_t i = 0; i < nbytes; ++i)
          if (b[i] > 1)
            fail(path, "tensor '", e.name, "': BOOL byte ", i, " is ", int(b[i]), ", not 0 or 1");
      }
    }
    out.emplace(e.name, std::move(t));
  }
  return out;
}

void save(const Module& module, const std::string& path) {
  save_safetensors(module.state_dict(), path, {{"format", "pt"}});
}

void load(Module& module, const std::string& path) {
  auto tensors = load_safetensors(path);
  try {
    module.load_state_dict(tensors);
  } catch (const Error& e) {
    fail(path, e.what());
  }
}

}  // namespace tl::nn
