#include "profiler/store/event_stream.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace tidemark::store::detail {

namespace {
struct Later {
  template <class P>
  bool operator()(const P& a, const P& b) const {
    return a->seq() > b->seq();
  }
};
}  // namespace

BlockHeader block_header(Stmt& row, int column, const std::string& what) {
  const int64_t count = row.i64(column + 1);
  if (count < 0 || count > UINT32_MAX) throw StoreError(what + ": corrupt event block (bad count)");
  return {row.u64(column),     static_cast<uint32_t>(count), row.u64(column + 2),
          row.u64(column + 3), row.u64(column + 4),          row.u64(column + 5)};
}

EventStream::EventStream(Db& db, BlockForm form)
    : db_(db),
      form_(form),
      // The header from column 2, so first_seq is column 4.
      blocks_(db, (std::string("SELECT id, data, ") + kBlockHeaderColumns +
                   " FROM event_blocks ORDER BY first_seq, id")
                      .c_str()) {
  blocks_left_ = blocks_.step();
  if (blocks_left_) pending_first_seq_ = blocks_.u64(4);
}

void EventStream::open_next_block() {
  std::unique_ptr<Cursor> c;
  if (!spare_.empty()) {
    c = std::move(spare_.back());
    spare_.pop_back();
  } else {
    c = std::make_unique<Cursor>();
  }
  c->pos = 0;
  const std::string what = db_.path() + ": event block " + std::to_string(blocks_.i64(0));
  const BlockHeader header = block_header(blocks_, 2, what);
  decode_block(blocks_.blob(1), header, form_, c->block, what);
  if (!c->block.events.empty()) {
    heap_.push_back(std::move(c));
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  } else {
    spare_.push_back(std::move(c));
  }
  blocks_left_ = blocks_.step();
  if (blocks_left_) pending_first_seq_ = blocks_.u64(4);
}

bool EventStream::next() {
  // The block that produced the previous event may be finished now.
  if (retired_) spare_.push_back(std::move(retired_));
  if (current_) {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    Cursor& c = *heap_.back();
    if (++c.pos < c.block.events.size()) {
      std::push_heap(heap_.begin(), heap_.end(), Later{});
    } else {
      retired_ = std::move(heap_.back());
      heap_.pop_back();
    }
  }
  // Every unopened block starts at or after pending_first_seq_: open blocks until the heap's
  // minimum is below it.
  while (blocks_left_ && (heap_.empty() || pending_first_seq_ <= heap_.front()->seq()))
    open_next_block();
  if (heap_.empty()) {
    current_ = nullptr;
    return false;
  }
  const Cursor& top = *heap_.front();
  current_ = &top.block.events[top.pos];
  return true;
}

}  // namespace tidemark::store::detail
