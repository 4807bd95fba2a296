// The raw event store: the block codec (every kind, extreme deltas, corrupt input) and the
// writer -> reader round trip of every field, string and span, with many threads interleaved.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "profiler/store/compress.h"
#include "profiler/store/event_codec.h"
#include "profiler/store/lod.h"
#include "profiler/store/trace_reader.h"
#include "profiler/store/trace_writer.h"
#include "profiler/store/varint.h"

namespace {

namespace ev = tidemark::events;
namespace st = tidemark::store;

std::string temp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path();
  return (dir / ("tidemark_" + name + "_" + std::to_string(::getpid()) + ".db")).string();
}

void remove_trace(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

// Storage for the spans and strings the sample events point into.
const std::vector<int64_t> kSizes = {2, 3, 4};
const std::vector<int64_t> kStrides = {12, 4, 1};
const std::vector<int64_t> kOddStrides = {-1, 0, INT64_MIN, INT64_MAX};

// One event of every kind with every field set to a distinct value.
std::vector<ev::Event> every_kind(uint64_t seq0, uint64_t ts0) {
  std::vector<ev::Event> out;
  for (int k = 0; k < ev::kNumKinds; ++k) {
    ev::Event e;
    e.kind = static_cast<ev::Kind>(k);
    e.seq = seq0 + static_cast<uint64_t>(k) * 3;
    e.ts_ns = ts0 + static_cast<uint64_t>(k) * 1000;
    e.thread_id = 7;
    e.device = k % 3 == 0 ? ev::DeviceId{ev::DeviceType::cuda, 1} : ev::DeviceId{};
    switch (e.kind) {
      case ev::Kind::segment_alloc:
      case ev::Kind::segment_free:
      case ev::Kind::segment_map:
      case ev::Kind::segment_unmap:
      case ev::Kind::alloc:
      case ev::Kind::free_requested:
      case ev::Kind::free_completed:
        e.block = {0x7f0000001000ull + k * 512ull,
                   1024ull * (k + 1) + (k % 2),
                   1000ull + k,
                   static_cast<uint64_t>(k),
                   0x7f0000000000ull,
                   k % 2 ? ev::Pool::large : ev::Pool::small,
                   static_cast<ev::Category>(k % 7)};
        break;
      case ev::Kind::empty_cache:
      case ev::Kind::alloc_retry:
      case ev::Kind::oom:
        e.allocator = {1ull << 30,
                       3,
                       123456789,
                       80ull << 30,
                       5ull << 30,
                       6ull << 30,
                       static_cast<uint64_t>(k)};
        break;
      case ev::Kind::storage_create:
      case ev::Kind::storage_release:
        e.storage = {41ull + k, 0x7f0000002000ull, 4096ull + 7};
        break;
      case ev::Kind::tensor_create:
        e.tensor.tensor_id = 100;
        e.tensor.storage_id = 41;
        e.tensor.base_id = 0;
        e.tensor.sizes = kSizes;
        e.tensor.strides = kStrides;
        e.tensor.storage_offset = 5;
        e.tensor.dtype = "float32";
        e.tensor.op = "empty";
        break;
      case ev::Kind::tensor_release:
        e.tensor.tensor_id = 101;
        e.tensor.storage_id = 41;
        e.tensor.base_id = 100;
        e.tensor.sizes = kOddStrides;  // any values survive, not only shapes
        e.tensor.strides = kOddStrides;
        e.tensor.storage_offset = -3;
        e.tensor.dtype = "bfloat16";
        e.tensor.op = "transpose";
        break;
      case ev::Kind::category:
        e.category = {0x7f0000001000ull, ev::Category::optimizer_state};
        break;
      case ev::Kind::sync:
        e.sync = {ev::SyncKind::copy_to_host, 9, 777};
        break;
      case ev::Kind::memcpy:
        e.memcpy = {ev::CopyDirection::device_to_host, 1ull << 33, 4, true, true};
        break;
      case ev::Kind::scope_push:
      case ev::Kind::scope_pop:
        e.name = {"model.layer1.conv", 2};
        break;
      case ev::Kind::step:
        e.name = {"", 12};
        break;
      case ev::Kind::mark:
        e.name = {"checkpoint: loss=0.25 ünïcode", 0};
        break;
      case ev::Kind::collective:
        e.collective = {ev::CollectiveOp::reduce_scatter, 64ull << 20, 4, 3, 2, 12'345'678};
        break;
    }
    out.push_back(e);
  }
  return out;
}

void expect_same(const ev::Event& a, const ev::Event& b) {
  SCOPED_TRACE(std::string(ev::kind_name(a.kind)) + " seq " + std::to_string(a.seq));
  ASSERT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.seq, b.seq);
  EXPECT_EQ(a.ts_ns, b.ts_ns);
  EXPECT_EQ(a.thread_id, b.thread_id);
  EXPECT_TRUE(a.device == b.device);
  switch (ev::payload_of(a.kind)) {
    case ev::Payload::block:
      EXPECT_EQ(a.block.addr, b.block.addr);
      EXPECT_EQ(a.block.size, b.block.size);
      EXPECT_EQ(a.block.requested_size, b.block.requested_size);
      EXPECT_EQ(a.block.stream, b.block.stream);
      EXPECT_EQ(a.block.segment, b.block.segment);
      EXPECT_EQ(a.block.pool, b.block.pool);
      EXPECT_EQ(a.block.category, b.block.category);
      break;
    case ev::Payload::allocator:
      EXPECT_EQ(a.allocator.requested_size, b.allocator.requested_size);
      EXPECT_EQ(a.allocator.stream, b.allocator.stream);
      EXPECT_EQ(a.allocator.device_free, b.allocator.device_free);
      EXPECT_EQ(a.allocator.device_total, b.allocator.device_total);
      EXPECT_EQ(a.allocator.allocated, b.allocator.allocated);
      EXPECT_EQ(a.allocator.reserved, b.allocator.reserved);
      EXPECT_EQ(a.allocator.released, b.allocator.released);
      break;
    case ev::Payload::storage:
      EXPECT_EQ(a.storage.storage_id, b.storage.storage_id);
      EXPECT_EQ(a.storage.addr, b.storage.addr);
      EXPECT_EQ(a.storage.nbytes, b.storage.nbytes);
      break;
    case ev::Payload::tensor:
      EXPECT_EQ(a.tensor.tensor_id, b.tensor.tensor_id);
      EXPECT_EQ(a.tensor.storage_id, b.tensor.storage_id);
      EXPECT_EQ(a.tensor.base_id, b.tensor.base_id);
      EXPECT_EQ(std::vector<int64_t>(a.tensor.sizes.begin(), a.tensor.sizes.end()),
                std::vector<int64_t>(b.tensor.sizes.begin(), b.tensor.sizes.end()));
      EXPECT_EQ(std::vector<int64_t>(a.tensor.strides.begin(), a.tensor.strides.end()),
                std::vector<int64_t>(b.tensor.strides.begin(), b.tensor.strides.end()));
      EXPECT_EQ(a.tensor.storage_offset, b.tensor.storage_offset);
      EXPECT_EQ(a.tensor.dtype, b.tensor.dtype);
      EXPECT_EQ(a.tensor.op, b.tensor.op);
      break;
    case ev::Payload::category:
      EXPECT_EQ(a.category.addr, b.category.addr);
      EXPECT_EQ(a.category.category, b.category.category);
      break;
    case ev::Payload::sync:
      EXPECT_EQ(a.sync.kind, b.sync.kind);
      EXPECT_EQ(a.sync.stream, b.sync.stream);
      EXPECT_EQ(a.sync.duration_ns, b.sync.duration_ns);
      break;
    case ev::Payload::memcpy:
      EXPECT_EQ(a.memcpy.direction, b.memcpy.direction);
      EXPECT_EQ(a.memcpy.bytes, b.memcpy.bytes);
      EXPECT_EQ(a.memcpy.stream, b.memcpy.stream);
      EXPECT_EQ(a.memcpy.pinned, b.memcpy.pinned);
      EXPECT_EQ(a.memcpy.async, b.memcpy.async);
      break;
    case ev::Payload::name:
      EXPECT_EQ(a.name.name, b.name.name);
      EXPECT_EQ(a.name.value, b.name.value);
      break;
    case ev::Payload::collective:
      EXPECT_EQ(a.collective.op, b.collective.op);
      EXPECT_EQ(a.collective.bytes, b.collective.bytes);
      EXPECT_EQ(a.collective.group_size, b.collective.group_size);
      EXPECT_EQ(a.collective.rank, b.collective.rank);
      EXPECT_EQ(a.collective.group, b.collective.group);
      EXPECT_EQ(a.collective.duration_ns, b.collective.duration_ns);
      break;
  }
}

