// Snapshots built for the importer's tests (pytorch_snapshot_test.cpp,
// pytorch_snapshot_errors_test.cpp): the pickle PyTorch's _dump_snapshot writes, from plain
// structs, and what the tests read back.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "profiler/importers/pytorch_snapshot.h"
#include "profiler/pickle/pickle_writer.h"
#include "profiler/store/trace_reader.h"

namespace snapshot_test {
namespace fs = std::filesystem;
namespace im = tidemark::importers;
namespace st = tidemark::store;
namespace ev = tidemark::events;
using im::pickle::PickleWriter;

inline const fs::path kData = fs::path(__FILE__).parent_path() / "data";
inline const fs::path kSnapshot =
    fs::path(TIDEMARK_TEST_DATA) / "pytorch/snapshot_small_gpu.pickle";

class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("tidemark-import-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

struct Final {
  int64_t allocated = 0, active = 0, reserved = 0, requested = 0;
};

// The curves' values after the last memory event (level 0 of the LOD pyramid).
inline Final final_values(const st::TraceReader& r, int64_t device) {
  auto rows = r.lod(device, 0, 0, UINT64_MAX);
  if (rows.empty()) return {};
  const st::LodRow& last = rows.back();
  return {last.allocated, last.active, last.reserved, last.requested};
}

inline int64_t device_row(const st::TraceReader& r, int index) {
  auto id = r.device_row_id({ev::DeviceType::cuda, static_cast<int8_t>(index)});
  EXPECT_TRUE(id) << "no cuda:" << index;
  return id.value_or(-1);
}

struct Frame {
  std::string name, file;
  int line = 0;
  // What torch.compile's snapshots add to a frame of generated code (written when not empty).
  std::string fx_node_op, fx_node_name, fx_node_target, fx_original_trace;
};
struct Blk {
  uint64_t addr = 0, size = 0, requested = 0;
  std::string state = "active_allocated";
  std::vector<Frame> frames;
};
struct Seg {
  int device = 0;
  uint64_t addr = 0, total = 0, stream = 0;
  std::string type = "large";
  bool expandable = false;
  std::vector<Blk> blocks;
  std::pair<int64_t, int64_t> pool_id{0, 0};  // segment_pool_id
};
struct Ent {
  std::string action;
  uint64_t addr = 0, size = 0;
  int64_t time_us = 0;
  uint64_t stream = 0;
  std::vector<Frame> frames;
  std::optional<uint64_t> device_free;
  // PyTorch 2.5+ (written when set): "N/A" and "" are what it writes for none.
  std::optional<std::string> compile_context, user_metadata;
};
// An external_annotations entry (a record_function range opening or closing).
struct Ann {
  std::string stage;  // "START", "END"
  std::string name;
  int device = 0;
  int64_t time_us = 0;
};
// host_segments and host_traces (the pinned host allocator's); `flat`: host_traces as one
// list of entries instead of a list of traces.
struct Host {
  std::vector<Seg> segments;
  std::vector<std::vector<Ent>> traces;
  bool flat = false;
};

class SnapshotBuilder {
 public:
  explicit SnapshotBuilder(int protocol = 4) : w_(protocol) {}

  SnapshotBuilder& annotations(std::vector<Ann> a) {
    annotations_ = std::move(a);
    return *this;
  }
  SnapshotBuilder& host(Host h) {
    host_ = std::move(h);
    return *this;
  }

  std::string build(const std::vector<Seg>& segs, const std::vector<std::vector<Ent>>& traces) {
    w_.empty_dict();
    w_.memoize();
    w_.mark();
    w_.str("segments");
    w_.empty_list();
    w_.memoize();
    w_.mark();
    for (const Seg& s : segs) segment(s);
    w_.appends();
    w_.str("device_traces");
    w_.empty_list();
    w_.memoize();
    w_.mark();
    for (const auto& t : traces) {
      w_.empty_list();
      w_.memoize();
      if (!t.empty()) {
        w_.mark();
        for (const Ent& e : t) entry(e);
        w_.appends();
      }
    }
    w_.appends();
    if (host_) {
      w_.str("host_segments");
      w_.empty_list();
      w_.memoize();
      if (!host_->segments.empty()) {
        w_.mark();
        for (const Seg& s : host_->segments) segment(s);
        w_.appends();
      }
      w_.str("host_traces");
      w_.empty_list();
      w_.memoize();
      w_.mark();
      for (const auto& t : host_->traces) {
        if (!host_->flat) {
          w_.empty_list();
          w_.memoize();
          w_.mark();
        }
        for (const Ent& e : t) entry(e);
        if (!host_->flat) w_.appends();
      }
      w_.appends();
    }
    if (!annotations_.empty()) {
      w_.str("external_annotations");
      w_.empty_list();
      w_.memoize();
      w_.mark();
      for (const Ann& a : annotations_) {
        w_.empty_dict().mark();
        key("stage");
        w_.str(a.stage);
        key("name");
        w_.str(a.name);
        key("device");
        w_.integer(a.device);
        key("time_us");
        w_.integer(a.time_us);
        w_.setitems();
      }
      w_.appends();
    }
    w_.str("allocator_settings");
    w_.empty_dict()
        .mark()
        .str("expandable_segments")
        .boolean(false)
        .str("max_split_size")
        .integer(-1)
        .setitems();
    w_.setitems();
    return w_.finish();
  }

 private:
  // Keys are memoized once and fetched again (as Python's pickler does).
  void key(const std::string& k) {
    auto it = keys_.find(k);
    if (it != keys_.end()) {
      w_.get(it->second);
      return;
    }
    w_.str(k);
    keys_[k] = w_.memoize();
  }
  void frames(const std::vector<Frame>& fs) {
    key("frames");
    w_.empty_list();
    w_.memoize();
    if (fs.empty()) return;
    w_.mark();
    for (const Frame& f : fs) {
      std::string id = f.name + "\n" + f.file + "\n" + std::to_string(f.line) + "\n" +
                       f.fx_node_name + "\n" + f.fx_original_trace;
      auto it = frames_.find(id);
      if (it != frames_.end()) {
        w_.get(it->second);
        continue;
      }
      w_.empty_dict();
      uint32_t m = w_.memoize();
      w_.mark();
      key("name");
      w_.str(f.name);
      key("filename");
      w_.str(f.file);
      key("line");
      w_.integer(f.line);
      for (const auto& [k, v] :
           {std::pair<const char*, const std::string&>{"fx_node_op", f.fx_node_op},
            {"fx_node_name", f.fx_node_name},
            {"fx_node_target", f.fx_node_target},
            {"fx_original_trace", f.fx_original_trace}})
        if (!v.empty()) key(k), w_.str(v);
      w_.setitems();
      frames_[id] = m;
    }
    w_.appends();
  }
  void segment(const Seg& s) {
    w_.empty_dict();
    w_.memoize();
    w_.mark();
    key("device");
    w_.integer(s.device);
    key("address");
    w_.integer(static_cast<int64_t>(s.addr));
    key("total_size");
    w_.integer(static_cast<int64_t>(s.total));
    key("stream");
    w_.integer(static_cast<int64_t>(s.stream));
    key("segment_type");
    w_.str(s.type);
    key("segment_pool_id");
    w_.integer(s.pool_id.first).integer(s.pool_id.second).tuple_n(2);
    key("is_expandable");
    w_.boolean(s.expandable);
    frames({});
    key("blocks");
    w_.empty_list();
    w_.memoize();
    if (!s.blocks.empty()) {
      w_.mark();
      for (const Blk& b : s.blocks) {
        w_.empty_dict();
        w_.memoize();
        w_.mark();
        key("address");
        w_.integer(static_cast<int64_t>(b.addr));
        key("size");
        w_.integer(static_cast<int64_t>(b.size));
        key("requested_size");
        w_.integer(static_cast<int64_t>(b.requested));
        key("state");
        w_.str(b.state);
        frames(b.frames);
        w_.setitems();
      }
      w_.appends();
    }
    w_.setitems();
  }
  void entry(const Ent& e) {
    w_.empty_dict();
    w_.memoize();
    w_.mark();
    key("action");
    w_.str(e.action);
    if (e.device_free) {
      key("device_free");
      w_.integer(static_cast<int64_t>(*e.device_free));
    } else {
      key("addr");
      w_.integer(static_cast<int64_t>(e.addr));
    }
    key("size");
    w_.integer(static_cast<int64_t>(e.size));
    key("stream");
    w_.integer(static_cast<int64_t>(e.stream));
    key("time_us");
    w_.integer(e.time_us);
    frames(e.frames);
    if (e.compile_context) key("compile_context"), w_.str(*e.compile_context);
    if (e.user_metadata) key("user_metadata"), w_.str(*e.user_metadata);
    w_.setitems();
  }

  PickleWriter w_;
  std::map<std::string, uint32_t> keys_, frames_;
  std::vector<Ann> annotations_;
  std::optional<Host> host_;
};

inline constexpr uint64_t MiB = 1 << 20;

inline std::string write(const TempDir& dir, const std::string& name, const std::string& bytes) {
  std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

}  // namespace snapshot_test
