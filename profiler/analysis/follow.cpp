#include "profiler/analysis/follow.h"

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include "profiler/store/event_tail.h"
#include "profiler/store/trace_reader.h"

namespace tidemark::analysis {

namespace ev = events;

namespace {

// The change of a device's curves an event makes (Note [Memory curves] in
// profiler/events/events.h), kept until it is merged in (ts, seq) order.
struct Delta {
  uint64_t ts = 0, seq = 0;
  ev::Curves by;
  bool operator<(const Delta& o) const { return ts != o.ts ? ts < o.ts : seq < o.seq; }
};
using Point = LiveTrace::Change;

}  // namespace

struct LiveTrace::State {
  explicit State(const std::string& p) : path(p), tail(p) {}
  std::string path;
  store::EventTail tail;
  uint64_t start_ts = 0, first_ts = std::numeric_limits<uint64_t>::max(), last_ts = 0;
  uint64_t events = 0;
  std::vector<std::string> devices;
  std::vector<std::vector<Delta>> changes;  // per device, by (ts, seq)
  std::vector<std::vector<Point>> points;   // per device, the curves after each change
  std::vector<uint64_t> allocs;             // per device, alloc events read
  std::vector<LiveTrace::Step> steps;       // by ts
  int64_t pid = 0, finalizer_pid = 0, start_unix_ns = 0;
  std::string host;

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
  void merge(size_t d, std::vector<Delta>& fresh) {
    std::sort(fresh.begin(), fresh.end());
    std::vector<Delta>& all = changes[d];
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
      cur.after += all[i].by;
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
  std::vector<std::vector<Delta>> fresh(s.devices.size());
  const size_t read = s.tail.poll([&](const store::DecodedEvent& d) {
    const ev::Event& e = d.event;
    s.first_ts = std::min(s.first_ts, e.ts_ns);
    s.last_ts = std::max(s.last_ts, e.ts_ns);
    if (e.kind == ev::Kind::step) {
      const LiveTrace::Step step{static_cast<int64_t>(e.name.value), e.ts_ns};
      s.steps.insert(std::upper_bound(s.steps.begin(), s.steps.end(), step,
                                      [](const LiveTrace::Step& a, const LiveTrace::Step& b) {
                                        return a.ts < b.ts;
                                      }),
                     step);
      return;
    }
    if (ev::payload_of(e.kind) != ev::Payload::block) return;
    const size_t dev = s.device_index(e.device);
    if (e.kind == ev::Kind::alloc) ++s.allocs[dev];
    if (fresh.size() <= dev) fresh.resize(dev + 1);
    fresh[dev].push_back({e.ts_ns, e.seq, ev::curve_delta(e)});
  });
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

const std::vector<LiveTrace::Change>& LiveTrace::changes(size_t device) const {
  static const std::vector<Change> none;
  return device < s_->points.size() ? s_->points[device] : none;
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
  w.allocated_start = w.allocated_end = w.allocated_peak = start.after.allocated;
  w.reserved_start = w.reserved_end = w.reserved_peak = start.after.reserved;
  for (; it != pts.end() && it->ts < to_ts; ++it) {
    w.allocated_end = it->after.allocated;
    w.reserved_end = it->after.reserved;
    w.allocated_peak = std::max(w.allocated_peak, it->after.allocated);
    w.reserved_peak = std::max(w.reserved_peak, it->after.reserved);
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
  return s_->tail.finalized();
}

std::optional<store::Peak> LiveTrace::peak(size_t device) const {
  if (device >= s_->points.size() || s_->points[device].empty()) return std::nullopt;
  const auto& pts = s_->points[device];
  const auto it = std::max_element(pts.begin(), pts.end(), [](const Point& a, const Point& b) {
    return a.after.allocated < b.after.allocated;  // the first of equal maxima
  });
  return store::Peak{it->after.allocated, it->ts, it->seq};
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
  constexpr size_t kCurves = 4;
  CurveColumns* curves[kCurves] = {&tl.allocated, &tl.active, &tl.reserved, &tl.requested};
  auto values = [](const Point& p) {
    return std::array<int64_t, kCurves>{p.after.allocated, p.after.active, p.after.reserved,
                                        p.after.requested};
  };
  for (size_t col = 0; col < width; ++col) {
    const uint64_t end = col + 1 == width ? tl.to_ts : tl.from_ts + (col + 1) * tl.column_ns;
    std::array<int64_t, kCurves> mn = values(cur), mx = mn;
    for (; it != pts.end() && it->ts < end; ++it) {
      cur = *it;
      const std::array<int64_t, kCurves> v = values(cur);
      for (size_t i = 0; i < kCurves; ++i) {
        mn[i] = std::min(mn[i], v[i]);
        mx[i] = std::max(mx[i], v[i]);
      }
    }
    const std::array<int64_t, kCurves> last = values(cur);
    for (size_t i = 0; i < kCurves; ++i) {
      curves[i]->min[col] = mn[i];
      curves[i]->max[col] = mx[i];
      curves[i]->last[col] = last[i];
    }
  }
  return tl;
}

}  // namespace tidemark::analysis