// Encodes with fake string ids and checks the decoded numeric fields.
TEST(StoreCodec, EveryKindRoundTrips) {
  auto events = every_kind(1, 1'000'000);
  st::BlockEncoder enc(7);
  for (size_t i = 0; i < events.size(); ++i) enc.add(events[i], i % 2 ? 1000 + i : 0, 5, 6);
  st::DecodedBlock block;
  st::decode_block(enc.stored(), enc.header(), st::BlockForm::sealed, block, "test");
  ASSERT_EQ(block.events.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    ev::Event want = events[i];
    const st::DecodedEvent& got = block.events[i];
    // Strings come back as ids; compare them separately.
    if (want.kind == ev::Kind::tensor_create || want.kind == ev::Kind::tensor_release) {
      want.tensor.dtype = want.tensor.op = {};
      EXPECT_EQ(got.str_a, 5u);
      EXPECT_EQ(got.str_b, 6u);
    } else if (ev::payload_of(want.kind) == ev::Payload::name) {
      want.name.name = {};
      EXPECT_EQ(got.str_a, 5u);
    }
    expect_same(want, got.event);
    EXPECT_EQ(got.stack_id, i % 2 ? 1000 + i : 0u);
  }
}

TEST(StoreCodec, ExtremeAndBackwardDeltas) {
  // Values at the edges of uint64/int64 and deltas going backwards must survive zigzag.
  std::vector<ev::Event> events;
  uint64_t vals[] = {0, 1, UINT64_MAX, 0, 1ull << 63, (1ull << 63) - 1, 12345, 2};
  for (size_t i = 0; i < std::size(vals); ++i) {
    ev::Event e;
    e.kind = ev::Kind::alloc;
    e.seq = vals[(i + 3) % std::size(vals)];
    e.ts_ns = vals[i];
    e.device = {ev::DeviceType::cuda, static_cast<int8_t>(i % 2 ? -1 : 127)};
    e.block = {vals[i],
               vals[(i + 1) % std::size(vals)],
               vals[(i + 2) % std::size(vals)],
               vals[(i + 4) % std::size(vals)],
               vals[(i + 5) % std::size(vals)],
               ev::Pool::large,
               ev::Category::temporary};
    events.push_back(e);
  }
  st::BlockEncoder enc(3);
  for (const auto& e : events) enc.add(e, UINT64_MAX - 1, 0, 0);
  st::DecodedBlock block;
  st::decode_block(enc.stored(), enc.header(), st::BlockForm::sealed, block, "test");
  ASSERT_EQ(block.events.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    events[i].thread_id = 3;
    expect_same(events[i], block.events[i].event);
    EXPECT_EQ(block.events[i].stack_id, UINT64_MAX - 1);
  }
}

