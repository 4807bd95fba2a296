#include "profiler/analysis/follow.h"

#include <algorithm>
#include <limits>
#include <map>
#include <span>
#include <vector>

#include "profiler/store/event_codec.h"
#include "profiler/store/event_stream.h"
#include "profiler/store/sqlite_db.h"

namespace tidemark::analysis {

namespace ev = events;
using store::detail::Stmt;

namespace {

// One change of a device's curves (an alloc, free or segment event).
struct Change {
  uint64_t ts = 0, seq = 0;
  int64_t allocated = 0, active = 0, reserved = 0;  // deltas
  bool operator<(const Change& o) const { return ts != o.ts ? ts < o.ts : seq < o.seq; }
};
// The curves after a change.
struct Point {
  uint64_t ts = 0, seq = 0;
  int64_t allocated = 0, active = 0, reserved = 0;
};

// The deltas of a memory event (docs/trace-format.md, "memory_lod"); false for other kinds.
bool memory_change(const ev::Event& e, Change& c) {
  const auto size = static_cast<int64_t>(e.block.size);
  c = Change{e.ts_ns, e.seq, 0, 0, 0};
  switch (e.kind) {
    case ev::Kind::alloc:
      c.allocated = c.active = size;
      return true;
    case ev::Kind::free_requested:
      c.allocated = -size;
      return true;
    case ev::Kind::free_completed:
      c.active = -size;
      return true;
    case ev::Kind::segment_alloc:
    case ev::Kind::segment_map:
      c.reserved = size;
      return true;
    case ev::Kind::segment_free:
    case ev::Kind::segment_unmap:
      c.reserved = -size;
      return true;
    default:
      return false;
  }
}

}  // namespace

struct LiveTrace::State {
  explicit State(const std::string& p) : path(p), db(p, store::detail::Db::Mode::follow) {}
  std::string path;
  store::detail::Db db;
  int64_t last_block = 0;
  std::map<uint64_t, std::pair<int64_t, uint32_t>> latest;  // thread -> its latest row, events read
  uint64_t start_ts = 0, first_ts = std::numeric_limits<uint64_t>::max(), last_ts = 0;
  uint64_t events = 0;
  std::vector<std::string> devices;
  std::vector<std::vector<Change>> changes;  // per device, by (ts, seq)
  std::vector<std::vector<Point>> points;    // per device, the curves after each change
  std::vector<uint64_t> allocs;              // per device, alloc events read
  std::vector<LiveTrace::Step> steps;        // by ts
  int64_t pid = 0, finalizer_pid = 0, start_unix_ns = 0;
  std::string host;
  store::DecodedBlock block;  // reused between blocks

