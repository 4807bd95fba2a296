// finalize(): the derived tables of a small synthetic history against hand-computed rows, the
// level-of-detail pyramid against running statistics computed here, idempotence, and a file
// whose writer was killed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "profiler/store/allocator_tables.h"
#include "profiler/store/trace_reader.h"
#include "profiler/store/trace_writer.h"
#include "zstd_sql.h"

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

// Rows of a query as text, one string per row ("a|b|NULL").
std::vector<std::string> rows(const std::string& path, const std::string& query) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  tl_test::add_zstd_functions(db);
  sqlite3_stmt* s = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, query.c_str(), -1, &s, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  std::vector<std::string> out;
  while (sqlite3_step(s) == SQLITE_ROW) {
    std::string r;
    for (int i = 0; i < sqlite3_column_count(s); ++i) {
      if (i) r += '|';
      auto* t = sqlite3_column_text(s, i);
      r += t ? reinterpret_cast<const char*>(t) : "NULL";
    }
    out.push_back(r);
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  return out;
}

constexpr uint64_t S = 0x100000;     // small segment
constexpr uint64_t S2 = 0x10000000;  // large segment
constexpr uint64_t E = 0x40000000;   // expandable segment
constexpr uint64_t MiB = 1 << 20;

struct History {
  std::vector<ev::Event> events;
  std::vector<uint64_t> stacks;
  std::vector<int64_t> dims = {10, 50, 50, 1, 50, 10, 1, 50};
  uint64_t seq = 0;

  ev::Event& add(ev::Kind k, uint64_t ts, uint64_t thread, uint64_t stack = 0) {
    ev::Event e;
    e.kind = k;
    e.seq = ++seq;
    e.ts_ns = ts;
    e.thread_id = thread;
    events.push_back(e);
    stacks.push_back(stack);
    return events.back();
  }
  void block(ev::Kind k, uint64_t ts, uint64_t thread, uint64_t addr, uint64_t size, uint64_t req,
             uint64_t seg, ev::Pool pool = ev::Pool::small, uint64_t stack = 0) {
    add(k, ts, thread, stack).block = {addr, size, req, 0, seg, pool, ev::Category::unknown};
  }
  void name(ev::Kind k, uint64_t ts, uint64_t thread, const char* n, uint64_t value = 0) {
    ev::Event& e = add(k, ts, thread);
    e.name = {};
    e.name = {n, value};
  }
};

History small_history() {
  History h;
  using K = ev::Kind;
  h.block(K::segment_alloc, 100, 1, S, 2 * MiB, 0, S);
  h.name(K::scope_push, 110, 1, "model");
  h.name(K::scope_push, 120, 1, "layer1");
  h.name(K::scope_push, 130, 2, "loader");
  h.block(K::alloc, 140, 1, S, 1024, 1000, S, ev::Pool::small, 3);
  h.block(K::alloc, 150, 2, S + 1024, 512, 512, S);
  h.add(K::category, 160, 1).category = {S, ev::Category::activation};
  h.name(K::scope_pop, 170, 1, "layer1");
  h.block(K::alloc, 180, 1, S + 1536, 2048, 2000, S);
  h.block(K::free_requested, 190, 1, S, 1024, 1000, S);
  h.block(K::free_completed, 190, 1, S, 1024, 1000, S);
  // A deferred free: another stream still used the block.
  h.block(K::free_requested, 200, 2, S + 1024, 512, 512, S);
  h.block(K::free_completed, 250, 2, S + 1024, 512, 512, S);
  h.name(K::scope_pop, 260, 1, "model");
  h.name(K::step, 270, 1, "", 1);
  h.add(K::storage_create, 280, 1).storage = {1, S + 1536, 2000};
  {
    ev::Event& t = h.add(K::tensor_create, 281, 1, 2);
    t.tensor = {};
    t.tensor.tensor_id = 10;
    t.tensor.storage_id = 1;
    t.tensor.sizes = {h.dims.data(), 2};
    t.tensor.strides = {h.dims.data() + 2, 2};
    t.tensor.dtype = "float32";
    t.tensor.op = "empty";
  }
  {
    ev::Event& t = h.add(K::tensor_create, 282, 1);
    t.tensor = {};
    t.tensor.tensor_id = 11;
    t.tensor.storage_id = 1;
    t.tensor.base_id = 10;
    t.tensor.sizes = {h.dims.data() + 4, 2};
    t.tensor.strides = {h.dims.data() + 6, 2};
    t.tensor.storage_offset = 0;
    t.tensor.dtype = "float32";
    t.tensor.op = "transpose";
  }
  {
    ev::Event& t = h.add(K::tensor_release, 290, 1);
    t.tensor = {};
    t.tensor.tensor_id = 11;
    t.tensor.storage_id = 1;
    t.tensor.base_id = 10;
  }
  h.block(K::segment_alloc, 300, 1, S2, 20 * MiB, 0, S2, ev::Pool::large);
  h.add(K::sync, 320, 1, 3).sync = {ev::SyncKind::item, 7, 15};
  h.add(K::memcpy, 330, 1).memcpy = {ev::CopyDirection::device_to_host, 4096, 7, false, true};
  h.add(K::oom, 340, 1).allocator = {30 * MiB, 0, 1 * MiB, 64 * MiB, 3584, 22 * MiB, 20 * MiB};
  h.block(K::segment_free, 350, 1, S2, 20 * MiB, 0, S2, ev::Pool::large);
  h.name(K::step, 400, 1, "", 2);
  h.name(K::mark, 410, 2, "eval");
  // Expandable segment: two maps, then an unmap across both.
  h.block(K::segment_map, 500, 1, E, 4 * MiB, 0, E, ev::Pool::large);
  h.block(K::segment_map, 510, 1, E + 4 * MiB, 2 * MiB, 0, E, ev::Pool::large);
  h.block(K::segment_unmap, 520, 1, E + 2 * MiB, 4 * MiB, 0, E, ev::Pool::large);
  return h;
}