TEST(StoreCodec, CorruptBlocksThrow) {
  auto events = every_kind(1, 1000);
  st::BlockEncoder enc(1);
  for (const auto& e : events) enc.add(e, 3, 1, 2);
  std::vector<uint8_t> data(enc.data().begin(), enc.data().end());
  // Damage to the encoding inside an intact frame, as a hostile file can have it (a frame of
  // schema 5 or 6, which has no checksum and no sealed row).
  auto framed = [](const std::vector<uint8_t>& raw) {
    return st::detail::compress(raw, st::detail::Checksum::none);
  };
  const st::BlockForm v6 = st::BlockForm::compressed;
  auto with_count = [&](uint32_t count) {
    st::BlockHeader h = enc.header();
    h.count = count;
    return h;
  };
  st::DecodedBlock block;
  // Truncated.
  std::vector<uint8_t> cut(data.begin(), data.end() - 3);
  EXPECT_THROW(st::decode_block(framed(cut), enc.header(), v6, block, "f.db: event block 1"),
               st::StoreError);
  // More events claimed than present, an unknown kind, trailing bytes.
  EXPECT_THROW(st::decode_block(framed(data), with_count(enc.count() + 1), v6, block, "x"),
               st::StoreError);
  std::vector<uint8_t> bad = data;
  bad[0] = 0x1f;
  try {
    st::decode_block(framed(bad), enc.header(), v6, block, "f.db: event block 1");
    ADD_FAILURE() << "no error";
  } catch (const st::StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("f.db: event block 1: corrupt event block"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(st::decode_block(framed(data), with_count(enc.count() - 1), v6, block, "x"),
               st::StoreError);
}

// Note [Sealed blocks]: a schema-7 block carries its own row inside its checksummed frame, so
// a row that was changed (its count, its seq range, its thread) no longer matches and is
// refused naming the block; a row damaged in the old forms decoded short without a word.
TEST(StoreCodec, ARowThatIsNotTheSealedOneIsRefused) {
  auto events = every_kind(1, 1000);
  st::BlockEncoder enc(1);
  for (const auto& e : events) enc.add(e, 3, 1, 2);
  const std::vector<uint8_t> stored = enc.stored();
  st::DecodedBlock block;
  st::decode_block(stored, enc.header(), st::BlockForm::sealed, block, "f.db: event block 2");
  EXPECT_EQ(block.events.size(), events.size());
  const std::vector<std::function<void(st::BlockHeader&)>> damage = {
      [](st::BlockHeader& h) { h.count -= 1; },     [](st::BlockHeader& h) { h.count /= 2; },
      [](st::BlockHeader& h) { h.thread ^= 4; },    [](st::BlockHeader& h) { h.first_seq ^= 1; },
      [](st::BlockHeader& h) { h.last_seq ^= 64; }, [](st::BlockHeader& h) { h.last_ts ^= 2; }};
  for (const auto& change : damage) {
    st::BlockHeader row = enc.header();
    change(row);
    try {
      st::decode_block(stored, row, st::BlockForm::sealed, block, "f.db: event block 2");
      ADD_FAILURE() << "a changed row was accepted";
    } catch (const st::StoreError& e) {
      EXPECT_EQ(
          std::string(e.what()).rfind("f.db: event block 2: corrupt event block (its row says", 0),
          0u)
          << e.what();
    }
  }
}

// Note [Compressed blobs]: no one-bit flip of a sealed block is read as other events: it is
// refused naming the block, or (a bit the decoder does not use, such as the descriptor's
// unused bit) reads back the very same events. Without the checksum 19 of 150 such flips in a
// real trace decoded to other valid events.
TEST(StoreCodec, NoOneBitFlipOfASealedBlockReadsAsOtherEvents) {
  auto events = every_kind(1, 1000);
  st::BlockEncoder enc(1);
  for (int round = 0; round < 20; ++round)
    for (auto e : events) {
      e.seq += static_cast<uint64_t>(round) * 1000;
      enc.add(e, 3, 1, 2);
    }
  const std::vector<uint8_t> stored = enc.stored();
  const std::vector<uint8_t> encoding(enc.data().begin(), enc.data().end());
  size_t refused = 0, flips = 0;
  for (size_t byte = 0; byte < stored.size(); ++byte)
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<uint8_t> flipped = stored;
      flipped[byte] ^= static_cast<uint8_t>(1u << bit);
      ++flips;
      std::vector<uint8_t> read;
      try {
        st::block_encoding(flipped, enc.header(), st::BlockForm::sealed, read,
                           "f.db: event block 9");
        EXPECT_EQ(read, encoding) << "byte " << byte << " bit " << bit << " read as other events";
      } catch (const st::StoreError& e) {
        ++refused;
        EXPECT_EQ(std::string(e.what()).rfind("f.db: event block 9: corrupt event block", 0), 0u)
            << e.what();
      }
    }
  // Nearly every bit of a frame matters: all but a handful of flips are refused.
  EXPECT_GT(refused, flips * 95 / 100) << refused << " of " << flips << " one-bit flips refused";
  // A frame that lost its checksum flag (the same content, compressed without) is refused too.
  std::vector<uint8_t> content(enc.data().begin(), enc.data().end());
  st::DecodedBlock block;
  try {
    st::decode_block(st::detail::compress(content, st::detail::Checksum::none), enc.header(),
                     st::BlockForm::sealed, block, "f.db: event block 9");
    ADD_FAILURE() << "a frame without its checksum was accepted";
  } catch (const st::StoreError& e) {
    EXPECT_EQ(std::string(e.what()),
              "f.db: event block 9: corrupt event block (zstd frame without its checksum)");
  }
}

// Note [Compressed blobs]: a stored block is one zstd frame stating its size; anything else is
// refused naming the block, before a byte is allocated for what a frame claims.
TEST(StoreCodec, DamagedFramesThrowNamingTheBlock) {
  auto events = every_kind(1, 1000);
  st::BlockEncoder enc(1);
  for (const auto& e : events) enc.add(e, 3, 1, 2);
  const std::vector<uint8_t> stored = enc.stored();
  EXPECT_LT(stored.size(), enc.data().size());
  auto error = [&](const std::vector<uint8_t>& blob) {
    st::DecodedBlock block;
    try {
      st::decode_block(blob, enc.header(), st::BlockForm::sealed, block, "f.db: event block 4");
    } catch (const st::StoreError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  // The encoding stored as it is (a trace of schema 4 read as 5): not a frame.
  EXPECT_EQ(error({enc.data().begin(), enc.data().end()}),
            "f.db: event block 4: corrupt event block (not a zstd frame)");
  std::vector<uint8_t> cut(stored.begin(), stored.end() - 5);
  EXPECT_NE(error(cut).find("f.db: event block 4: corrupt event block (zstd: "), std::string::npos)
      << error(cut);
  std::vector<uint8_t> longer = stored;
  longer.push_back(0);
  EXPECT_EQ(error(longer), "f.db: event block 4: corrupt event block (bytes after the zstd frame)");
  // A frame header claiming 2^40 bytes (magic, a descriptor with an 8-byte content size, the
  // size): refused for what it claims.
  std::vector<uint8_t> bomb = {0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0};
  EXPECT_NE(error(bomb).find("claims 1099511627776 bytes"), std::string::npos) << error(bomb);
  // A flipped byte inside the compressed data: an error, never a crash or a wrong block
  // silently accepted as right (the frame's size must come out exactly).
  for (size_t i = 6; i < stored.size(); i += 7) {
    std::vector<uint8_t> flipped = stored;
    flipped[i] ^= 0x5a;
    const std::string e = error(flipped);
    if (e != "(no error)") {
      EXPECT_EQ(e.rfind("f.db: event block 4: corrupt event block", 0), 0u) << e;
    }
  }
}

// A curve chunk is finalize's own encoding: a stored multiple of 512 beyond what the encoder
// writes that way (its product with 512 would overflow int64) is damage, refused by name.
TEST(StoreCodec, LodChunkWithAnOverflowingValueThrows) {
  std::vector<uint8_t> raw(64);
  uint8_t* p = raw.data();
  p = st::detail::put_varint(p, st::detail::zigzag(0));  // t
  p = st::detail::put_varint(p, st::detail::zigzag(0));  // seq
  // The first curve in the short form (an even code): 2^60 units of 512 bytes.
  p = st::detail::put_varint(p, st::detail::zigzag(int64_t{1} << 60) << 1);
  for (int c = 1; c < 4; ++c) p = st::detail::put_varint(p, 0);
  raw.resize(static_cast<size_t>(p - raw.data()));
  const std::vector<uint8_t> stored = st::detail::compress(raw);
  std::vector<st::LodRow> out;
  try {
    st::detail::decode_lod_chunk(0, stored, 1, out, "memory_lod row 7");
    FAIL() << "decoded a value whose product overflows";
  } catch (const st::StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("memory_lod row 7"), std::string::npos) << e.what();
  }

  // The largest value the short form may carry still decodes.
  raw.assign(64, 0);
  p = raw.data();
  p = st::detail::put_varint(p, 0);
  p = st::detail::put_varint(p, 0);
  p = st::detail::put_varint(p, st::detail::zigzag(1000) << 1);  // 512000 bytes
  for (int c = 1; c < 4; ++c) p = st::detail::put_varint(p, 0);
  raw.resize(static_cast<size_t>(p - raw.data()));
  out.clear();
  st::detail::decode_lod_chunk(0, st::detail::compress(raw), 1, out, "memory_lod row 8");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].allocated, 512000);
}

