#include "profiler/store/event_codec.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "profiler/store/compress.h"
#include "profiler/store/trace_format.h"
#include "profiler/store/varint.h"

namespace tidemark::store {

namespace ev = events;

// Note [Block delta state]
// Every block starts from the same state (all previous values 0, device cpu:0) and each
// event updates it, so a block decodes on its own and a lost block loses nothing else.
// Deltas are zigzag-encoded so going backwards (a thread migrating between cores with
// slightly skewed clocks, addresses below the previous one) costs no more than forwards.
// Addresses share one "previous address" across alloc/free/segment/storage/category events:
// a free usually follows its alloc closely and blocks of one segment are near each other.

namespace {

constexpr uint8_t kKindMask = 0x1f;
constexpr uint8_t kDeviceChanged = 0x20;  // followed by type byte, index byte
constexpr uint8_t kHasStack = 0x40;       // followed by zigzag(stack - prev_stack)
constexpr uint8_t kSeqNext = 0x80;        // seq == prev_seq + 1; otherwise zigzag delta follows

using detail::delta;
using detail::unzigzag;
using detail::zigzag;
inline uint8_t* put(uint8_t* p, uint64_t v) {
  return detail::put_varint(p, v);
}

// Three fields use a tag bit to pick a short form; the code 1 (never produced by a short
// form) escapes to the raw value in a second varint, for values that do not fit beside a
// tag bit (>= 2^63).
constexpr uint64_t kEscape = 1;
constexpr uint64_t kTopBit = 1ull << 63;

// Sizes are usually multiples of 512 B: those store (size/512) << 1; others size << 1 | 1.
inline uint8_t* put_size(uint8_t* p, uint64_t size) {
  if (size % 512 == 0) return put(p, (size / 512) << 1);
  if (size < kTopBit) return put(p, (size << 1) | 1);
  return put(put(p, kEscape), size);
}

// requested_size relative to size: 0 = none; (size - requested + 1) << 1 when requested <=
// size; otherwise (requested << 1) | 1.
inline uint8_t* put_requested(uint8_t* p, uint64_t size, uint64_t req) {
  if (req == 0) return put(p, 0);
  if (req <= size && size - req < kTopBit - 1) return put(p, (size - req + 1) << 1);
  if (req > size && req < kTopBit) return put(p, (req << 1) | 1);
  return put(put(p, kEscape), req);
}

// The block's segment relative to its address: (addr - segment) << 1 when segment <= addr,
// otherwise (segment << 1) | 1.
inline uint8_t* put_segment(uint8_t* p, uint64_t addr, uint64_t seg) {
  if (seg <= addr && addr - seg < kTopBit) return put(p, (addr - seg) << 1);
  if (seg > addr && seg < kTopBit) return put(p, (seg << 1) | 1);
  return put(put(p, kEscape), seg);
}

class Reader : public detail::VarintReader {
 public:
  Reader(std::span<const uint8_t> d, const std::string& what)
      : VarintReader(d, what, "event block") {}
  uint64_t size() {
    uint64_t c = var();
    if (c == kEscape) return var();
    return c & 1 ? c >> 1 : (c >> 1) * 512;
  }
  uint64_t requested(uint64_t size) {
    uint64_t c = var();
    if (c == 0) return 0;
    if (c == kEscape) return var();
    return c & 1 ? c >> 1 : size - ((c >> 1) - 1);
  }
  uint64_t segment(uint64_t addr) {
    uint64_t c = var();
    if (c == kEscape) return var();
    return c & 1 ? c >> 1 : addr - (c >> 1);
  }
};

}  // namespace

uint8_t* BlockEncoder::reserve(size_t n) {
  if (buf_.size() < size_ + n) buf_.resize(std::max(buf_.size() * 2, size_ + n + 4096));
  return buf_.data() + size_;
}

void BlockEncoder::clear() {
  size_ = 0;
  count_ = 0;
  prev_seq_ = prev_ts_ = prev_stack_ = prev_addr_ = prev_tensor_ = prev_storage_ = 0;
  prev_device_ = {};
}

void BlockEncoder::add(const ev::Event& e, uint64_t stack_id, uint64_t str_a, uint64_t str_b) {
  size_t dims = 0;
  if (e.kind == ev::Kind::tensor_create || e.kind == ev::Kind::tensor_release)
    dims = e.tensor.sizes.size() + e.tensor.strides.size();
  // Header and fixed fields take at most ~110 bytes; each dimension at most 10.
  uint8_t* p = reserve(128 + 10 * dims);
  uint8_t* const start = p;

  uint8_t head = static_cast<uint8_t>(e.kind) & kKindMask;
  bool device_changed = !(e.device == prev_device_);
  if (device_changed) head |= kDeviceChanged;
  if (stack_id != 0) head |= kHasStack;
  bool seq_next = e.seq == prev_seq_ + 1;
  if (seq_next) head |= kSeqNext;
  *p++ = head;
  if (!seq_next) p = put(p, delta(e.seq, prev_seq_));
  p = put(p, delta(e.ts_ns, prev_ts_));
  if (device_changed) {
    *p++ = static_cast<uint8_t>(e.device.type);
    *p++ = static_cast<uint8_t>(e.device.index);
  }
  if (stack_id != 0) {
    p = put(p, delta(stack_id, prev_stack_));
    prev_stack_ = stack_id;
  }

  switch (ev::payload_of(e.kind)) {
    case ev::Payload::block: {
      const ev::BlockInfo& b = e.block;
      p = put(p, delta(b.addr, prev_addr_));
      prev_addr_ = b.addr;
      p = put_size(p, b.size);
      p = put_requested(p, b.size, b.requested_size);
      p = put(p, b.stream);
      p = put_segment(p, b.addr, b.segment);
      *p++ = static_cast<uint8_t>(static_cast<uint8_t>(b.pool) |
                                  (static_cast<uint8_t>(b.category) << 1));
      break;
    }
    case ev::Payload::allocator: {
      const ev::AllocatorInfo& a = e.allocator;
      for (uint64_t v : {a.requested_size, a.stream, a.device_free, a.device_total, a.allocated,
                         a.reserved, a.released})
        p = put(p, v);
      break;
    }
    case ev::Payload::storage: {
      const ev::StorageInfo& s = e.storage;
      p = put(p, delta(s.storage_id, prev_storage_));
      prev_storage_ = s.storage_id;
      p = put(p, delta(s.addr, prev_addr_));
      prev_addr_ = s.addr;
      p = put_size(p, s.nbytes);
      break;
    }
    case ev::Payload::tensor: {
      const ev::TensorInfo& t = e.tensor;
      p = put(p, delta(t.tensor_id, prev_tensor_));
      p = put(p, delta(t.storage_id, prev_storage_));
      prev_storage_ = t.storage_id;
      p = put(p, t.base_id == 0 ? 0 : delta(t.tensor_id, t.base_id) + 1);
      prev_tensor_ = t.tensor_id;
      p = put(p, t.sizes.size());
      for (int64_t v : t.sizes) p = put(p, zigzag(v));
      p = put(p, t.strides.size());
      for (int64_t v : t.strides) p = put(p, zigzag(v));
      p = put(p, zigzag(t.storage_offset));
      p = put(p, str_a);
      p = put(p, str_b);
      break;
    }
    case ev::Payload::category:
      p = put(p, delta(e.category.addr, prev_addr_));
      prev_addr_ = e.category.addr;
      *p++ = static_cast<uint8_t>(e.category.category);
      break;
    case ev::Payload::sync:
      *p++ = static_cast<uint8_t>(e.sync.kind);
      p = put(p, e.sync.stream);
      p = put(p, e.sync.duration_ns);
      break;
    case ev::Payload::memcpy: {
      const ev::MemcpyInfo& m = e.memcpy;
      *p++ = static_cast<uint8_t>(static_cast<uint8_t>(m.direction) | (m.pinned ? 4 : 0) |
                                  (m.async ? 8 : 0));
      p = put(p, m.bytes);
      p = put(p, m.stream);
      break;
    }
    case ev::Payload::name:
      p = put(p, str_a);
      p = put(p, e.name.value);
      break;
    case ev::Payload::collective: {
      const ev::CollectiveInfo& c = e.collective;
      *p++ = static_cast<uint8_t>(c.op);
      for (uint64_t v : {c.bytes, uint64_t{c.group_size}, uint64_t{c.rank}, c.group, c.duration_ns})
        p = put(p, v);
      break;
    }
  }
  size_ += static_cast<size_t>(p - start);

  if (count_ == 0) {
    first_seq_ = e.seq;
    first_ts_ = e.ts_ns;
  }
  last_ts_ = e.ts_ns;
  ++count_;
  prev_seq_ = e.seq;
  prev_ts_ = e.ts_ns;
  prev_device_ = e.device;
}

// Note [Sealed blocks]
// ~~~~~~~~~~~~~~~~~~~~
// Since schema 7 a block's frame holds, after the encoding of its events, a copy of its row
// (thread, count, first_seq, last_seq, first_ts, last_ts as varints) and then that copy's
// length in one byte; the frame's content checksum (Note [Compressed blobs]) covers both.
// The reader compares the copy with the row: a flipped bit in the row's count or seq range
// would otherwise decode too few events, or merge them out of order, without a word. A block
// that grows across commits is sealed again with its new row each time it is stored.

namespace {
constexpr const char* kBlockKind = "event block";

// The header sealed with a block: varints, then their length.
void append_sealed_header(std::vector<uint8_t>& out, const BlockHeader& h) {
  uint8_t buf[6 * detail::kMaxVarintBytes];
  uint8_t* p = buf;
  for (uint64_t v : {h.thread, uint64_t{h.count}, h.first_seq, h.last_seq, h.first_ts, h.last_ts})
    p = put(p, v);
  out.insert(out.end(), buf, p);
  out.push_back(static_cast<uint8_t>(p - buf));
}

// The encoding inside a sealed block's content, once its header matches `row`.
std::span<const uint8_t> unseal(std::span<const uint8_t> content, const BlockHeader& row,
                                const std::string& what) {
  if (content.empty()) throw StoreError(what + ": corrupt event block (no sealed header)");
  const size_t length = content.back();
  if (length + 1 > content.size())
    throw StoreError(what + ": corrupt event block (sealed header longer than the block)");
  const size_t at = content.size() - 1 - length;
  detail::VarintReader r(content.subspan(at, length), what, kBlockKind);
  BlockHeader sealed;
  sealed.thread = r.var();
  const uint64_t count = r.var();
  sealed.first_seq = r.var();
  sealed.last_seq = r.var();
  sealed.first_ts = r.var();
  sealed.last_ts = r.var();
  if (!r.done() || count > UINT32_MAX) r.fail("malformed sealed header");
  sealed.count = static_cast<uint32_t>(count);
  if (!(sealed == row))
    throw StoreError(what + ": corrupt event block (its row says thread " +
                     std::to_string(row.thread) + ", " + std::to_string(row.count) +
                     " events, seq " + std::to_string(row.first_seq) + "-" +
                     std::to_string(row.last_seq) + "; the block was sealed with thread " +
                     std::to_string(sealed.thread) + ", " + std::to_string(sealed.count) +
                     " events, seq " + std::to_string(sealed.first_seq) + "-" +
                     std::to_string(sealed.last_seq) + ": the file is damaged)");
  return content.first(at);
}

void decode_encoding(std::span<const uint8_t> data, uint64_t thread, uint32_t count,
                     DecodedBlock& out, const std::string& what);
}  // namespace

BlockForm block_form(int schema_version) {
  return schema_version < 5   ? BlockForm::encoded
         : schema_version < 7 ? BlockForm::compressed
                              : BlockForm::sealed;
}

std::vector<uint8_t> seal_block(std::span<const uint8_t> encoding, const BlockHeader& header) {
  std::vector<uint8_t> content(encoding.begin(), encoding.end());
  append_sealed_header(content, header);
  return detail::compress(content, detail::Checksum::required);
}

BlockHeader BlockEncoder::header() const {
  return {thread_, count_, first_seq_, prev_seq_, first_ts_, last_ts_};
}

std::vector<uint8_t> BlockEncoder::stored() const {
  return seal_block(data(), header());
}

void block_encoding(std::span<const uint8_t> stored, const BlockHeader& header, BlockForm form,
                    std::vector<uint8_t>& out, const std::string& what) {
  switch (form) {
    case BlockForm::encoded:
      out.assign(stored.begin(), stored.end());
      return;
    case BlockForm::compressed:
      detail::decompress(stored, out, what, kBlockKind, detail::Checksum::none);
      return;
    case BlockForm::sealed: {
      detail::decompress(stored, out, what, kBlockKind, detail::Checksum::required);
      out.resize(unseal(out, header, what).size());
      return;
    }
  }
}

void decode_block(std::span<const uint8_t> stored, const BlockHeader& header, BlockForm form,
                  DecodedBlock& out, const std::string& what) {
  if (form == BlockForm::encoded) {
    decode_encoding(stored, header.thread, header.count, out, what);
    return;
  }
  block_encoding(stored, header, form, out.encoded, what);
  decode_encoding(out.encoded, header.thread, header.count, out, what);
}

namespace {
void decode_encoding(std::span<const uint8_t> data, uint64_t thread, uint32_t count,
                     DecodedBlock& out, const std::string& what) {
  out.events.clear();
  out.dims.clear();
  // Every event takes at least two bytes: a count beyond that is corruption, not a reason to
  // allocate.
  if (count > data.size() / 2) throw StoreError(what + ": corrupt event block (bad count)");
  out.events.resize(count);
  // Tensor spans are filled after decoding, when `dims` no longer moves.
  struct DimRef {
    uint32_t event, sizes_at, nsizes, strides_at, nstrides;
  };
  std::vector<DimRef> dim_refs;

  Reader r(data, what);
  uint64_t prev_seq = 0, prev_ts = 0, prev_stack = 0, prev_addr = 0, prev_tensor = 0,
           prev_storage = 0;
  ev::DeviceId device;
  for (uint32_t i = 0; i < count; ++i) {
    DecodedEvent& d = out.events[i];
    ev::Event& e = d.event;
    uint8_t head = r.byte();
    uint8_t kind = head & kKindMask;
    if (kind >= ev::kNumKinds) r.fail("unknown event kind");
    e.kind = static_cast<ev::Kind>(kind);
    e.seq = head & kSeqNext ? prev_seq + 1 : prev_seq + static_cast<uint64_t>(r.svar());
    e.ts_ns = prev_ts + static_cast<uint64_t>(r.svar());
    if (head & kDeviceChanged) {
      uint8_t type = r.byte();
      if (type > 1) r.fail("unknown device type");
      device.type = static_cast<ev::DeviceType>(type);
      device.index = static_cast<int8_t>(r.byte());
    }
    e.device = device;
    e.thread_id = thread;
    if (head & kHasStack) {
      prev_stack += static_cast<uint64_t>(r.svar());
      d.stack_id = prev_stack;
    }
    switch (ev::payload_of(e.kind)) {
      case ev::Payload::block: {
        ev::BlockInfo& b = e.block;
        b.addr = prev_addr += static_cast<uint64_t>(r.svar());
        b.size = r.size();
        b.requested_size = r.requested(b.size);
        b.stream = r.var();
        b.segment = r.segment(b.addr);
        uint8_t pc = r.byte();
        if ((pc >> 1) >= ev::kNumCategories) r.fail("unknown category");
        b.pool = static_cast<ev::Pool>(pc & 1);
        b.category = static_cast<ev::Category>(pc >> 1);
        break;
      }
      case ev::Payload::allocator: {
        ev::AllocatorInfo& a = e.allocator;
        e.allocator = {};
        a.requested_size = r.var();
        a.stream = r.var();
        a.device_free = r.var();
        a.device_total = r.var();
        a.allocated = r.var();
        a.reserved = r.var();
        a.released = r.var();
        break;
      }
      case ev::Payload::storage: {
        e.storage = {};
        e.storage.storage_id = prev_storage += static_cast<uint64_t>(r.svar());
        e.storage.addr = prev_addr += static_cast<uint64_t>(r.svar());
        e.storage.nbytes = r.size();
        break;
      }
      case ev::Payload::tensor: {
        e.tensor = {};
        ev::TensorInfo& t = e.tensor;
        t.tensor_id = prev_tensor += static_cast<uint64_t>(r.svar());
        t.storage_id = prev_storage += static_cast<uint64_t>(r.svar());
        uint64_t base = r.var();
        t.base_id = base == 0 ? 0 : t.tensor_id - static_cast<uint64_t>(unzigzag(base - 1));
        DimRef ref{i, 0, 0, 0, 0};
        uint64_t n = r.var();
        if (n > 1024) r.fail("too many dimensions");
        ref.sizes_at = static_cast<uint32_t>(out.dims.size());
        ref.nsizes = static_cast<uint32_t>(n);
        for (uint64_t k = 0; k < n; ++k) out.dims.push_back(r.svar());
        n = r.var();
        if (n > 1024) r.fail("too many dimensions");
        ref.strides_at = static_cast<uint32_t>(out.dims.size());
        ref.nstrides = static_cast<uint32_t>(n);
        for (uint64_t k = 0; k < n; ++k) out.dims.push_back(r.svar());
        dim_refs.push_back(ref);
        t.storage_offset = r.svar();
        d.str_a = r.var();
        d.str_b = r.var();
        break;
      }
      case ev::Payload::category: {
        e.category = {};
        e.category.addr = prev_addr += static_cast<uint64_t>(r.svar());
        uint8_t c = r.byte();
        if (c >= ev::kNumCategories) r.fail("unknown category");
        e.category.category = static_cast<ev::Category>(c);
        break;
      }
      case ev::Payload::sync: {
        e.sync = {};
        uint8_t k = r.byte();
        if (k >= ev::kNumSyncKinds) r.fail("unknown sync kind");
        e.sync.kind = static_cast<ev::SyncKind>(k);
        e.sync.stream = r.var();
        e.sync.duration_ns = r.var();
        break;
      }
      case ev::Payload::memcpy: {
        e.memcpy = {};
        uint8_t f = r.byte();
        e.memcpy.direction = static_cast<ev::CopyDirection>(f & 3);
        e.memcpy.pinned = f & 4;
        e.memcpy.async = f & 8;
        e.memcpy.bytes = r.var();
        e.memcpy.stream = r.var();
        break;
      }
      case ev::Payload::name:
        e.name = {};
        d.str_a = r.var();
        e.name.value = r.var();
        break;
      case ev::Payload::collective: {
        e.collective = {};
        ev::CollectiveInfo& c = e.collective;
        uint8_t op = r.byte();
        if (op >= ev::kNumCollectiveOps) r.fail("unknown collective");
        c.op = static_cast<ev::CollectiveOp>(op);
        c.bytes = r.var();
        uint64_t size = r.var(), rank = r.var();
        if (size > UINT32_MAX || rank >= size) r.fail("bad collective rank");
        c.group_size = static_cast<uint32_t>(size);
        c.rank = static_cast<uint32_t>(rank);
        c.group = r.var();
        c.duration_ns = r.var();
        break;
      }
    }
    prev_seq = e.seq;
    prev_ts = e.ts_ns;
  }
  if (!r.done()) r.fail("trailing bytes");
  for (const DimRef& ref : dim_refs) {
    ev::TensorInfo& t = out.events[ref.event].event.tensor;
    t.sizes = {out.dims.data() + ref.sizes_at, ref.nsizes};
    t.strides = {out.dims.data() + ref.strides_at, ref.nstrides};
  }
}
}  // namespace

}  // namespace tidemark::store