void write(const std::string& path, const History& h, bool close = true,
           st::Journal journal = st::Journal::wal) {
  auto w = st::TraceWriter::create(path, {}, journal);
  w->add_stack_node(1, 0, 0x1000);
  w->add_stack_node(2, 1, 0x2000);
  w->add_stack_node(3, 1, 0x3000);
  for (size_t i = 0; i < h.events.size(); ++i) w->append(h.events[i], h.stacks[i]);
  if (close) w->close(h.events.back().ts_ns);
}

TEST(StoreFinalize, DerivedTablesOfASmallHistory) {
  std::string path = temp_path("finalize_small");
  History h = small_history();
  write(path, h);
  st::FinalizeOptions opt;
  opt.symbolize = [](uint64_t ip) -> std::vector<st::ResolvedFrame> {
    if (ip != 0x3000) return {};
    return {{"inlined_helper", "a.h", 12, true, "/bin/x"},
            {"caller()", "a.cpp", 40, false, "/bin/x"}};
  };
  st::finalize(path, opt);

  auto r = st::TraceReader::open(path, st::TraceReader::Require::finalized);
  int64_t dev = r.device_row_id({}).value();
  auto allocs = r.allocations(dev);
  ASSERT_EQ(allocs.size(), 3u);
  EXPECT_EQ(allocs[0].addr, S);
  EXPECT_EQ(allocs[0].size, 1024u);
  EXPECT_EQ(allocs[0].requested_size, 1000u);
  EXPECT_EQ(allocs[0].alloc_ts, 140u);
  EXPECT_EQ(allocs[0].free_requested_ts, 190u);
  EXPECT_EQ(allocs[0].free_completed_ts, 190u);
  EXPECT_EQ(allocs[0].scope, "model/layer1");
  EXPECT_EQ(allocs[0].category, ev::Category::activation);
  EXPECT_EQ(allocs[0].stack_id, 3u);
  EXPECT_EQ(allocs[0].thread, 1u);
  EXPECT_EQ(allocs[1].addr, S + 1024);
  EXPECT_EQ(allocs[1].free_requested_ts, 200u);
  EXPECT_EQ(allocs[1].free_completed_ts, 250u);  // deferred
  EXPECT_EQ(allocs[1].scope, "loader");          // thread 2's scope, not thread 1's
  EXPECT_EQ(allocs[1].category, ev::Category::unknown);
  EXPECT_EQ(allocs[2].addr, S + 1536);
  EXPECT_EQ(allocs[2].scope, "model");
  EXPECT_FALSE(allocs[2].free_requested_ts);  // live at the end
  EXPECT_FALSE(allocs[2].free_completed_ts);

  // Live at 195: A2 (alloc 150, freed 200) and A3; A1 was freed at 190.
  auto live = r.allocations_live_at(dev, 195);
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(live[0].addr, S + 1024);
  EXPECT_EQ(live[1].addr, S + 1536);

  auto peak = r.peak(dev).value();
  EXPECT_EQ(peak.bytes, 1024 + 512 + 2048);
  EXPECT_EQ(peak.ts_ns, 180u);
  EXPECT_EQ(r.peak(dev, st::Curve::reserved)->bytes, static_cast<int64_t>(22 * MiB));
  EXPECT_EQ(r.peak(dev, st::Curve::active)->bytes, 1024 + 512 + 2048);

  EXPECT_EQ(
      rows(path, "SELECT kind, addr, size, pool, alloc_ts, free_ts FROM segments ORDER BY addr"),
      (std::vector<std::string>{
          "segment|" + std::to_string(S) + "|" + std::to_string(2 * MiB) + "|small|100|NULL",
          "segment|" + std::to_string(S2) + "|" + std::to_string(20 * MiB) + "|large|300|350",
          "mapped|" + std::to_string(E) + "|" + std::to_string(2 * MiB) + "|large|500|NULL",
          "mapped|" + std::to_string(E + 2 * MiB) + "|" + std::to_string(2 * MiB) +
              "|large|500|520",
          "mapped|" + std::to_string(E + 4 * MiB) + "|" + std::to_string(2 * MiB) +
              "|large|510|520",
      }));
  EXPECT_EQ(rows(path,
                 "SELECT t.tensor_id, t.storage_id, t.base_id, t.sizes, t.strides, "
                 "t.storage_offset, d.text, o.text, t.create_ts, t.release_ts, t.stack "
                 "FROM tensors t JOIN strings d ON d.id = t.dtype JOIN strings o ON o.id = t.op "
                 "ORDER BY t.tensor_id"),
            (std::vector<std::string>{"10|1|0|[10,50]|[50,1]|0|float32|empty|281|NULL|2",
                                      "11|1|10|[50,10]|[1,50]|0|float32|transpose|282|290|0"}));
  EXPECT_EQ(rows(path, "SELECT storage_id, addr, nbytes, create_ts, release_ts FROM storages"),
            (std::vector<std::string>{"1|" + std::to_string(S + 1536) + "|2000|280|NULL"}));
  // Views of a storage: the tensors that share it.
  EXPECT_EQ(rows(path, "SELECT count(*) FROM tensors WHERE storage_id = 1"),
            (std::vector<std::string>{"2"}));
  EXPECT_EQ(rows(path,
                 "SELECT s.thread, n.text, p.text, s.depth, s.push_ts, s.pop_ts FROM scopes s "
                 "JOIN strings n ON n.id = s.name JOIN strings p ON p.id = s.path "
                 "ORDER BY s.thread, s.push_ts"),
            (std::vector<std::string>{"1|model|model|0|110|260", "1|layer1|model/layer1|1|120|170",
                                      "2|loader|loader|0|130|NULL"}));
  EXPECT_EQ(rows(path, "SELECT number, ts, end_ts FROM steps ORDER BY ts"),
            (std::vector<std::string>{"1|270|400", "2|400|NULL"}));
  EXPECT_EQ(rows(path, "SELECT ts, kind, duration_ns, stream, thread, stack FROM syncs"),
            (std::vector<std::string>{"320|item|15|7|1|3"}));
  EXPECT_EQ(rows(path, "SELECT ts, direction, bytes, stream, pinned, async FROM memcpys"),
            (std::vector<std::string>{"330|device_to_host|4096|7|0|1"}));
  EXPECT_EQ(
      rows(path, "SELECT m.ts, s.text, m.thread FROM marks m JOIN strings s ON s.id = m.name"),
      (std::vector<std::string>{"410|eval|2"}));
  EXPECT_EQ(
      rows(path,
           "SELECT ts, kind, requested_size, device_free, device_total, allocated, "
           "reserved, released FROM allocator_events"),
      (std::vector<std::string>{"340|oom|" + std::to_string(30 * MiB) + "|" + std::to_string(MiB) +
                                "|" + std::to_string(64 * MiB) + "|3584|" +
                                std::to_string(22 * MiB) + "|" + std::to_string(20 * MiB)}));
  auto frames = r.frames(0x3000);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].function, "inlined_helper");
  EXPECT_TRUE(frames[0].inlined);
  EXPECT_EQ(frames[1].function, "caller()");
  EXPECT_EQ(frames[1].line, 40);
  EXPECT_TRUE(r.frames(0x1000).empty());
  remove_trace(path);
}