TEST(StoreCodec, AllocatorEventsAreCompact) {
  // Alloc/free pairs of one thread, addresses within 2 MiB segments, stack ids in the
  // thousands: well under the 32 bytes/event budget.
  std::mt19937_64 rng(1);
  st::BlockEncoder enc(1);
  uint64_t seq = 0, ts = 1'000'000'000;
  for (int i = 0; i < 4096; ++i) {
    ev::Event e;
    e.kind = i % 2 ? ev::Kind::free_requested : ev::Kind::alloc;
    e.seq = ++seq;
    e.ts_ns = ts += 100 + rng() % 2000;
    uint64_t seg = 0x7f0000000000ull + (rng() % 64) * (2ull << 20);
    e.block = {seg + (rng() % 4096) * 512, 512 * (1 + rng() % 2048), 0, 0, seg, ev::Pool::small,
               ev::Category::unknown};
    e.block.requested_size = e.block.size - rng() % 512;
    enc.add(e, 1 + rng() % 5000, 0, 0);
  }
  double per_event = static_cast<double>(enc.size_bytes()) / enc.count();
  EXPECT_LT(per_event, 20.0);
}

// ---- Writer -> reader ------------------------------------------------------------------

st::TraceMeta sample_meta() {
  st::TraceMeta m;
  m.tool_version = "9.9.9";
  m.command_line = "./train --epochs 2";
  m.host = "node17";
  m.pid = 4242;
  m.start_unix_ns = 1'700'000'000'000'000'000;
  m.start_ts_ns = 999;
  m.devices = {{{ev::DeviceType::cpu, 0}, "cpu", 64ull << 30},
               {{ev::DeviceType::cuda, 1}, "cuda:1 (NVIDIA H200)", 141ull << 30}};
  m.allocator_settings = "expandable_segments:True";
  m.stack_depth = 32;
  return m;
}

