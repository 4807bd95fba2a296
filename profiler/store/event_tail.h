// Follows a trace while it is being recorded. The recorder appends event blocks and commits
// them about every 50 ms in WAL mode (docs/recording.md); an EventTail hands over the events of the
// blocks committed since its last poll(), so a viewer (analysis::LiveTrace) keeps up with a
// growing file without reading it again or knowing how blocks are stored.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "profiler/store/event_codec.h"

namespace tidemark::store {

class EventTail {
 public:
  // Opens `path` to follow it. The caller has checked it is a trace of this schema
  // (TraceReader::open with Require::raw gives the messages users see).
  explicit EventTail(const std::string& path);
  ~EventTail();
  EventTail(const EventTail&) = delete;
  EventTail& operator=(const EventTail&) = delete;

  // Calls `fn` with every event committed since the last call, each thread's in seq order
  // (threads' events interleave in the order their blocks were stored), and returns how many.
  // When nothing is new: one indexed query per recording thread, and one more. The event is valid
  // during the call only. Throws StoreError naming the file and the block when a block is damaged.
  size_t poll(const std::function<void(const DecodedEvent&)>& fn);
  // Whether the recording ended and finalize built the derived tables, as of now.
  bool finalized() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace tidemark::store
