// The compact encoding of raw events inside `event_blocks.data` (docs/trace-format.md,
// "Event blocks"). A block holds events of one thread in increasing seq order; every field is
// a varint, most of them deltas against the previous event of the block, so an allocator or
// tensor event takes 15-25 bytes. Blocks decode independently of each other. What is stored
// is that encoding in one zstd frame (Note [Compressed blobs] in compress.cpp): a few bytes
// per event.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "profiler/events/events.h"

namespace tidemark::store {

// A decoded event. Strings are interned ids (table `strings`): for tensor_create/release
// `str_a` is the dtype and `str_b` the op, for scope_push/scope_pop/step/mark `str_a` is the
// name; 0 means "". The event's string views are left empty; its tensor spans point into the
// DecodedBlock that holds it.
struct DecodedEvent {
  events::Event event;
  uint64_t stack_id = 0;
  uint64_t str_a = 0;
  uint64_t str_b = 0;
};

struct DecodedBlock {
  std::vector<DecodedEvent> events;
  std::vector<int64_t> dims;     // sizes and strides of the block's tensor events
  std::vector<uint8_t> encoded;  // the block's decompressed encoding (reused between blocks)
};

// A block's row in `event_blocks`, but for its id and data: whose events, how many, and the
// seq and time range they span.
struct BlockHeader {
  uint64_t thread = 0;
  uint32_t count = 0;
  uint64_t first_seq = 0, last_seq = 0, first_ts = 0, last_ts = 0;
  bool operator==(const BlockHeader&) const = default;
};

// How a trace stores its blocks (Note [Sealed blocks] in event_codec.cpp): the encoding as it
// is (schemas 1-4), in a zstd frame (5-6), or sealed: the encoding and a copy of the block's
// header in one checksummed frame (7 on).
enum class BlockForm { encoded, compressed, sealed };
BlockForm block_form(int schema_version);

// The stored form of a block: `encoding` and `header` sealed in one checksummed frame.
std::vector<uint8_t> seal_block(std::span<const uint8_t> encoding, const BlockHeader& header);

class BlockEncoder {
 public:
  explicit BlockEncoder(uint64_t thread = 0) : thread_(thread) {}

  // Appends one event; `e.thread_id` is not stored (a block belongs to one thread). Strings
  // must already be interned: `str_a`/`str_b` as in DecodedEvent.
  void add(const events::Event& e, uint64_t stack_id, uint64_t str_a, uint64_t str_b);
  void clear();

  uint64_t thread() const { return thread_; }
  uint32_t count() const { return count_; }
  bool empty() const { return count_ == 0; }
  uint64_t first_seq() const { return first_seq_; }
  uint64_t last_seq() const { return prev_seq_; }
  uint64_t first_ts() const { return first_ts_; }
  uint64_t last_ts() const { return last_ts_; }
  BlockHeader header() const;
  // The encoding, and the block as stored (`event_blocks.data`): the encoding sealed.
  std::span<const uint8_t> data() const { return {buf_.data(), size_}; }
  std::vector<uint8_t> stored() const;
  size_t size_bytes() const { return size_; }

 private:
  uint8_t* reserve(size_t n);

  uint64_t thread_;
  std::vector<uint8_t> buf_;
  size_t size_ = 0;
  uint32_t count_ = 0;
  uint64_t first_seq_ = 0, first_ts_ = 0, last_ts_ = 0;
  // Delta state (Note [Block delta state] in event_codec.cpp).
  uint64_t prev_seq_ = 0, prev_ts_ = 0, prev_stack_ = 0, prev_addr_ = 0, prev_tensor_ = 0,
           prev_storage_ = 0;
  events::DeviceId prev_device_;
};

// Decodes the events of a stored block (`event_blocks.data` in `form`) whose row says
// `header`. Throws StoreError (naming `what`, e.g. "<file>: event block 12") on a damaged
// frame, a checksum that does not match, a row that is not the one the block was sealed
// with, truncated or malformed data.
void decode_block(std::span<const uint8_t> stored, const BlockHeader& header, BlockForm form,
                  DecodedBlock& out, const std::string& what);
// A stored block's encoding (`BlockEncoder::data()`), checked as decode_block checks it, into
// `out` (replaced): what an upgrade re-seals.
void block_encoding(std::span<const uint8_t> stored, const BlockHeader& header, BlockForm form,
                    std::vector<uint8_t>& out, const std::string& what);

}  // namespace tidemark::store