TEST(StoreRoundTrip, EveryFieldStringAndSpan) {
  std::string path = temp_path("roundtrip");
  auto events = every_kind(10, 5'000'000);
  {
    auto w = st::TraceWriter::create(path, sample_meta());
    w->add_stack_node(1, 0, 0x401000);
    w->add_stack_node(2, 1, 0x402000);
    w->add_stack_node(3, 2, 0x403000);
    w->add_modules(
        {{"/usr/bin/train", 0x400000, 0x500000, 0}, {"/lib/libc.so.6", 0x7f00, 0x8f00, 0x1000}});
    for (size_t i = 0; i < events.size(); ++i) w->append(events[i], i % 3 ? 3 : 0);
    w->add_dropped(17, 5'500'000);
    w->close(9'000'000);
  }
  auto r = st::TraceReader::open(path);
  st::TraceMeta m = r.meta();
  EXPECT_EQ(m.tool_version, "9.9.9");
  EXPECT_EQ(m.command_line, "./train --epochs 2");
  EXPECT_EQ(m.host, "node17");
  EXPECT_EQ(m.pid, 4242);
  EXPECT_EQ(m.start_unix_ns, 1'700'000'000'000'000'000);
  EXPECT_EQ(m.start_ts_ns, 999u);
  EXPECT_EQ(m.allocator_settings, "expandable_segments:True");
  EXPECT_EQ(m.stack_depth, 32);
  ASSERT_EQ(m.devices.size(), 2u);
  EXPECT_EQ(m.devices[1].name, "cuda:1 (NVIDIA H200)");
  EXPECT_EQ(m.devices[1].capacity, 141ull << 30);
  EXPECT_TRUE(m.devices[1].id == (ev::DeviceId{ev::DeviceType::cuda, 1}));
  EXPECT_TRUE(r.clean_end());
  EXPECT_FALSE(r.finalized());
  EXPECT_EQ(r.end_ts(), 9'000'000u);
  EXPECT_EQ(r.event_count(), events.size());
  EXPECT_EQ(r.dropped_count(), 17u);
  ASSERT_EQ(r.dropped().size(), 1u);
  EXPECT_EQ(r.dropped()[0].ts_ns, 5'500'000u);
  EXPECT_EQ(r.stack(3), (std::vector<uint64_t>{0x403000, 0x402000, 0x401000}));
  ASSERT_EQ(r.modules().size(), 2u);
  EXPECT_EQ(r.modules()[1].path, "/lib/libc.so.6");
  EXPECT_EQ(r.modules()[1].file_offset, 0x1000u);

  std::vector<st::RecordedEvent> got = r.events();
  ASSERT_EQ(got.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    expect_same(events[i], got[i].event);
    EXPECT_EQ(got[i].stack_id, i % 3 ? 3u : 0u);
  }
  // Copies re-point their spans and strings at their own storage.
  std::vector<st::RecordedEvent> copy = got;
  got.clear();
  for (size_t i = 0; i < events.size(); ++i) expect_same(events[i], copy[i].event);
  remove_trace(path);
}

