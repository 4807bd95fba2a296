#include "profiler/store/trace_reader.h"

#include <utility>

#include "profiler/store/event_stream.h"
#include "profiler/store/lod_reader.h"
#include "profiler/store/meta_keys.h"
#include "profiler/store/trace_file.h"

namespace tidemark::store {

namespace ev = events;
using detail::Db;
using detail::Stmt;

// ---- RecordedEvent ------------------------------------------------------------------------

void RecordedEvent::repoint() noexcept {
  switch (ev::payload_of(event.kind)) {
    case ev::Payload::tensor:
      event.tensor.sizes = sizes;
      event.tensor.strides = strides;
      event.tensor.dtype = dtype;
      event.tensor.op = op;
      break;
    case ev::Payload::name:
      event.name.name = name;
      break;
    default:
      break;
  }
}

RecordedEvent& RecordedEvent::operator=(const RecordedEvent& o) {
  if (this == &o) return *this;
  event = o.event;
  stack_id = o.stack_id;
  sizes = o.sizes;
  strides = o.strides;
  dtype = o.dtype;
  op = o.op;
  name = o.name;
  repoint();
  return *this;
}

RecordedEvent& RecordedEvent::operator=(RecordedEvent&& o) noexcept {
  if (this == &o) return *this;
  event = o.event;
  stack_id = o.stack_id;
  sizes = std::move(o.sizes);
  strides = std::move(o.strides);
  dtype = std::move(o.dtype);
  op = std::move(o.op);
  name = std::move(o.name);
  repoint();
  return *this;
}

// ---- TraceReader --------------------------------------------------------------------------

TraceReader TraceReader::open(const std::string& path, Require require) {
  auto need = require == Require::finalized    ? detail::Need::finalized
              : require == Require::upgradable ? detail::Need::upgradable
                                               : detail::Need::raw;
  int version = 0;
  // Read-only, on read-only media too (Note [Read-only traces]); a crashed writer's WAL is
  // still read (SQLite indexes it in the -shm file without writing the trace).
  std::unique_ptr<Db> db = detail::open_trace(path, Db::Mode::read_only, need, &version);
  return TraceReader(std::move(db), version);
}

bool is_trace_file(const std::string& path) {
  try {
    Db db(path, Db::Mode::read_only);
    return db.pragma_int("application_id") == kApplicationId;
  } catch (const StoreError&) {
    return false;
  }
}

TraceReader::TraceReader(std::unique_ptr<Db> db, int schema_version)
    : db_(std::move(db)),
      schema_version_(schema_version),
      lod_cache_(std::make_unique<LodCache>()) {}
TraceReader::~TraceReader() = default;
TraceReader::TraceReader(TraceReader&&) noexcept = default;
TraceReader& TraceReader::operator=(TraceReader&&) noexcept = default;

const std::string& TraceReader::path() const {
  return db_->path();
}

std::optional<std::string> TraceReader::meta_value(const std::string& key) const {
  Stmt s(*db_, "SELECT value FROM meta WHERE key = ?");
  s.bind(1, key);
  if (!s.step() || s.is_null(0)) return std::nullopt;
  return s.text(0);
}

ev::Category category_named(std::string_view name) {
  for (int c = 0; c < ev::kNumCategories; ++c)
    if (ev::category_name(static_cast<ev::Category>(c)) == name)
      return static_cast<ev::Category>(c);
  return ev::Category::unknown;
}

namespace {
int64_t to_i64(const std::optional<std::string>& v) {
  return v ? std::stoll(*v) : 0;
}
}  // namespace

TraceMeta TraceReader::meta() const {
  namespace k = meta_keys;
  TraceMeta m;
  m.tool_version = meta_value(k::kToolVersion).value_or("");
  m.command_line = meta_value(k::kCommandLine).value_or("");
  m.host = meta_value(k::kHost).value_or("");
  m.pid = to_i64(meta_value(k::kPid));
  m.finalizer_pid = to_i64(meta_value(k::kFinalizerPid));
  m.start_unix_ns = to_i64(meta_value(k::kStartUnixNs));
  m.start_ts_ns = static_cast<uint64_t>(to_i64(meta_value(k::kStartTsNs)));
  m.allocator_settings = meta_value(k::kAllocatorSettings).value_or("");
  m.stack_depth = static_cast<int>(to_i64(meta_value(k::kStackDepth)));
  m.synthetic_times = to_i64(meta_value(k::kSyntheticTimes)) != 0;  // absent before schema v3
  m.categories_inferred = meta_value(k::kCategoriesInferred).value_or("");
  m.private_pools = meta_value(k::kPrivatePools).value_or("");
  if (auto v = meta_value(k::kRank)) m.rank = std::stoll(*v);
  if (auto v = meta_value(k::kWorldSize)) m.world_size = std::stoll(*v);
  m.merged_ranks = meta_value(k::kMergedRanks).value_or("");
  m.estimated = meta_value(k::kEstimated).value_or("");
  if (auto v = meta_value(k::kLossCounted)) m.loss_counted = to_i64(v) != 0;
  for (DeviceRow& d : devices()) m.devices.push_back(std::move(d.info));
  return m;
}

bool TraceReader::finalized() const {
  return to_i64(meta_value(meta_keys::kFinalized)) != 0;
}
bool TraceReader::clean_end() const {
  return to_i64(meta_value(meta_keys::kCleanEnd)) != 0;
}
bool TraceReader::loss_counted() const {
  if (auto v = meta_value(meta_keys::kLossCounted)) return to_i64(v) != 0;
  return clean_end();
}
uint64_t TraceReader::event_count() const {
  return static_cast<uint64_t>(to_i64(meta_value(meta_keys::kEventCount)));
}
uint64_t TraceReader::dropped_count() const {
  return static_cast<uint64_t>(to_i64(meta_value(meta_keys::kDroppedCount)));
}
std::optional<uint64_t> TraceReader::end_ts() const {
  auto v = meta_value(meta_keys::kEndTsNs);
  if (!v) return std::nullopt;
  return static_cast<uint64_t>(std::stoll(*v));
}

std::vector<DeviceRow> TraceReader::devices() const {
  std::vector<DeviceRow> out;
  // rank and rank_idx: since version 6 (an older file opened to be upgraded has neither).
  Stmt s(*db_, schema_version_ >= 6
                   ? "SELECT id, type, idx, name, capacity, rank, rank_idx FROM devices ORDER BY id"
                   : "SELECT id, type, idx, name, capacity, NULL, NULL FROM devices ORDER BY id");
  while (s.step()) {
    DeviceRow d;
    d.id = s.i64(0);
    d.info.id.type = s.text(1) == "cuda" ? ev::DeviceType::cuda : ev::DeviceType::cpu;
    d.info.id.index = static_cast<int8_t>(s.i64(2));
    d.info.name = s.text(3);
    d.info.capacity = s.u64(4);
    if (!s.is_null(5)) {
      d.info.rank = s.i64(5);
      d.info.rank_id = {d.info.id.type, static_cast<int8_t>(s.i64(6))};
    }
    out.push_back(std::move(d));
  }
  return out;
}

std::optional<int64_t> TraceReader::device_row_id(ev::DeviceId device) const {
  for (const DeviceRow& d : devices())
    if (d.info.id == device) return d.id;
  return std::nullopt;
}

const std::vector<std::string>& TraceReader::strings() const {
  if (!strings_loaded_) {
    Stmt s(*db_, "SELECT id, text FROM strings");
    strings_.assign(1, std::string());
    while (s.step()) {
      auto id = static_cast<size_t>(s.i64(0));
      if (id >= strings_.size()) strings_.resize(id + 1);
      strings_[id] = s.text(1);
    }
    strings_loaded_ = true;
  }
  return strings_;
}

std::string TraceReader::string(uint64_t id) const {
  const auto& s = strings();
  return id < s.size() ? s[id] : std::string();
}

std::vector<ModuleInfo> TraceReader::modules() const {
  std::vector<ModuleInfo> out;
  Stmt s(*db_, "SELECT path, start, \"end\", file_offset FROM modules ORDER BY id");
  while (s.step()) out.push_back({s.text(0), s.u64(1), s.u64(2), s.u64(3)});
  return out;
}

std::vector<StackNode> TraceReader::stack_nodes() const {
  std::vector<StackNode> out;
  Stmt s(*db_, "SELECT id, parent, ip FROM stack_nodes ORDER BY id");
  while (s.step()) out.push_back({s.u64(0), s.u64(1), s.u64(2)});
  return out;
}

std::vector<uint64_t> TraceReader::stack(uint64_t stack_id) const {
  std::vector<uint64_t> ips;
  Stmt s(*db_, "SELECT parent, ip FROM stack_nodes WHERE id = ?");
  // Bounded: a corrupt tree with a cycle must not loop forever.
  for (uint64_t id = stack_id; id != 0 && ips.size() < 4096;) {
    s.bind(1, id);
    if (!s.step()) break;
    ips.push_back(s.u64(1));
    id = s.u64(0);
    s.reset();
  }
  return ips;
}

std::vector<DroppedRow> TraceReader::dropped() const {
  std::vector<DroppedRow> out;
  Stmt s(*db_, "SELECT ts, count FROM dropped ORDER BY rowid");
  while (s.step()) out.push_back({s.u64(0), s.u64(1)});
  return out;
}

TraceReader::EventCursor::EventCursor(const TraceReader& reader)
    : strings_(&reader.strings()),
      stream_(
          std::make_unique<detail::EventStream>(*reader.db_, block_form(reader.schema_version_))) {}
TraceReader::EventCursor::EventCursor(EventCursor&&) noexcept = default;
TraceReader::EventCursor& TraceReader::EventCursor::operator=(EventCursor&&) noexcept = default;
TraceReader::EventCursor::~EventCursor() = default;

bool TraceReader::EventCursor::next() {
  if (!stream_->next()) return false;
  const DecodedEvent& d = stream_->current();
  auto text = [&](uint64_t id) -> std::string_view {
    return id < strings_->size() ? std::string_view((*strings_)[id]) : std::string_view();
  };
  event_ = d.event;
  stack_id_ = d.stack_id;
  switch (ev::payload_of(event_.kind)) {
    case ev::Payload::tensor:
      event_.tensor.dtype = text(d.str_a);
      event_.tensor.op = text(d.str_b);
      break;
    case ev::Payload::name:
      event_.name.name = text(d.str_a);
      break;
    default:
      break;
  }
  return true;
}

TraceReader::EventCursor TraceReader::event_cursor() const {
  return EventCursor(*this);
}

void TraceReader::for_each_event(
    const std::function<void(const ev::Event&, uint64_t stack_id)>& fn) const {
  EventCursor cursor = event_cursor();
  while (cursor.next()) fn(cursor.event(), cursor.stack_id());
}

std::vector<RecordedEvent> TraceReader::events() const {
  std::vector<RecordedEvent> out;
  for_each_event([&](const ev::Event& e, uint64_t stack_id) {
    RecordedEvent r;
    r.event = e;
    r.stack_id = stack_id;
    switch (ev::payload_of(e.kind)) {
      case ev::Payload::tensor:
        r.sizes.assign(e.tensor.sizes.begin(), e.tensor.sizes.end());
        r.strides.assign(e.tensor.strides.begin(), e.tensor.strides.end());
        r.dtype = e.tensor.dtype;
        r.op = e.tensor.op;
        break;
      case ev::Payload::name:
        r.name = e.name.name;
        break;
      default:
        break;
    }
    r.repoint();
    out.push_back(std::move(r));
  });
  return out;
}

// ---- Derived tables -----------------------------------------------------------------------

void TraceReader::require_finalized() const {
  if (schema_version_ != kSchemaVersion) {
    throw StoreError(path() + ": trace schema version " + std::to_string(schema_version_) +
                     " has derived tables this build does not read (version " +
                     std::to_string(kSchemaVersion) + "); `tidemark finalize " + path() +
                     "` upgrades it");
  }
  if (!finalized() || !db_->table_exists("memory_lod")) {
    throw StoreError(path() +
                     ": trace is not finalized (meta finalized = 0, expected 1): finalize it "
                     "first to build the allocation, tensor and timeline tables");
  }
}

uint64_t checked_size(uint64_t bytes, const char* what, const std::string& path) {
  if (bytes > kMaxEventBytes)
    throw StoreError(path + ": damaged: " + what + " " +
                     std::to_string(static_cast<int64_t>(bytes)) +
                     " is beyond what a trace holds (2^56 bytes); `tidemark finalize " + path +
                     "` rebuilds the tables from the events");
  return bytes;
}

namespace {
constexpr const char* kAllocationColumns =
    "SELECT device, addr, size, requested_size, stream, segment, pool, alloc_ts, "
    "free_requested_ts, free_completed_ts, seq, thread, stack, scope, category FROM allocations ";

ev::Pool pool_named(const std::string& name) {
  return name == "large" ? ev::Pool::large : ev::Pool::small;
}

AllocationRow allocation_row(const Stmt& s, const TraceReader& r) {
  AllocationRow a;
  a.device = s.i64(0);
  a.addr = s.u64(1);
  a.size = checked_size(s.u64(2), "an allocation's size", r.path());
  a.requested_size = checked_size(s.u64(3), "an allocation's requested size", r.path());
  a.stream = s.u64(4);
  a.segment = s.u64(5);
  a.pool = pool_named(s.text(6));
  a.alloc_ts = s.u64(7);
  if (!s.is_null(8)) a.free_requested_ts = s.u64(8);
  if (!s.is_null(9)) a.free_completed_ts = s.u64(9);
  a.seq = s.u64(10);
  a.thread = s.u64(11);
  a.stack_id = s.u64(12);
  if (!s.is_null(13)) a.scope = r.string(s.u64(13));
  a.category = category_named(s.text(14));
  return a;
}

constexpr const char* kSegmentColumns =
    "SELECT device, kind, addr, size, segment, stream, pool, alloc_ts, free_ts, seq, thread, "
    "stack FROM segments ";

SegmentRow segment_row(const Stmt& s, const std::string& path) {
  SegmentRow r;
  r.device = s.i64(0);
  r.mapped = s.text(1) == "mapped";
  r.addr = s.u64(2);
  r.size = checked_size(s.u64(3), "a segment's size", path);
  r.segment = s.u64(4);
  r.stream = s.u64(5);
  r.pool = pool_named(s.text(6));
  r.alloc_ts = s.u64(7);
  if (!s.is_null(8)) r.free_ts = s.u64(8);
  r.seq = s.u64(9);
  r.thread = s.u64(10);
  r.stack_id = s.u64(11);
  return r;
}

// The rows `columns` + `where` selects, ?1, ?2, ... bound to `params`, decoded by `decode`.
template <class Decode>
auto rows_where(Db& db, const char* columns, const std::string& where,
                const std::vector<int64_t>& params, Decode decode) {
  std::vector<decltype(decode(std::declval<const Stmt&>()))> out;
  Stmt s(db, (std::string(columns) + where).c_str());
  for (size_t i = 0; i < params.size(); ++i) s.bind(static_cast<int>(i + 1), params[i]);
  while (s.step()) out.push_back(decode(s));
  return out;
}
}  // namespace

std::vector<AllocationRow> TraceReader::allocations_live_at(int64_t device, uint64_t ts) const {
  require_finalized();
  std::vector<AllocationRow> out;
  Stmt s(*db_, (std::string(kAllocationColumns) +
                "WHERE device = ? AND alloc_ts <= ? AND (free_requested_ts IS NULL OR "
                "free_requested_ts > ?) ORDER BY seq")
                   .c_str());
  s.bind(1, device).bind(2, detail::time_bound(ts)).bind(3, detail::time_bound(ts));
  while (s.step()) out.push_back(allocation_row(s, *this));
  return out;
}

std::vector<AllocationRow> TraceReader::allocations(int64_t device) const {
  require_finalized();
  std::vector<AllocationRow> out;
  Stmt s(*db_, (std::string(kAllocationColumns) + "WHERE device = ? ORDER BY seq").c_str());
  s.bind(1, device);
  while (s.step()) out.push_back(allocation_row(s, *this));
  return out;
}

std::vector<AllocationRow> TraceReader::allocations_where(
    const std::string& where, const std::vector<int64_t>& params) const {
  require_finalized();
  return rows_where(*db_, kAllocationColumns, where, params,
                    [this](const Stmt& s) { return allocation_row(s, *this); });
}

void TraceReader::for_each_allocation_where(
    const std::string& where, const std::vector<int64_t>& params,
    const std::function<void(const AllocationRow&)>& fn) const {
  require_finalized();
  Stmt s(*db_, (std::string(kAllocationColumns) + where).c_str());
  for (size_t i = 0; i < params.size(); ++i) s.bind(static_cast<int>(i + 1), params[i]);
  while (s.step()) fn(allocation_row(s, *this));
}

std::vector<SegmentRow> TraceReader::segments_where(const std::string& where,
                                                    const std::vector<int64_t>& params) const {
  require_finalized();
  return rows_where(*db_, kSegmentColumns, where, params,
                    [this](const Stmt& s) { return segment_row(s, path()); });
}

std::vector<LodLevel> TraceReader::lod_levels(int64_t device) const {
  require_finalized();
  std::vector<LodLevel> out;
  Stmt s(*db_, "SELECT level, width_ns, rows FROM lod_levels WHERE device = ? ORDER BY level");
  s.bind(1, device);
  while (s.step()) out.push_back({static_cast<int>(s.i64(0)), s.u64(1), s.i64(2)});
  return out;
}

std::vector<ResolvedFrame> TraceReader::frames(uint64_t ip) const {
  require_finalized();
  std::vector<ResolvedFrame> out;
  Stmt s(*db_,
         "SELECT function, file, line, inlined, module FROM frames WHERE ip = ? ORDER BY depth");
  s.bind(1, ip);
  while (s.step())
    out.push_back({s.text(0), s.text(1), static_cast<int>(s.i64(2)), s.i64(3) != 0, s.text(4)});
  return out;
}

}  // namespace tidemark::store