// Note [Collectives] in events.h: a blocking collective is a sync of kind `collective` and a
// `collective` event; each becomes its row.
TEST(StoreFinalize, CollectivesAndTheirHostWaits) {
  History h;
  h.add(ev::Kind::sync, 1000, 1, 2).sync = {ev::SyncKind::collective, 0, 400};
  h.add(ev::Kind::collective, 1000, 1, 2).collective = {
      ev::CollectiveOp::all_reduce, 4 * MiB, 2, 1, 0, 400};
  {
    ev::Event& e = h.add(ev::Kind::collective, 1500, 1);
    e.device = {ev::DeviceType::cuda, 1};
    e.collective = {ev::CollectiveOp::all_gather, 512, 8, 7, 3, 20};
  }
  const std::string path = temp_path("collectives");
  write(path, h);
  st::finalize(path);
  EXPECT_EQ(rows(path, "SELECT ts, kind, duration_ns, stack FROM syncs"),
            (std::vector<std::string>{"1000|collective|400|2"}));
  EXPECT_EQ(rows(path,
                 "SELECT c.ts, d.name, c.op, c.bytes, c.group_size, c.rank, c.group_id, "
                 "c.duration_ns, c.thread, c.stack FROM collectives c "
                 "JOIN devices d ON d.id = c.device ORDER BY c.ts"),
            (std::vector<std::string>{"1000|cpu|all_reduce|4194304|2|1|0|400|1|2",
                                      "1500|cuda:1|all_gather|512|8|7|3|20|1|0"}));
  remove_trace(path);
}

// Running statistics after every memory event, computed here from the events alone.
struct Running {
  uint64_t ts, seq;
  int64_t allocated, active, reserved, requested;
};

std::vector<Running> running_stats(const History& h) {
  std::vector<Running> out;
  int64_t a = 0, act = 0, res = 0, req = 0;
  for (const ev::Event& e : h.events) {
    auto size = static_cast<int64_t>(e.block.size);
    auto rq = static_cast<int64_t>(e.block.requested_size);
    switch (e.kind) {
      case ev::Kind::segment_alloc:
      case ev::Kind::segment_map:
        res += size;
        break;
      case ev::Kind::segment_free:
      case ev::Kind::segment_unmap:
        res -= size;
        break;
      case ev::Kind::alloc:
        a += size;
        act += size;
        req += rq;
        break;
      case ev::Kind::free_requested:
        a -= size;
        req -= rq;
        break;
      case ev::Kind::free_completed:
        act -= size;
        break;
      default:
        continue;
    }
    out.push_back({e.ts_ns, e.seq, a, act, res, req});
  }
  return out;
}

History random_history(int n, uint64_t seed) {
  History h;
  std::mt19937_64 rng(seed);
  uint64_t ts = 1'000'000;
  h.block(ev::Kind::segment_alloc, ts, 1, S2, 64 * MiB, 0, S2, ev::Pool::large);
  std::vector<std::pair<uint64_t, uint64_t>> live, pending;
  uint64_t next_addr = S2;
  for (int i = 0; i < n; ++i) {
    // Bursts and quiet gaps, so buckets hold from one to many changes.
    ts += rng() % 8 == 0 ? 50'000 + rng() % 200'000 : rng() % 300;
    int choice = static_cast<int>(rng() % 10);
    if (choice < 5 || live.empty()) {
      uint64_t size = 512 * (1 + rng() % 64);
      h.block(ev::Kind::alloc, ts, 1 + rng() % 2, next_addr, size, size - rng() % 100, S2);
      live.push_back({next_addr, size});
      next_addr += size;
    } else if (choice < 9) {
      size_t k = rng() % live.size();
      auto [addr, size] = live[k];
      live.erase(live.begin() + static_cast<long>(k));
      h.block(ev::Kind::free_requested, ts, 1, addr, size, size, S2);
      if (rng() % 3)
        h.block(ev::Kind::free_completed, ts, 1, addr, size, size, S2);
      else
        pending.push_back({addr, size});
    } else if (!pending.empty()) {
      auto [addr, size] = pending.back();
      pending.pop_back();
      h.block(ev::Kind::free_completed, ts, 1, addr, size, size, S2);
    }
  }
  return h;
}

