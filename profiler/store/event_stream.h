// Reads the raw events of a trace back in seq order, merging the per-thread blocks
// (each block is a sorted run of seq; see event_codec.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "profiler/store/event_codec.h"
#include "profiler/store/sqlite_db.h"

namespace tidemark::store::detail {

// The columns of an `event_blocks` row that make its header, in BlockHeader's order, and the
// header of a row selected with them starting at `column`. Throws StoreError naming `what`
// when the count is not one a block can hold (a damaged row).
inline constexpr const char* kBlockHeaderColumns =
    "thread, count, first_seq, last_seq, first_ts, last_ts";
BlockHeader block_header(Stmt& row, int column, const std::string& what);

class EventStream {
 public:
  // `form`: how the trace's schema stores its blocks (block_form in event_codec.h).
  explicit EventStream(Db& db, BlockForm form = BlockForm::sealed);
  // Advances to the next event in seq order; false at the end. The previous event (and its
  // spans) stays valid until the next call.
  bool next();
  const DecodedEvent& current() const { return *current_; }

 private:
  struct Cursor {
    DecodedBlock block;
    size_t pos = 0;
    uint64_t seq() const { return block.events[pos].event.seq; }
  };
  void open_next_block();

  Db& db_;
  BlockForm form_;
  Stmt blocks_;
  bool blocks_left_ = true;
  // Pending row of `blocks_` (valid while blocks_left_).
  uint64_t pending_first_seq_ = 0;
  std::vector<std::unique_ptr<Cursor>> heap_;   // min-heap on seq()
  std::unique_ptr<Cursor> retired_;             // keeps current_ alive after its block ended
  std::vector<std::unique_ptr<Cursor>> spare_;  // decoded-block buffers to reuse
  const DecodedEvent* current_ = nullptr;
};

}  // namespace tidemark::store::detail
