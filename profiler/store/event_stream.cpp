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

EventStream::EventStream(Db& db, BlockForm form)
    : db_(db),
      form_(form),
      blocks_(db,
              "SELECT id, thread, count, data, first_seq, last_seq, first_ts, last_ts "
              "FROM event_blocks ORDER BY first_seq, id") {
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
  const int64_t count = blocks_.i64(2);
  if (count < 0 || count > UINT32_MAX) throw StoreError(what + ": corrupt event block (bad count)");
  const BlockHeader header{blocks_.u64(1), static_cast<uint32_t>(count),
                           blocks_.u64(4), blocks_.u64(5),
                           blocks_.u64(6), blocks_.u64(7)};
  decode_block(blocks_.blob(3), header, form_, c->block, what);
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