TEST(StoreFinalize, LodLevelZeroIsEveryChangeAndCoarserLevelsBracketIt) {
  std::string path = temp_path("finalize_lod");
  History h = random_history(20'000, 3);
  write(path, h);
  st::finalize(path);
  auto r = st::TraceReader::open(path, st::TraceReader::Require::finalized);
  int64_t dev = r.device_row_id({}).value();

  std::vector<Running> want = running_stats(h);
  std::vector<st::LodRow> level0 = r.lod(dev, 0, 0, UINT64_MAX);
  ASSERT_EQ(level0.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(level0[i].t, want[i].ts);
    EXPECT_EQ(level0[i].seq, want[i].seq);
    EXPECT_EQ(level0[i].allocated, want[i].allocated);
    EXPECT_EQ(level0[i].active, want[i].active);
    EXPECT_EQ(level0[i].reserved, want[i].reserved);
    EXPECT_EQ(level0[i].requested, want[i].requested);
    EXPECT_EQ(level0[i].allocated_min, want[i].allocated);
    EXPECT_EQ(level0[i].allocated_max, want[i].allocated);
  }

  auto levels = r.lod_levels(dev);
  ASSERT_GE(levels.size(), 3u);
  EXPECT_EQ(levels[0].level, 0);
  EXPECT_EQ(levels.back().rows, 1);  // the coarsest level is one bucket
  for (size_t li = 1; li < levels.size(); ++li) {
    const st::LodLevel& L = levels[li];
    SCOPED_TRACE("level " + std::to_string(L.level));
    if (L.rows > 1) {
      EXPECT_LE(L.rows * 4, levels[li - 1].rows);  // Note [LOD levels]
    }
    uint64_t w = 1000;
    for (int k = 0; k < L.level; ++k) w *= 4;
    EXPECT_EQ(L.width_ns, w);
    std::vector<st::LodRow> buckets = r.lod(dev, L.level, 0, UINT64_MAX);
    ASSERT_EQ(static_cast<int64_t>(buckets.size()), L.rows);
    size_t i = 0;
    int64_t total = 0;
    for (const st::LodRow& b : buckets) {
      EXPECT_EQ(b.t % w, 0u);
      EXPECT_FALSE(b.seq);
      int64_t n = 0;
      const Running* last = nullptr;
      for (; i < want.size() && want[i].ts < b.t + w; ++i, ++n) {
        ASSERT_GE(want[i].ts, b.t);
        EXPECT_LE(b.allocated_min, want[i].allocated);
        EXPECT_GE(b.allocated_max, want[i].allocated);
        EXPECT_LE(b.active_min, want[i].active);
        EXPECT_GE(b.active_max, want[i].active);
        EXPECT_LE(b.reserved_min, want[i].reserved);
        EXPECT_GE(b.reserved_max, want[i].reserved);
        EXPECT_LE(b.requested_min, want[i].requested);
        EXPECT_GE(b.requested_max, want[i].requested);
        last = &want[i];
      }
      ASSERT_NE(last, nullptr);  // no empty buckets
      EXPECT_EQ(b.n, n);
      EXPECT_EQ(b.allocated, last->allocated);
      EXPECT_EQ(b.requested, last->requested);
      total += n;
    }
    EXPECT_EQ(total, static_cast<int64_t>(want.size()));
  }
  remove_trace(path);
}

// The curve queries (each decoding the chunks it needs: Note [LOD chunks]) against a plain
// reading of the history, on a history whose clock steps back by up to 40 ns now and then
// (threads on cores whose clocks disagree), across the 40 chunks of its level 0.
TEST(StoreFinalize, CurveQueriesMatchAPlainReadingOfTheHistory) {
  std::string path = temp_path("finalize_lod_queries");
  History h = random_history(20'000, 7);
  std::mt19937_64 rng(11);
  for (ev::Event& e : h.events)
    if (rng() % 5 == 0 && e.ts_ns > 40) e.ts_ns -= rng() % 41;
  write(path, h);
  st::finalize(path);
  auto r = st::TraceReader::open(path, st::TraceReader::Require::finalized);
  const int64_t dev = r.device_row_id({}).value();
  const std::vector<Running> want = running_stats(h);
  ASSERT_GT(want.size(), 40u * 512u / 2);
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const Running& w : want) {
    lo = std::min(lo, w.ts);
    hi = std::max(hi, w.ts);
  }
  // Rows with t in [t0, t1] by t, rows of one time in seq order.
  auto window = [&](uint64_t t0, uint64_t t1) {
    std::vector<Running> out;
    for (const Running& w : want)
      if (w.ts >= t0 && w.ts <= t1) out.push_back(w);
    std::stable_sort(out.begin(), out.end(),
                     [](const Running& a, const Running& b) { return a.ts < b.ts; });
    return out;
  };
  for (int k = 0; k < 300; ++k) {
    const uint64_t t0 = lo - 100 + rng() % (hi - lo + 200);
    const uint64_t t1 = t0 + rng() % (k % 3 == 0 ? 50'000'000 : 200'000);
    SCOPED_TRACE("window " + std::to_string(t0) + " .. " + std::to_string(t1));
    const std::vector<Running> w = window(t0, t1);
    const std::vector<st::LodRow> got = r.lod(dev, 0, t0, t1);
    ASSERT_EQ(got.size(), w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      EXPECT_EQ(got[i].t, w[i].ts);
      EXPECT_EQ(got[i].seq, w[i].seq);
      EXPECT_EQ(got[i].allocated, w[i].allocated);
      EXPECT_EQ(got[i].reserved, w[i].reserved);
    }
    // The curves just before t0: the change with the greatest time below it (of equal times,
    // the last).
    const Running* before = nullptr;
    for (const Running& x : want)
      if (x.ts < t0 && (!before || x.ts >= before->ts)) before = &x;
    const std::optional<st::LodRow> b = r.lod_before(dev, 0, t0);
    ASSERT_EQ(b.has_value(), before != nullptr);
    if (before) {
      EXPECT_EQ(b->seq, before->seq);
      EXPECT_EQ(b->active, before->active);
    }
    // The first change in [t0, t1) reaching a value: the earliest by time, then seq.
    const int64_t value = want[rng() % want.size()].allocated;
    const Running* first = nullptr;
    for (const Running& x : want)
      if (x.ts >= t0 && x.ts < t1 && x.allocated >= value &&
          (!first || x.ts < first->ts || (x.ts == first->ts && x.seq < first->seq)))
        first = &x;
    const std::optional<st::Peak> f = r.first_at_least(dev, st::Curve::allocated, value, t0, t1);
    ASSERT_EQ(f.has_value(), first != nullptr) << value;
    if (first) {
      EXPECT_EQ(f->seq, first->seq);
      EXPECT_EQ(f->bytes, first->allocated);
    }
    // The change of one event.
    const Running& one = want[rng() % want.size()];
    const std::optional<st::LodRow> at = r.lod_at_seq(dev, one.seq);
    ASSERT_TRUE(at);
    EXPECT_EQ(at->t, one.ts);
    EXPECT_EQ(at->requested, one.requested);
  }
  EXPECT_FALSE(r.lod_at_seq(dev, want.back().seq + 1));
  EXPECT_EQ(r.lod_last(dev, 0)->seq, want.back().seq);
  for (st::Curve c :
       {st::Curve::allocated, st::Curve::active, st::Curve::reserved, st::Curve::requested}) {
    auto v = [c](const Running& x) {
      return c == st::Curve::allocated  ? x.allocated
             : c == st::Curve::active   ? x.active
             : c == st::Curve::reserved ? x.reserved
                                        : x.requested;
    };
    const Running* top = &want[0];
    for (const Running& x : want)
      if (v(x) > v(*top) ||
          (v(x) == v(*top) && (x.ts < top->ts || (x.ts == top->ts && x.seq < top->seq))))
        top = &x;
    const std::optional<st::Peak> p = r.peak(dev, c);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->bytes, v(*top));
    EXPECT_EQ(p->seq, top->seq);
  }
  remove_trace(path);
}

// A damaged chunk is refused naming the file, whatever part of it is wrong.
TEST(StoreFinalize, ADamagedCurveChunkIsRefusedNamingTheFile) {
  std::string path = temp_path("finalize_lod_damage");
  write(path, random_history(2'000, 9));
  st::finalize(path);
  auto damage = [&](const char* change) {
    std::string copy = path + ".damaged";
    std::filesystem::copy_file(path, copy, std::filesystem::copy_options::overwrite_existing);
    rows(copy, change);
    std::string error = "(no error)";
    try {
      auto r = st::TraceReader::open(copy, st::TraceReader::Require::finalized);
      const int64_t dev = r.device_row_id({}).value();
      for (const st::LodLevel& l : r.lod_levels(dev)) r.lod(dev, l.level, 0, UINT64_MAX);
    } catch (const st::StoreError& e) {
      error = e.what();
    }
    remove_trace(copy);
    return error;
  };
  const std::string file = path + ".damaged";
  auto starts = [](const std::string& s, const std::string& prefix) {
    return s.rfind(prefix, 0) == 0;
  };
  // The encoding damaged inside an intact frame (tests/zstd_sql.h), then the frame itself.
  std::string e = damage(
      "UPDATE memory_lod SET data = zstd(substr(unzstd(data), 1, length(unzstd(data)) - 3)) WHERE "
      "chunk = 1");
  EXPECT_TRUE(starts(e, file + ": memory_lod chunk ")) << e;
  EXPECT_NE(e.find("corrupt memory_lod chunk (truncated)"), std::string::npos) << e;
  e = damage(
      "UPDATE memory_lod SET data = zstd(unzstd(data) || x'00') WHERE chunk = 0 AND level = 0");
  EXPECT_NE(e.find("(bytes after the last row)"), std::string::npos) << e;
  e = damage("UPDATE memory_lod SET data = substr(data, 1, length(data) - 3) WHERE chunk = 1");
  EXPECT_NE(e.find("corrupt memory_lod chunk (zstd: "), std::string::npos) << e;
  e = damage("UPDATE memory_lod SET data = unzstd(data) WHERE chunk = 1");
  EXPECT_NE(e.find("corrupt memory_lod chunk (not a zstd frame)"), std::string::npos) << e;
  // A value of 2^61 in the first row of the first chunk (escape code, then zigzag(2^61)).
  e = damage(
      "UPDATE memory_lod SET data = zstd(x'0002' || x'01' || x'808080808080808040' || "
      "x'000000'), rows = 1 WHERE chunk = 0 AND level = 0");
  EXPECT_NE(e.find("beyond 2^60"), std::string::npos) << e;
  e = damage("UPDATE memory_lod SET min_t = max_t + 1 WHERE chunk = 0 AND level = 0");
  EXPECT_TRUE(starts(e, file + ": damaged: memory_lod chunk ")) << e;
  EXPECT_NE(e.find("ends before it starts"), std::string::npos) << e;
  e = damage("UPDATE memory_lod SET rows = 0 WHERE chunk = 0 AND level = 0");
  EXPECT_NE(e.find("has no rows"), std::string::npos) << e;
  e = damage("UPDATE memory_lod SET max_t = min_t WHERE chunk = 0 AND level = 0");
  EXPECT_NE(e.find("a row outside the chunk's range"), std::string::npos) << e;
  remove_trace(path);
}

// A segment's row has the thread and stack of its segment_alloc; each piece of a mapped range
// those of its segment_map, whichever thread unmapped part of it (and with what stack).
TEST(StoreFinalize, SegmentsKeepTheThreadAndStackOfTheirAllocOrMap) {
  std::string path = temp_path("finalize_segment_stacks");
  using K = ev::Kind;
  const auto L = ev::Pool::large;
  History h;
  h.block(K::segment_alloc, 100, 1, S, 2 * MiB, 0, S, ev::Pool::small, 2);
  h.block(K::segment_alloc, 110, 2, S2, 20 * MiB, 0, S2, L, 3);
  h.block(K::segment_map, 120, 2, E, 4 * MiB, 0, E, L, 1);
  h.block(K::segment_map, 130, 1, E + 4 * MiB, 2 * MiB, 0, E, L, 0);
  h.block(K::segment_unmap, 140, 1, E + 2 * MiB, 4 * MiB, 0, E, L, 3);
  h.block(K::segment_free, 150, 1, S2, 20 * MiB, 0, S2, L, 2);
  write(path, h);
  st::finalize(path);
  auto n = [](uint64_t v) { return std::to_string(v); };
  EXPECT_EQ(
      rows(path, "SELECT kind, addr, size, free_ts, thread, stack FROM segments ORDER BY addr"),
      (std::vector<std::string>{
          "segment|" + n(S) + "|" + n(2 * MiB) + "|NULL|1|2",
          "segment|" + n(S2) + "|" + n(20 * MiB) + "|150|2|3",
          "mapped|" + n(E) + "|" + n(2 * MiB) + "|NULL|2|1",
          "mapped|" + n(E + 2 * MiB) + "|" + n(2 * MiB) + "|140|2|1",
          "mapped|" + n(E + 4 * MiB) + "|" + n(2 * MiB) + "|140|1|0",
      }));
  remove_trace(path);
}

// Note [Kept frames]: finalizing again asks the symbolizer, and an address it cannot resolve
// keeps the frames stored before; one it resolves gets the new ones.
TEST(StoreFinalize, AddressesTheSymbolizerCannotResolveKeepTheirFrames) {
  std::string path = temp_path("finalize_kept_frames");
  write(path, small_history());
  st::FinalizeOptions first;
  first.symbolize = [](uint64_t ip) -> std::vector<st::ResolvedFrame> {
    if (ip == 0x1000) return {{"main", "main.cpp", 5, false, "/bin/x"}};
    if (ip == 0x3000)
      return {{"inlined_helper", "a.h", 12, true, "/bin/x"},
              {"caller()", "a.cpp", 40, false, "/bin/x"}};
    return {};
  };
  st::finalize(path, first);
  st::FinalizeOptions second;  // resolves 0x3000 differently, 0x1000 not at all
  second.symbolize = [](uint64_t ip) -> std::vector<st::ResolvedFrame> {
    if (ip == 0x3000) return {{"rebuilt()", "b.cpp", 9, false, "/bin/y"}};
    return {};
  };
  st::finalize(path, second);
  const char* q =
      "SELECT ip, depth, function, file, line, inlined, module FROM frames ORDER BY ip, depth";
  EXPECT_EQ(rows(path, q), (std::vector<std::string>{"4096|0|main|main.cpp|5|0|/bin/x",
                                                     "12288|0|rebuilt()|b.cpp|9|0|/bin/y"}));
  st::finalize(path);  // no symbolizer: everything kept
  EXPECT_EQ(rows(path, q), (std::vector<std::string>{"4096|0|main|main.cpp|5|0|/bin/x",
                                                     "12288|0|rebuilt()|b.cpp|9|0|/bin/y"}));
  remove_trace(path);
}

// Note [Rows in id order] and Note [Duplicate ids]: tensors released in any order (here the
// reverse of creation, more than the id window holds) come out one row per id with its own
// times; an id created again keeps its first record, marked never released, and is counted.
TEST(StoreFinalize, TensorRowsInAnyReleaseOrderAndDuplicateIds) {
  std::string path = temp_path("finalize_tensor_order");
  History h;
  constexpr uint64_t kTensors = 6000;
  auto tensor = [&](ev::Kind k, uint64_t ts, uint64_t id) {
    ev::Event& t = h.add(k, ts, 1);
    t.tensor = {};
    t.tensor.tensor_id = id;
    t.tensor.storage_id = id;
    t.tensor.dtype = "float32";
  };
  for (uint64_t id = 1; id <= kTensors; ++id) tensor(ev::Kind::tensor_create, 1000 + id, id);
  for (uint64_t id = kTensors; id >= 2; --id) tensor(ev::Kind::tensor_release, 100000 + id, id);
  tensor(ev::Kind::tensor_create, 200000, 1);  // id 1 again, while its first record is open
  tensor(ev::Kind::tensor_release, 200001, 1);
  write(path, h);
  st::finalize(path);
  EXPECT_EQ(rows(path, "SELECT count(*), min(tensor_id), max(tensor_id) FROM tensors"),
            (std::vector<std::string>{"6000|1|6000"}));
  EXPECT_EQ(rows(path, "SELECT count(*) FROM tensors WHERE release_ts <> 100000 + tensor_id"),
            (std::vector<std::string>{"0"}));
  EXPECT_EQ(rows(path, "SELECT create_ts, release_ts FROM tensors WHERE tensor_id = 1"),
            (std::vector<std::string>{"1001|NULL"}));
  EXPECT_EQ(rows(path, "SELECT value FROM meta WHERE key = 'duplicate_ids'"),
            (std::vector<std::string>{"1"}));
  remove_trace(path);
}

TEST(StoreFinalize, IsIdempotent) {
  std::string path = temp_path("finalize_twice");
  write(path, small_history());
  st::finalize(path);
  const char* dump[] = {"SELECT * FROM allocations ORDER BY id",
                        "SELECT device, level, chunk, min_t, max_t, first_seq, last_seq, rows, "
                        "hex(data) FROM memory_lod ORDER BY rowid",
                        "SELECT * FROM scopes ORDER BY id",
                        "SELECT * FROM segments ORDER BY id",
                        "SELECT * FROM tensors ORDER BY tensor_id",
                        "SELECT * FROM strings ORDER BY id",
                        "SELECT * FROM lod_levels"};
  std::vector<std::vector<std::string>> first;
  for (const char* q : dump) first.push_back(rows(path, q));
  st::finalize(path);
  for (size_t i = 0; i < std::size(dump); ++i) EXPECT_EQ(rows(path, dump[i]), first[i]) << dump[i];
  EXPECT_EQ(rows(path, "SELECT value FROM meta WHERE key = 'finalized'"),
            (std::vector<std::string>{"1"}));
  remove_trace(path);
}

// Note [Scope path bound]: 2,000 nested scopes, never popped, would have paths of 20 MB in
// all; each path is at most 4096 bytes, the scopes past it share "<path>/…", names and
// depths stay exact.
TEST(StoreFinalize, DeeplyNestedScopesHaveBoundedPaths) {
  std::string path = temp_path("finalize_deep_scopes");
  History h;
  std::vector<std::string> names;
  for (int i = 0; i < 2000; ++i)
    names.push_back("layer" + std::string(4 - std::to_string(i).size(), '0') + std::to_string(i));
  h.block(ev::Kind::segment_alloc, 10, 1, S, 2 * MiB, 0, S);
  for (int i = 0; i < 2000; ++i) h.name(ev::Kind::scope_push, 100 + i, 1, names[i].c_str());
  h.block(ev::Kind::alloc, 5000, 1, S, 1024, 1000, S);
  write(path, h);
  st::finalize(path);

  // "layer0000/layer0001/...": depth k's full path is 10k + 9 bytes, so depth 408 (4089
  // bytes) is the deepest whole one and every scope from depth 409 on is cut.
  std::string exact;
  for (int i = 0; i <= 408; ++i) exact += (i ? "/" : "") + names[i];
  auto got = rows(path,
                  "SELECT s.depth, n.text, p.text FROM scopes s JOIN strings n ON n.id = s.name "
                  "JOIN strings p ON p.id = s.path ORDER BY s.push_seq");
  ASSERT_EQ(got.size(), 2000u);
  EXPECT_EQ(got[408], "408|" + names[408] + "|" + exact);
  for (int i : {409, 1000, 1999})
    EXPECT_EQ(got[i], std::to_string(i) + "|" + names[i] + "|" + exact + "/…");
  EXPECT_EQ(rows(path,
                 "SELECT max(length(CAST(p.text AS BLOB))), count(DISTINCT s.path) FROM scopes s "
                 "JOIN strings p ON p.id = s.path"),
            (std::vector<std::string>{std::to_string(exact.size() + 4) + "|410"}));
  // The allocation made inside them all is in the shared path.
  EXPECT_EQ(rows(path, "SELECT p.text = '" + exact +
                           "/…' FROM allocations a JOIN strings p ON p.id = a.scope"),
            (std::vector<std::string>{"1"}));
  remove_trace(path);
}

// Note [Part files]: an import's file, written and finalized without a journal, ends as the
// same tables as a recording's and in WAL mode like it; no log is ever written beside it.
TEST(StoreFinalize, APartFileWrittenWithoutAJournalEndsAsAWalTrace) {
  const std::string wal = temp_path("finalize_wal"), part = temp_path("finalize_part");
  History h = random_history(5'000, 11);
  write(wal, h);
  st::finalize(wal);
  write(part, h, true, st::Journal::none);
  EXPECT_FALSE(std::filesystem::exists(part + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(part + "-journal"));
  EXPECT_EQ(rows(part, "PRAGMA journal_mode"), (std::vector<std::string>{"delete"}));
  st::FinalizeOptions options;
  options.journal = st::Journal::none;
  st::finalize(part, options);
  EXPECT_FALSE(std::filesystem::exists(part + "-journal"));
  EXPECT_EQ(rows(part, "PRAGMA journal_mode"), (std::vector<std::string>{"wal"}));
  for (const char* q : {"SELECT * FROM allocations ORDER BY id",
                        "SELECT device, level, chunk, min_t, max_t, first_seq, last_seq, rows, "
                        "hex(data) FROM memory_lod ORDER BY device, level, chunk",
                        "SELECT * FROM lod_levels", "SELECT * FROM segments ORDER BY id",
                        "SELECT key, value FROM meta WHERE key NOT LIKE '%unix_ns' ORDER BY key"})
    EXPECT_EQ(rows(part, q), rows(wal, q)) << q;
  auto r = st::TraceReader::open(part, st::TraceReader::Require::finalized);
  EXPECT_EQ(r.event_count(), h.events.size());
  remove_trace(wal);
  remove_trace(part);
}

TEST(StoreFinalize, AKilledWritersFileOpensAndFinalizes) {
  std::string path = temp_path("finalize_killed");
  History h = random_history(3'000, 5);
  const size_t committed = 2'000;
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child commits the first events, appends more, and dies before the next commit.
    auto w = st::TraceWriter::create(path, {});
    for (size_t i = 0; i < committed; ++i) w->append(h.events[i], 0);
    w->commit();
    for (size_t i = committed; i < h.events.size(); ++i) w->append(h.events[i], 0);
    ::kill(::getpid(), SIGKILL);
    ::_exit(3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));

  {
    auto r = st::TraceReader::open(path);
    EXPECT_FALSE(r.clean_end());
    EXPECT_FALSE(r.end_ts());
    EXPECT_EQ(r.event_count(), committed);
    size_t n = 0;
    r.for_each_event([&](const ev::Event& e, uint64_t) { EXPECT_EQ(e.seq, h.events[n++].seq); });
    EXPECT_EQ(n, committed);  // uncommitted blocks are absent, not half-written
  }
  st::finalize(path);
  auto r = st::TraceReader::open(path, st::TraceReader::Require::finalized);
  History prefix = h;
  prefix.events.resize(committed);
  auto want = running_stats(prefix);
  auto level0 = r.lod(*r.device_row_id({}), 0, 0, UINT64_MAX);
  ASSERT_EQ(level0.size(), want.size());
  EXPECT_EQ(level0.back().allocated, want.back().allocated);
  remove_trace(path);
}

TEST(StoreFinalize, AWriterDestroyedWithoutCloseKeepsItsEvents) {
  std::string path = temp_path("finalize_unclosed");
  History h = small_history();
  write(path, h, /*close=*/false);
  st::finalize(path);
  auto r = st::TraceReader::open(path, st::TraceReader::Require::finalized);
  EXPECT_FALSE(r.clean_end());
  EXPECT_EQ(r.event_count(), h.events.size());
  EXPECT_EQ(r.allocations(*r.device_row_id({})).size(), 3u);
  remove_trace(path);
}

// The store's allocation queries (allocator_tables.h) against the blocks read off the events
// here: one row per alloc, its free times found by address (the history never reuses one).
TEST(StoreFinalize, AllocationQueriesMatchAPlainReadingOfTheHistory) {
  std::string path = temp_path("finalize_alloc_queries");
  const History h = random_history(5'000, 13);
  write(path, h);
  st::finalize(path);
  auto r = st::TraceReader::open(path, st::TraceReader::Require::finalized);
  const int64_t dev = r.device_row_id({}).value();
  struct Block {
    uint64_t seq, ts, size, thread;
    std::optional<uint64_t> freed, completed;
  };
  std::vector<Block> blocks;
  std::map<uint64_t, size_t> by_addr;
  for (const ev::Event& e : h.events) {
    if (e.kind == ev::Kind::alloc) {
      by_addr[e.block.addr] = blocks.size();
      blocks.push_back({e.seq, e.ts_ns, e.block.size, e.thread_id, {}, {}});
    } else if (e.kind == ev::Kind::free_requested) {
      blocks[by_addr.at(e.block.addr)].freed = e.ts_ns;
    } else if (e.kind == ev::Kind::free_completed) {
      blocks[by_addr.at(e.block.addr)].completed = e.ts_ns;
    }
  }
  ASSERT_GT(blocks.size(), 2'000u);
  auto count_if = [&](auto pred) {
    return static_cast<uint64_t>(std::count_if(blocks.begin(), blocks.end(), pred));
  };

  EXPECT_EQ(st::allocation_count(r, {.device = dev}), blocks.size());
  EXPECT_EQ(st::allocation_count(r, {.device = dev + 1}), 0u);
  EXPECT_FALSE(st::any_allocation(r, {.categorized = true}));  // every block is unknown
  int64_t leaked_bytes = 0;
  for (const Block& b : blocks)
    if (!b.freed) leaked_bytes += static_cast<int64_t>(b.size);
  const st::RowTotals leaked = st::allocation_totals(r, {.device = dev, .never_freed = true});
  EXPECT_EQ(leaked.rows, count_if([](const Block& b) { return !b.freed; }));
  EXPECT_EQ(leaked.bytes, leaked_bytes);
  EXPECT_EQ(st::allocation_count(r, {.free_completed = true}),
            count_if([](const Block& b) { return b.completed.has_value(); }));

  std::mt19937_64 rng(5);
  const uint64_t first = blocks.front().ts, last = blocks.back().ts;
  for (int k = 0; k < 100; ++k) {
    const uint64_t t = first - 10 + rng() % (last - first + 20);
    const uint64_t t1 = t + rng() % 400'000;
    SCOPED_TRACE("t " + std::to_string(t) + ", t1 " + std::to_string(t1));
    auto live_at = [&](const Block& b) { return b.ts <= t && (!b.freed || *b.freed > t); };
    EXPECT_EQ(st::allocation_count(r, {.live_at = t}), count_if(live_at));
    std::vector<uint64_t> want, got;
    for (const Block& b : blocks)
      if (live_at(b)) want.push_back(b.seq);
    for (const st::AllocationRow& a : st::allocated_at(r, dev, t)) got.push_back(a.seq);
    EXPECT_EQ(got, want);
    EXPECT_EQ(st::allocation_count(r, {.live_in = std::pair{t, t1}}),
              count_if([&](const Block& b) { return b.ts < t1 && (!b.freed || *b.freed > t); }));
    // The first allocation after an event: the smallest alloc seq above it.
    const uint64_t after = blocks[rng() % blocks.size()].seq;
    const auto next =
        st::first_allocation(r, {.device = dev, .after_seq = after}, st::AllocationOrder::seq);
    auto it =
        std::find_if(blocks.begin(), blocks.end(), [&](const Block& b) { return b.seq > after; });
    ASSERT_EQ(next.has_value(), it != blocks.end());
    if (next) {
      EXPECT_EQ(next->seq, it->seq);
    }
  }

  // A cursor in time order gives every block once, with its times, and stays at its end.
  std::vector<Block> in_time = blocks;
  std::stable_sort(in_time.begin(), in_time.end(), [](const Block& a, const Block& b) {
    return std::pair{a.ts, a.seq} < std::pair{b.ts, b.seq};
  });
  st::AllocationCursor cursor(r, {.device = dev}, st::AllocationOrder::alloc_ts_then_seq);
  for (const Block& b : in_time) {
    const std::optional<st::AllocationSpan> a = cursor.next();
    ASSERT_TRUE(a.has_value());
    EXPECT_EQ(a->seq, b.seq);
    EXPECT_EQ(a->alloc_ts, b.ts);
    EXPECT_EQ(a->size, b.size);
    EXPECT_EQ(a->thread, b.thread);
    EXPECT_EQ(a->free_requested_ts, b.freed);
    EXPECT_EQ(a->free_completed_ts, b.completed);
  }
  EXPECT_FALSE(cursor.next().has_value());
  EXPECT_FALSE(cursor.next().has_value());
  remove_trace(path);
}

}  // namespace
