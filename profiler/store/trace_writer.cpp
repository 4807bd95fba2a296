// TraceWriter over SQLite: one open transaction at a time, committed by commit(); events are
// encoded into per-thread blocks (event_codec.h) and written as one row per block.
//
// Note [Blocks grow across commits]
// A recording commits every 50 ms so `watch` sees it live, and every commit must store what
// each thread's block holds so far. Ending the block there made blocks of a few hundred
// events, and the busier the machine the smaller (a Fashion-MNIST epoch: 156 blocks on a quiet
// machine, 995 on a loaded one), which compress far worse (Note [Compressed blobs]). So a
// commit stores the block as it is -- its row is inserted the first time and updated, with the
// whole block compressed again, the next -- and the block ends only when it is full, when its
// thread's seq goes backwards, or at close. A reader of a live trace re-reads a thread's
// latest row when its `count` grew (LiveTrace::poll). Compressing again costs the writer
// thread about a millisecond per commit per busy thread.
#include "profiler/store/trace_writer.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <unordered_map>

#include "profiler/store/event_codec.h"
#include "profiler/store/meta_keys.h"
#include "profiler/store/schema.h"
#include "profiler/store/sqlite_db.h"

namespace tidemark::store {

namespace ev = events;
using detail::Db;
using detail::Stmt;

namespace {

// A block is written when it holds this many events or bytes (or at commit). Large blocks
// amortise the row and index overhead; the bound keeps decode memory small.
constexpr uint32_t kBlockEvents = 8192;
constexpr size_t kBlockBytes = 256 * 1024;
// How long the writer waits for a database another process holds locked (a reader that
// opened it read-write, `sqlite3`, a finalize) before it gives up. SQLite's busy handler
// retries with growing sleeps (1 ms up to 100 ms) meanwhile.
constexpr int kBusyTimeoutMs = 30000;

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

int64_t unix_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class SqliteTraceWriter final : public TraceWriter {
 public:
  SqliteTraceWriter(const std::string& path, const TraceMeta& meta, Journal journal)
      : db_(path, Db::Mode::create) {
    sqlite3_busy_timeout(db_.handle(), kBusyTimeoutMs);
    if (journal == Journal::none) {
      detail::write_without_journal(db_);
    } else {
      db_.exec("PRAGMA journal_mode = WAL");
      // NORMAL in WAL mode: a commit is durable against a killed process (the WAL is in the OS
      // cache), only a power loss can lose the last transactions.
      db_.exec("PRAGMA synchronous = NORMAL");
    }
    db_.exec(("PRAGMA application_id = " + std::to_string(kApplicationId)).c_str());
    {
      detail::Transaction tx(db_);
      db_.exec(detail::kRawSchema);
      db_.exec(("PRAGMA user_version = " + std::to_string(kSchemaVersion)).c_str());
      set_meta_ = Stmt(db_, "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)");
      namespace k = meta_keys;
      put_meta(k::kSchemaVersion, int64_t{kSchemaVersion});
      put_meta(k::kToolVersion, meta.tool_version.empty() ? TIDEMARK_VERSION : meta.tool_version);
      put_meta(k::kCommandLine, meta.command_line);
      put_meta(k::kHost, meta.host);
      put_meta(k::kPid, meta.pid);
      put_meta(k::kFinalizerPid, meta.finalizer_pid);
      put_meta(k::kStartUnixNs, meta.start_unix_ns);
      put_meta(k::kStartTsNs, static_cast<int64_t>(meta.start_ts_ns));
      put_meta(k::kAllocatorSettings, meta.allocator_settings);
      put_meta(k::kStackDepth, int64_t{meta.stack_depth});
      put_meta(k::kSyntheticTimes, int64_t{meta.synthetic_times});
      if (!meta.categories_inferred.empty())
        put_meta(k::kCategoriesInferred, meta.categories_inferred);
      if (!meta.private_pools.empty()) put_meta(k::kPrivatePools, meta.private_pools);
      if (meta.rank) put_meta(k::kRank, *meta.rank);
      if (meta.world_size) put_meta(k::kWorldSize, *meta.world_size);
      if (!meta.merged_ranks.empty()) put_meta(k::kMergedRanks, meta.merged_ranks);
      if (!meta.estimated.empty()) put_meta(k::kEstimated, meta.estimated);
      if (meta.loss_counted) put_meta(k::kLossCounted, int64_t{*meta.loss_counted});
      put_meta(k::kCleanEnd, int64_t{0});
      put_meta(k::kEventCount, int64_t{0});
      put_meta(k::kDroppedCount, int64_t{0});
      put_meta(k::kFinalized, int64_t{0});
      add_device_ = Stmt(db_,
                         "INSERT INTO devices (type, idx, name, capacity, rank, rank_idx) "
                         "VALUES (?, ?, ?, ?, ?, ?)");
      for (const DeviceInfo& d : meta.devices) add_device(d);
      tx.commit();
    }
    add_string_ = Stmt(db_, "INSERT INTO strings (id, text) VALUES (?, ?)");
    add_node_ = Stmt(db_, "INSERT OR REPLACE INTO stack_nodes (id, parent, ip) VALUES (?, ?, ?)");
    add_module_ =
        Stmt(db_, "INSERT INTO modules (path, start, \"end\", file_offset) VALUES (?, ?, ?, ?)");
    add_dropped_ = Stmt(db_, "INSERT INTO dropped (ts, count) VALUES (?, ?)");
    add_block_ = Stmt(db_,
                      "INSERT INTO event_blocks (thread, first_seq, last_seq, first_ts, last_ts, "
                      "count, data) VALUES (?, ?, ?, ?, ?, ?, ?)");
    grow_block_ = Stmt(db_,
                       "UPDATE event_blocks SET last_seq = ?, last_ts = ?, count = ?, data = ? "
                       "WHERE id = ?");
    // Deferred: the write lock is taken by the first write (every statement of the writer
    // writes, so SQLite's busy handler waits for it; no read snapshot is ever upgraded), so an
    // idle writer leaves the database to others between commits.
    db_.exec("BEGIN");
  }

  ~SqliteTraceWriter() override {
    // Not closed: keep what was appended (as a commit would) but record no clean end, so the
    // file reads like one whose process died right after its last commit.
    if (!closed_ && !abandoned_) {
      try {
        commit_blocks();
        db_.exec("COMMIT");
      } catch (...) {  // a destructor must not throw; the file holds the last commit
      }
    }
  }

  void append(const ev::Event& e, uint64_t stack_id) override {
    check_open();
    if (!(e.device == last_device_) || !have_device_) note_device(e.device);
    uint64_t a = 0, b = 0;
    switch (ev::payload_of(e.kind)) {
      case ev::Payload::tensor:
        a = intern(e.tensor.dtype);
        b = intern(e.tensor.op);
        break;
      case ev::Payload::name:
        a = intern(e.name.name);
        break;
      default:
        break;
    }
    OpenBlock& open = block_of(e.thread_id);
    BlockEncoder& enc = open.enc;
    // A block is one sorted run of seq (the reader merges runs); an event out of order starts
    // a new block.
    if (!enc.empty() && e.seq <= enc.last_seq()) end_block(open);
    enc.add(e, stack_id, a, b);
    ++event_count_;
    if (enc.count() >= kBlockEvents || enc.size_bytes() >= kBlockBytes) end_block(open);
  }

  void add_stack_node(uint64_t id, uint64_t parent, uint64_t ip) override {
    check_open();
    add_node_.bind(1, id).bind(2, parent).bind(3, ip).run();
  }

  void add_modules(const std::vector<ModuleInfo>& modules) override {
    check_open();
    for (const ModuleInfo& m : modules)
      add_module_.bind(1, m.path).bind(2, m.start).bind(3, m.end).bind(4, m.file_offset).run();
  }

  void add_dropped(uint64_t count, uint64_t ts_ns) override {
    check_open();
    add_dropped_.bind(1, ts_ns).bind(2, count).run();
    dropped_count_ += count;
  }

  void commit() override {
    check_open();
    commit_blocks();
    db_.exec("COMMIT");
    committed_events_ = event_count_;
    committed_dropped_ = dropped_count_;
    db_.exec("BEGIN");
  }

  void close(uint64_t end_ts_ns) override {
    check_open();
    commit_blocks();
    namespace k = meta_keys;
    put_meta(k::kEndTsNs, static_cast<int64_t>(end_ts_ns));
    put_meta(k::kEndUnixNs, unix_now_ns());
    put_meta(k::kCleanEnd, int64_t{1});
    db_.exec("COMMIT");
    committed_events_ = event_count_;
    committed_dropped_ = dropped_count_;
    closed_ = true;
    // Fold the WAL into the main file so a closed trace is one self-contained file.
    sqlite3_wal_checkpoint_v2(db_.handle(), nullptr, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
  }

  void abandon(uint64_t dropped, uint64_t ts_ns, const std::string& reason, bool last) override {
    if (closed_) throw StoreError(db_.path() + ": trace writer used after close()");
    if (!abandoned_) {
      abandoned_ = true;
      if (!sqlite3_get_autocommit(db_.handle())) {
        try {
          db_.exec("ROLLBACK");
        } catch (const StoreError&) {  // SQLite may have rolled it back itself
        }
      }
      blocks_.clear();  // rows written since the last commit were rolled back with it
      event_count_ = committed_events_;
      dropped_count_ = committed_dropped_;
    }
    detail::Transaction tx(db_);
    if (dropped > 0) add_dropped_.bind(1, ts_ns).bind(2, dropped).run();
    put_meta(meta_keys::kEventCount, static_cast<int64_t>(event_count_));
    put_meta(meta_keys::kDroppedCount, static_cast<int64_t>(dropped_count_ + dropped));
    put_meta(meta_keys::kWriterError, reason);
    if (last) put_meta(meta_keys::kLossCounted, int64_t{1});
    tx.commit();
    dropped_count_ += dropped;
    committed_dropped_ = dropped_count_;
  }

 private:
  void check_open() const {
    if (closed_) throw StoreError(db_.path() + ": trace writer used after close()");
    if (abandoned_) throw StoreError(db_.path() + ": trace writer used after abandon()");
  }

  void put_meta(const char* key, int64_t v) { set_meta_.bind(1, key).bind(2, v).run(); }
  void put_meta(const char* key, const std::string& v) { set_meta_.bind(1, key).bind(2, v).run(); }

  void add_device(const DeviceInfo& d) {
    for (const ev::DeviceId& known : devices_)
      if (known == d.id) return;
    add_device_.bind(1, d.id.type == ev::DeviceType::cuda ? "cuda" : "cpu")
        .bind(2, int{d.id.index})
        .bind(3, d.name)
        .bind(4, d.capacity);
    if (d.rank)
      add_device_.bind(5, *d.rank).bind(6, int64_t{d.rank_id.index});
    else
      add_device_.bind_null(5).bind_null(6);
    add_device_.run();
    devices_.push_back(d.id);
  }

  // A device not announced in the meta gets a row with its default name and unknown capacity.
  void note_device(ev::DeviceId id) {
    DeviceInfo d;
    d.id = id;
    d.name = id.type == ev::DeviceType::cuda ? "cuda:" + std::to_string(id.index) : "cpu";
    add_device(d);
    last_device_ = id;
    have_device_ = true;
  }

  uint64_t intern(std::string_view s) {
    if (s.empty()) return 0;
    auto it = strings_.find(s);
    if (it != strings_.end()) return it->second;
    uint64_t id = strings_.size() + 1;
    add_string_.bind(1, id).bind(2, s).run();
    strings_.emplace(std::string(s), id);
    return id;
  }

  // A thread's block being filled, and its row once stored (Note [Blocks grow across commits]).
  struct OpenBlock {
    explicit OpenBlock(uint64_t thread) : enc(thread) {}
    BlockEncoder enc;
    int64_t row = 0;      // event_blocks.id; 0: not stored yet
    uint32_t stored = 0;  // events the row holds
  };

  OpenBlock& block_of(uint64_t thread) {
    if (last_block_ < blocks_.size() && blocks_[last_block_].enc.thread() == thread)
      return blocks_[last_block_];
    for (size_t i = 0; i < blocks_.size(); ++i) {
      if (blocks_[i].enc.thread() == thread) {
        last_block_ = i;
        return blocks_[i];
      }
    }
    blocks_.emplace_back(thread);
    last_block_ = blocks_.size() - 1;
    return blocks_.back();
  }

  // Stores the block as it is now: a new row, or its row updated.
  void store_block(OpenBlock& b) {
    const BlockEncoder& enc = b.enc;
    if (enc.empty() || enc.count() == b.stored) return;
    if (b.row == 0) {
      add_block_.bind(1, enc.thread())
          .bind(2, enc.first_seq())
          .bind(3, enc.last_seq())
          .bind(4, enc.first_ts())
          .bind(5, enc.last_ts())
          .bind(6, int64_t{enc.count()})
          .bind_blob(7, enc.stored())
          .run();
      b.row = sqlite3_last_insert_rowid(db_.handle());
    } else {
      grow_block_.bind(1, enc.last_seq())
          .bind(2, enc.last_ts())
          .bind(3, int64_t{enc.count()})
          .bind_blob(4, enc.stored())
          .bind(5, b.row)
          .run();
    }
    b.stored = enc.count();
  }

  void end_block(OpenBlock& b) {
    store_block(b);
    b.enc.clear();
    b.row = 0;
    b.stored = 0;
  }

  void commit_blocks() {
    for (OpenBlock& b : blocks_) store_block(b);
    put_meta(meta_keys::kEventCount, static_cast<int64_t>(event_count_));
    put_meta(meta_keys::kDroppedCount, static_cast<int64_t>(dropped_count_));
  }

  Db db_;
  Stmt set_meta_, add_device_, add_string_, add_node_, add_module_, add_dropped_, add_block_,
      grow_block_;
  std::vector<ev::DeviceId> devices_;
  ev::DeviceId last_device_;
  bool have_device_ = false;
  std::unordered_map<std::string, uint64_t, StringHash, std::equal_to<>> strings_;
  std::vector<OpenBlock> blocks_;
  size_t last_block_ = 0;
  uint64_t event_count_ = 0;
  uint64_t dropped_count_ = 0;
  uint64_t committed_events_ = 0, committed_dropped_ = 0;  // as of the last commit
  bool closed_ = false;
  bool abandoned_ = false;
};

}  // namespace

namespace {
void remove_file(const std::string& p) {
  if (::unlink(p.c_str()) != 0 && errno != ENOENT)
    throw StoreError(p + ": cannot remove the previous file: " + std::strerror(errno));
}
}  // namespace

void TraceWriter::abandon(uint64_t, uint64_t, const std::string& reason, bool) {
  throw StoreError("this trace writer cannot record that it stopped (" + reason + ")");
}

void remove_trace_sidecars(const std::string& path) {
  for (const char* suffix : {"-wal", "-shm", "-journal"}) remove_file(path + suffix);
}

// Note [Part files]
// A recording is written in WAL mode so that a killed process keeps every committed event and
// readers can follow it live. An import (and any writer whose file is a part file, renamed
// into place only once finalized) needs neither: until the rename no one reads the file, and a
// failure removes it. It is written with no journal at all: SQLite's WAL would take every page
// twice (into the log, then the checkpoint into the file), a third of a 1 GB import's writes
// and the stalls of the disk's writeback behind them. Finalize then turns the finished file to
// WAL mode (persistent, in its header), so it is the same file a recording would be.
std::unique_ptr<TraceWriter> TraceWriter::create(const std::string& path, const TraceMeta& meta,
                                                 Journal journal) {
  // Truncate: a previous trace (and its WAL) at this path is replaced.
  remove_file(path);
  remove_trace_sidecars(path);
  try {
    return std::make_unique<SqliteTraceWriter>(path, meta, journal);
  } catch (...) {
    // What is there now is this writer's, half made (no room for the schema, say): a file no
    // reader could open is not left behind.
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"})
      std::filesystem::remove(path + suffix, ec);
    throw;
  }
}

}  // namespace tidemark::store