  size_t device_index(ev::DeviceId id) {
    const std::string name = device_name(id);
    auto it = std::find(devices.begin(), devices.end(), name);
    if (it != devices.end()) return size_t(it - devices.begin());
    devices.push_back(name);
    changes.emplace_back();
    points.emplace_back();
    allocs.push_back(0);
    return devices.size() - 1;
  }
  // Merges `fresh` (any order) into a device's changes and recomputes the curves from the
  // first change that moved (a thread's block may be committed after later ones of others).
  void merge(size_t d, std::vector<Change>& fresh) {
    std::sort(fresh.begin(), fresh.end());
    std::vector<Change>& all = changes[d];
    const size_t old = all.size();
    const size_t from =
        size_t(std::upper_bound(all.begin(), all.end(), fresh.front()) - all.begin());
    all.insert(all.end(), fresh.begin(), fresh.end());
    std::inplace_merge(all.begin(), all.begin() + static_cast<ptrdiff_t>(old), all.end());
    std::vector<Point>& pts = points[d];
    pts.resize(all.size());
    Point cur = from ? pts[from - 1] : Point{};
    for (size_t i = from; i < all.size(); ++i) {
      cur.ts = all[i].ts;
      cur.seq = all[i].seq;
      cur.allocated += all[i].allocated;
      cur.active += all[i].active;
      cur.reserved += all[i].reserved;
      pts[i] = cur;
    }
  }
};

LiveTrace::LiveTrace(const std::string& path) {
  // The checks every reader makes (application id, schema version), with their messages.
  const store::TraceReader reader =
      store::TraceReader::open(path, store::TraceReader::Require::raw);
  s_ = std::make_unique<State>(path);
  s_->start_ts = reader.meta().start_ts_ns;
  s_->pid = reader.meta().pid;
  s_->finalizer_pid = reader.meta().finalizer_pid;
  s_->start_unix_ns = reader.meta().start_unix_ns;
  s_->host = reader.meta().host;
}

LiveTrace::~LiveTrace() = default;

size_t LiveTrace::poll() {
  State& s = *s_;
  std::vector<std::vector<Change>> fresh(s.devices.size());
  size_t read = 0;
  // Reads the events of the block row `q` (id, data, its header) after the `seen` ones read
  // before.
  auto consume = [&](Stmt& q, uint32_t seen) {
    const int64_t id = q.i64(0);
    const std::string what = s.path + ": event block " + std::to_string(id);
    const store::BlockHeader header = store::detail::block_header(q, 2, what);
    s.last_block = std::max(s.last_block, id);
    s.latest[header.thread] = {id, header.count};
    store::decode_block(q.blob(1), header, store::BlockForm::sealed, s.block, what);
    for (size_t i = seen; i < s.block.events.size(); ++i) {
      const store::DecodedEvent& d = s.block.events[i];
      const ev::Event& e = d.event;
      ++read;
      s.first_ts = std::min(s.first_ts, e.ts_ns);
      s.last_ts = std::max(s.last_ts, e.ts_ns);
      if (e.kind == ev::Kind::step) {
        const LiveTrace::Step step{static_cast<int64_t>(e.name.value), e.ts_ns};
        s.steps.insert(std::upper_bound(s.steps.begin(), s.steps.end(), step,
                                        [](const LiveTrace::Step& a, const LiveTrace::Step& b) {
                                          return a.ts < b.ts;
                                        }),
                       step);
        continue;
      }
      Change c;
      if (!memory_change(e, c)) continue;
      const size_t dev = s.device_index(e.device);
      if (e.kind == ev::Kind::alloc) ++s.allocs[dev];
      if (fresh.size() <= dev) fresh.resize(dev + 1);
      fresh[dev].push_back(c);
    }
  };
  // The latest row of each thread again when it grew (a block is stored at every commit and
  // grows until it is full: Note [Blocks grow across commits] in
  // profiler/store/trace_writer.cpp), then the rows added since.
  const std::string select =
      std::string("SELECT id, data, ") + store::detail::kBlockHeaderColumns + " FROM event_blocks ";
  Stmt grown(s.db, (select + "WHERE id = ? AND count > ?").c_str());
  for (auto& [thread, latest] : s.latest) {
    grown.reset();
    const uint32_t seen = latest.second;
    grown.bind(1, latest.first).bind(2, static_cast<int64_t>(seen));
    if (grown.step()) consume(grown, seen);  // updates `latest` (the same key)
  }
  Stmt added(s.db, (select + "WHERE id > ? ORDER BY id").c_str());
  added.bind(1, s.last_block);
  while (added.step()) consume(added, 0);
  for (size_t d = 0; d < fresh.size(); ++d)
    if (!fresh[d].empty()) s.merge(d, fresh[d]);
  s.events += read;
  return read;
}

const std::string& LiveTrace::path() const {
  return s_->path;
}
uint64_t LiveTrace::origin_ns() const {
  return s_->events ? s_->first_ts : s_->start_ts;
}
uint64_t LiveTrace::end_ns() const {
  return s_->events ? s_->last_ts : s_->start_ts;
}
uint64_t LiveTrace::event_count() const {
  return s_->events;
}
const std::vector<std::string>& LiveTrace::devices() const {
  return s_->devices;
}

bool LiveTrace::has_blocks(size_t device) const {
  return device < s_->allocs.size() && s_->allocs[device] > 0;
}

const std::vector<LiveTrace::Step>& LiveTrace::steps() const {
  return s_->steps;
}
int64_t LiveTrace::pid() const {
  return s_->pid;
}
int64_t LiveTrace::finalizer_pid() const {
  return s_->finalizer_pid;
}
int64_t LiveTrace::start_unix_ns() const {
  return s_->start_unix_ns;
}
const std::string& LiveTrace::host() const {
  return s_->host;
}

LiveTrace::Window LiveTrace::window(size_t device, uint64_t from_ts, uint64_t to_ts) const {
  Window w;
  if (device >= s_->points.size()) return w;
  const std::vector<Point>& pts = s_->points[device];
  // The first change after from_ts; the one before it gives the values at from_ts.
  auto it = std::upper_bound(pts.begin(), pts.end(), from_ts,
                             [](uint64_t t, const Point& p) { return t < p.ts; });
  const Point start = it == pts.begin() ? Point{} : *(it - 1);
  w.allocated_start = w.allocated_end = w.allocated_peak = start.allocated;
  w.reserved_start = w.reserved_end = w.reserved_peak = start.reserved;
  for (; it != pts.end() && it->ts < to_ts; ++it) {
    w.allocated_end = it->allocated;
    w.reserved_end = it->reserved;
    w.allocated_peak = std::max(w.allocated_peak, it->allocated);
    w.reserved_peak = std::max(w.reserved_peak, it->reserved);
  }
  return w;
}

Growth LiveTrace::step_growth(size_t device, size_t done, size_t window, bool reserved) const {
  const std::vector<Step>& steps = s_->steps;
  done = std::min(done, steps.size());
  std::vector<std::pair<int64_t, int64_t>> b;
  for (size_t i = done > window ? done - window : 0; i < done; ++i) {
    const Window w = this->window(device, steps[i].ts, steps[i].ts);
    b.emplace_back(steps[i].number, reserved ? w.reserved_start : w.allocated_start);
  }
  return fit_growth(std::move(b));
}

bool LiveTrace::finalized() const {
  Stmt q(s_->db, "SELECT value FROM meta WHERE key = 'finalized'");
  return q.step() && q.i64(0) == 1;
}

std::optional<store::Peak> LiveTrace::peak(size_t device) const {
  if (device >= s_->points.size() || s_->points[device].empty()) return std::nullopt;
  const auto& pts = s_->points[device];
  const auto it = std::max_element(pts.begin(), pts.end(), [](const Point& a, const Point& b) {
    return a.allocated < b.allocated;  // the first of equal maxima
  });
  return store::Peak{it->allocated, it->ts, it->seq};
}

Timeline LiveTrace::timeline(size_t device, const TimelineRequest& request) const {
  Timeline tl;
  tl.device_id = static_cast<int64_t>(device);
  if (device < s_->devices.size()) tl.device = s_->devices[device];
  tl.from_ts = request.from_ts.value_or(origin_ns());
  tl.to_ts = std::max(request.to_ts.value_or(end_ns() + 1), tl.from_ts + 1);
  const size_t width = std::max<size_t>(1, request.width);
  tl.column_ns = std::max<uint64_t>(1, (tl.to_ts - tl.from_ts) / width);
  for (CurveColumns* c : {&tl.allocated, &tl.active, &tl.reserved, &tl.requested}) {
    c->min.assign(width, 0);
    c->max.assign(width, 0);
    c->last.assign(width, 0);
  }
  if (device >= s_->points.size()) return tl;
  const std::vector<Point>& pts = s_->points[device];
  auto it = std::lower_bound(pts.begin(), pts.end(), tl.from_ts,
                             [](const Point& p, uint64_t t) { return p.ts < t; });
  Point cur = it == pts.begin() ? Point{} : *(it - 1);
  for (size_t col = 0; col < width; ++col) {
    const uint64_t end = col + 1 == width ? tl.to_ts : tl.from_ts + (col + 1) * tl.column_ns;
    int64_t mn[3] = {cur.allocated, cur.active, cur.reserved}, mx[3] = {mn[0], mn[1], mn[2]};
    for (; it != pts.end() && it->ts < end; ++it) {
      cur = *it;
      const int64_t v[3] = {cur.allocated, cur.active, cur.reserved};
      for (int i = 0; i < 3; ++i) {
        mn[i] = std::min(mn[i], v[i]);
        mx[i] = std::max(mx[i], v[i]);
      }
    }
    CurveColumns* curves[3] = {&tl.allocated, &tl.active, &tl.reserved};
    const int64_t last[3] = {cur.allocated, cur.active, cur.reserved};
    for (int i = 0; i < 3; ++i) {
      curves[i]->min[col] = mn[i];
      curves[i]->max[col] = mx[i];
      curves[i]->last[col] = last[i];
    }
  }
  return tl;
}

}  // namespace tidemark::analysis