TEST(StoreRoundTrip, ManyThreadsInterleavedComeBackInSeqOrder) {
  std::string path = temp_path("threads");
  // 8 threads, 40k events in global seq order but delivered thread by thread in batches (as
  // the recorder drains per-thread buffers), with forced block boundaries.
  constexpr int kThreads = 8, kEvents = 40'000;
  std::mt19937_64 rng(7);
  std::vector<std::vector<ev::Event>> per_thread(kThreads);
  std::vector<ev::Event> all;
  uint64_t ts = 1'000;
  for (int i = 0; i < kEvents; ++i) {
    ev::Event e;
    int t = static_cast<int>(rng() % kThreads);
    e.kind = i % 2 ? ev::Kind::alloc : ev::Kind::free_requested;
    e.seq = static_cast<uint64_t>(i);
    // Clocks of different cores may disagree a little: ts occasionally goes backwards.
    ts = ts + 50 - (rng() % 60);
    e.ts_ns = ts;
    e.thread_id = static_cast<uint64_t>(t + 1);
    e.block = {0x1000000 + (rng() % 100000) * 512,
               512 * (1 + rng() % 100),
               100,
               0,
               0x1000000,
               ev::Pool::small,
               ev::Category::unknown};
    per_thread[t].push_back(e);
    all.push_back(e);
  }
  {
    auto w = st::TraceWriter::create(path, sample_meta());
    std::vector<size_t> pos(kThreads, 0);
    bool left = true;
    int round = 0;
    while (left) {
      left = false;
      for (int t = 0; t < kThreads; ++t) {
        size_t n = std::min<size_t>(per_thread[t].size() - pos[t], 1 + rng() % 3000);
        for (size_t k = 0; k < n; ++k) w->append(per_thread[t][pos[t]++], 0);
        left |= pos[t] < per_thread[t].size();
      }
      if (++round % 3 == 0) w->commit();
    }
    w->close(ts);
  }
  auto r = st::TraceReader::open(path);
  size_t i = 0;
  r.for_each_event([&](const ev::Event& e, uint64_t) {
    ASSERT_LT(i, all.size());
    expect_same(all[i], e);
    ++i;
  });
  EXPECT_EQ(i, all.size());
  remove_trace(path);
}

