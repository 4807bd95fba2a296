// A snapshot's frames as a trace's stacks: each distinct frame becomes a synthetic return
// address (1, 2, ...) with its symbolized frame, each distinct stack a node of the trace's
// prefix tree (stack_nodes), written as they are first seen.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "profiler/importers/snapshot_reader.h"
#include "profiler/store/trace_writer.h"

namespace tidemark::importers::snapshot {

// The one frame that stands for the frames left out past the bound (Note [Frame bound]).
constexpr const char* kLeftOutFrame = "(frames left out)";

struct FrameKey {
  std::string_view name, file;
  int64_t line;
  bool operator==(const FrameKey&) const = default;
};
struct FrameKeyHash {
  size_t operator()(const FrameKey& k) const {
    size_t h = std::hash<std::string_view>{}(k.name);
    h = h * 31 + std::hash<std::string_view>{}(k.file);
    return h * 31 + std::hash<int64_t>{}(k.line);
  }
};
struct NodeKey {
  uint64_t parent, ip;
  bool operator==(const NodeKey&) const = default;
};
struct NodeKeyHash {
  size_t operator()(const NodeKey& k) const {
    return std::hash<uint64_t>{}(k.parent * 0x9e3779b97f4a7c15ull ^ k.ip);
  }
};

// Frames -> synthetic ips (1, 2, ...) and stacks -> nodes of the prefix tree.
class Stacks {
 public:
  Stacks(const SnapshotReader& reader, Notes& notes)
      : reader_(reader), doc_(reader.doc()), notes_(notes) {}

  void set_writer(store::TraceWriter* w) { writer_ = w; }

  // The stack id of a frame run (innermost frame first, as PyTorch writes them); 0 for none.
  uint64_t stack(FrameRun run);

  std::vector<store::ResolvedFrame> take_frames() { return std::move(frames_); }
  size_t max_depth() const { return max_depth_; }
  size_t frame_count() const { return frames_.size(); }

 private:
  // Appends the ips of a frame to `out`: one, or for a frame of FX-generated code with the
  // user's source lines, those lines (Note [FX frames]). Note [Lenient fields]: a frame that
  // is not a dict, or a field of an odd type, is unknown.
  void frame(Ref f, std::vector<uint64_t>& out);
  uint64_t intern(const FrameKey& key);
  // A frame's string field; empty when absent or None, and when of another type (a note).
  std::string_view text_field(Ref f, const char* key);
  // The user's lines of an FX frame's `fx_original_trace`, outermost first; false when it
  // names none (it is then counted in the notes and the frame kept).
  bool fx_frames(Ref f, std::string_view trace, std::vector<uint64_t>& out);

  const SnapshotReader& reader_;
  const pickle::Document& doc_;
  Notes& notes_;
  store::TraceWriter* writer_ = nullptr;
  // Frame dict (container identity) -> its ips, [first, first + count) of frame_ips_: a map, as
  // frame dicts are few among the containers.
  std::unordered_map<uint32_t, std::pair<uint32_t, uint32_t>> frame_of_;
  std::vector<uint64_t> frame_ips_;
  std::deque<std::string> names_;   // function names made here (an FX frame's), for FrameKey
  std::vector<uint64_t> stack_of_;  // frame run -> stack id
  std::unordered_map<FrameKey, uint64_t, FrameKeyHash> by_content_;
  std::unordered_map<NodeKey, uint64_t, NodeKeyHash> nodes_;
  struct BytesHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // Outermost-first ips, as bytes -> stack id.
  std::unordered_map<std::string, uint64_t, BytesHash, std::equal_to<>> by_ips_;
  std::vector<uint64_t> ips_;
  std::vector<store::ResolvedFrame> frames_;  // ip - 1 -> frame
  size_t max_depth_ = 0;
};

}  // namespace tidemark::importers::snapshot