// Note [Blocks grow across commits]: each commit stores a thread's block so far, and the
// block goes on growing in the same row until it is full, so a recording that commits every
// 50 ms still stores large blocks (which compress well).
TEST(StoreRoundTrip, BlocksGrowAcrossCommits) {
  std::string path = temp_path("grow");
  uint64_t seq = 0;
  auto add = [&](st::TraceWriter& w, uint64_t thread, int n) {
    for (int i = 0; i < n; ++i) {
      ev::Event e;
      e.kind = ev::Kind::mark;
      e.seq = ++seq;
      e.ts_ns = seq * 10;
      e.thread_id = thread;
      e.name = {"m", seq};
      w.append(e, 0);
    }
  };
  auto blocks = [&] {
    std::vector<std::string> out;
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db,
                       "SELECT thread, first_seq, last_seq, count FROM event_blocks ORDER BY id",
                       -1, &st, nullptr);
    while (sqlite3_step(st) == SQLITE_ROW)
      out.push_back(std::to_string(sqlite3_column_int64(st, 0)) + ":" +
                    std::to_string(sqlite3_column_int64(st, 1)) + "-" +
                    std::to_string(sqlite3_column_int64(st, 2)) + "x" +
                    std::to_string(sqlite3_column_int64(st, 3)));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
  };
  auto w = st::TraceWriter::create(path, sample_meta());
  add(*w, 1, 10);
  add(*w, 2, 5);
  w->commit();
  EXPECT_EQ(blocks(), (std::vector<std::string>{"1:1-10x10", "2:11-15x5"}));
  add(*w, 1, 7);
  w->commit();  // thread 1's row grows; thread 2's is left as it was
  EXPECT_EQ(blocks(), (std::vector<std::string>{"1:1-22x17", "2:11-15x5"}));
  w->commit();  // nothing new: nothing written
  add(*w, 2, 3);
  w->close(1000);
  EXPECT_EQ(blocks(), (std::vector<std::string>{"1:1-22x17", "2:11-25x8"}));
  std::vector<uint64_t> seqs;
  st::TraceReader::open(path).for_each_event(
      [&](const ev::Event& e, uint64_t) { seqs.push_back(e.seq); });
  EXPECT_EQ(seqs.size(), 25u);
  EXPECT_TRUE(std::is_sorted(seqs.begin(), seqs.end()));
  remove_trace(path);
}

TEST(StoreRoundTrip, OutOfOrderSeqWithinAThreadStillReadsSorted) {
  std::string path = temp_path("unordered");
  {
    auto w = st::TraceWriter::create(path, sample_meta());
    for (uint64_t seq : {5, 6, 2, 3, 9, 1, 4}) {
      ev::Event e;
      e.kind = ev::Kind::mark;
      e.seq = seq;
      e.ts_ns = seq * 10;
      e.thread_id = 1;
      e.name = {"m", seq};
      w->append(e, 0);
    }
    w->close(100);
  }
  std::vector<uint64_t> seqs;
  st::TraceReader::open(path).for_each_event([&](const ev::Event& e, uint64_t) {
    seqs.push_back(e.seq);
    EXPECT_EQ(e.name.value, e.seq);
  });
  EXPECT_EQ(seqs, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 9}));
  remove_trace(path);
}

TEST(StoreRoundTrip, WriterRefusesUseAfterClose) {
  std::string path = temp_path("closed");
  auto w = st::TraceWriter::create(path, sample_meta());
  w->close(1);
  EXPECT_THROW(w->commit(), st::StoreError);
  remove_trace(path);
}

}  // namespace
