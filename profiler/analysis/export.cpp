// Chrome Trace Event Format and CSV exports (docs/export.md). Both stream rows straight from
// the derived tables (docs/trace-format.md) to the output through a small buffer, so a trace
// of any size exports in constant memory (the CSV keeps one site string per distinct stack).
#include "profiler/analysis/export.h"
#include "profiler/analysis/trace.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "profiler/analysis/output_file.h"
#include "profiler/store/meta_keys.h"
#include "profiler/store/sqlite_db.h"

namespace tidemark::analysis {

namespace {

using store::detail::Db;
using store::detail::Stmt;

constexpr size_t kFlushBytes = 1 << 16;

// Exported times are relative to the trace's origin (Trace::origin_ns), so they match the
// CLI's; slices still open at the end stop at the later of the last event and the recording's
// end.
struct TimeFrame {
  uint64_t origin = 0;
  uint64_t end = 0;
};

TimeFrame time_frame(const Trace& trace) {
  TimeFrame f{trace.origin_ns(), trace.end_ns()};
  if (auto end = trace.meta_int(store::meta_keys::kEndTsNs);
      end && static_cast<uint64_t>(*end) > f.end)
    f.end = static_cast<uint64_t>(*end);
  return f;
}

// "cpu", "cuda:0": the short names counters and CSV rows use, by devices.id.
std::map<int64_t, std::string> device_names(const Trace& trace) {
  std::map<int64_t, std::string> names;
  for (const DeviceRef& d : trace.devices()) names[d.id] = d.name;
  return names;
}

std::string device_name(const std::map<int64_t, std::string>& names, int64_t id) {
  auto it = names.find(id);
  return it != names.end() ? it->second : "device " + std::to_string(id);
}

// A write buffer over the caller's stream; a failed write throws, naming the trace.
class Writer {
 public:
  Writer(std::ostream& os, const std::string& trace_path) : os_(os), trace_path_(trace_path) {
    buf_.reserve(kFlushBytes + 4096);
  }

  Writer& raw(std::string_view s) {
    buf_.append(s);
    if (buf_.size() >= kFlushBytes) flush();
    return *this;
  }
  Writer& i64(int64_t v) {
    char b[24];
    auto r = std::to_chars(b, b + sizeof b, v);
    return raw(std::string_view(b, static_cast<size_t>(r.ptr - b)));
  }
  Writer& u64(uint64_t v) {
    char b[24];
    auto r = std::to_chars(b, b + sizeof b, v);
    return raw(std::string_view(b, static_cast<size_t>(r.ptr - b)));
  }
  // Nanoseconds as microseconds with three exact decimals ("12.345", "7").
  Writer& micros(int64_t ns) {
    if (ns < 0) {
      raw("-");
      // Two's complement: -INT64_MIN does not fit, its magnitude does.
      return micros_abs(0 - static_cast<uint64_t>(ns));
    }
    return micros_abs(static_cast<uint64_t>(ns));
  }
  Writer& json_string(std::string_view s) {
    // Names are user text: replace invalid UTF-8 rather than fail the export.
    return raw(nlohmann::json(std::string(s))
                   .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  // An RFC 4180 field: quoted only when it holds a separator, a quote or a line break.
  Writer& csv_field(std::string_view s) {
    if (s.find_first_of(",\"\r\n") == std::string_view::npos) return raw(s);
    std::string q = "\"";
    for (char c : s) {
      if (c == '"') q += '"';
      q += c;
    }
    q += '"';
    return raw(q);
  }
  Writer& hex(uint64_t v) {
    char b[24] = {'0', 'x'};
    auto r = std::to_chars(b + 2, b + sizeof b, v, 16);
    return raw(std::string_view(b, static_cast<size_t>(r.ptr - b)));
  }

  void flush() {
    os_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
    if (!os_) throw std::runtime_error(trace_path_ + ": export: writing the output failed");
  }

 private:
  Writer& micros_abs(uint64_t ns) {
    u64(ns / 1000);
    uint64_t frac = ns % 1000;
    if (frac == 0) return *this;
    char b[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                 static_cast<char>('0' + frac % 10)};
    return raw(std::string_view(b, 4));
  }

  std::ostream& os_;
  const std::string& trace_path_;
  std::string buf_;
};

// ---- Chrome Trace Event Format ------------------------------------------------------------
//
// One process (the recorded one, by its pid) holds every track:
// * counters "<device> allocated|active|reserved" with the value in args.bytes;
// * per thread ("thread N", N the event contract's thread id): scope slices ("X", properly
//   nested as finalize closes inner scopes with their outer one), and instants for syncs,
//   marks and memcpys;
// * a "steps" pseudo-thread (an id above every real one) with one slice per step;
// * process-wide instants for the allocator's decisions (empty_cache, alloc_retry, oom).

class ChromeWriter {
 public:
  ChromeWriter(Writer& w, int64_t pid, const TimeFrame& tf) : w_(w), pid_(pid), tf_(tf) {}

  // Opens an event object up to its "args" (exclusive): the caller writes the rest.
  void begin(char ph, std::string_view name, std::string_view cat, uint64_t tid,
             std::optional<uint64_t> ts) {
    w_.raw(first_ ? "\n" : ",\n");
    first_ = false;
    w_.raw("{\"ph\":\"").raw(std::string_view(&ph, 1)).raw("\",\"name\":").json_string(name);
    if (!cat.empty()) w_.raw(",\"cat\":").json_string(cat);
    w_.raw(",\"pid\":").i64(pid_).raw(",\"tid\":").u64(tid);
    if (ts) w_.raw(",\"ts\":").micros(rel(*ts));
  }
  void end() { w_.raw("}"); }

  void metadata(std::string_view what, uint64_t tid, std::string_view key, std::string_view name) {
    begin('M', what, "", tid, std::nullopt);
    w_.raw(",\"args\":{").json_string(key).raw(":").json_string(name).raw("}");
    end();
  }
  void sort_index(uint64_t tid, int64_t index) {
    begin('M', "thread_sort_index", "", tid, std::nullopt);
    w_.raw(",\"args\":{\"sort_index\":").i64(index).raw("}");
    end();
  }
  void counter(std::string_view name, uint64_t ts, int64_t bytes) {
    begin('C', name, "memory", 0, ts);
    w_.raw(",\"args\":{\"bytes\":").i64(bytes).raw("}");
    end();
  }
  // A complete slice; the caller writes ",\"args\":{...}" and calls end().
  void slice(std::string_view name, std::string_view cat, uint64_t tid, uint64_t ts,
             uint64_t end_ts) {
    begin('X', name, cat, tid, ts);
    w_.raw(",\"dur\":").micros(end_ts >= ts ? static_cast<int64_t>(end_ts - ts) : 0);
  }
  // An instant with scope "t" (thread) or "p" (process).
  void instant(std::string_view name, std::string_view cat, uint64_t tid, uint64_t ts, char scope) {
    begin('i', name, cat, tid, ts);
    w_.raw(",\"s\":\"").raw(std::string_view(&scope, 1)).raw("\"");
  }

  int64_t rel(uint64_t ts) const {
    return static_cast<int64_t>(ts - tf_.origin);  // wrapping: a few ns before origin is negative
  }
  Writer& w() { return w_; }

 private:
  Writer& w_;
  int64_t pid_;
  const TimeFrame& tf_;
  bool first_ = true;
};

std::string program_name(const std::string& command_line) {
  std::string first = command_line.substr(0, command_line.find(' '));
  size_t slash = first.rfind('/');
  if (slash != std::string::npos) first = first.substr(slash + 1);
  return first.empty() ? "recorded process" : first;
}

void chrome_counters(const store::TraceReader& reader, ChromeWriter& cw,
                     const std::map<int64_t, std::string>& devices) {
  // Level 0 holds the value after every memory event, in seq order (streamed, never held
  // whole). Several changes at one time collapse to the value after the last of them, so each
  // track has one sample per time, and a curve gets a sample only when its value changed. A
  // change whose time steps back (cores whose clocks disagree by a few ns) counts at the time
  // already reached, so the samples stay in time order.
  for (const auto& [id, dev] : devices) {
    const std::string names[3] = {dev + " allocated", dev + " active", dev + " reserved"};
    std::optional<int64_t> emitted[3];
    std::optional<uint64_t> t;
    int64_t value[3] = {0, 0, 0};
    auto emit = [&] {
      for (int c = 0; c < 3; ++c) {
        if (emitted[c] == value[c]) continue;
        cw.counter(names[c], *t, value[c]);
        emitted[c] = value[c];
      }
    };
    reader.for_each_lod(id, 0, 0, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                        [&](const store::LodRow& r) {
                          if (t && r.t > *t) emit();
                          t = std::max(t.value_or(r.t), r.t);
                          value[0] = r.allocated;
                          value[1] = r.active;
                          value[2] = r.reserved;
                          return true;
                        });
    if (t) emit();
  }
}

void chrome_scopes(Db& db, ChromeWriter& cw, const TimeFrame& tf) {
  Stmt s(db,
         "SELECT s.thread, n.text, p.text, s.depth, s.value, s.push_ts, s.pop_ts FROM scopes s "
         "LEFT JOIN strings n ON n.id = s.name LEFT JOIN strings p ON p.id = s.path "
         "ORDER BY s.thread, s.push_ts, s.push_seq");
  while (s.step()) {
    std::string name = s.is_null(1) ? "" : s.text(1);
    uint64_t push = s.u64(5);
    bool open = s.is_null(6);
    uint64_t pop = open ? std::max(tf.end, push) : s.u64(6);
    cw.slice(name.empty() ? "(unnamed scope)" : name, "scope", s.u64(0), push, pop);
    cw.w().raw(",\"args\":{\"path\":").json_string(s.is_null(2) ? "" : s.text(2));
    cw.w().raw(",\"depth\":").i64(s.i64(3));
    if (s.i64(4) != 0) cw.w().raw(",\"value\":").i64(s.i64(4));
    if (open) cw.w().raw(",\"open_at_end\":true");
    cw.w().raw("}");
    cw.end();
  }
}

void chrome_steps(Db& db, ChromeWriter& cw, const TimeFrame& tf, uint64_t steps_tid) {
  Stmt s(db,
         "SELECT st.number, st.ts, st.end_ts, st.thread, n.text FROM steps st "
         "LEFT JOIN strings n ON n.id = st.name ORDER BY st.ts, st.seq");
  while (s.step()) {
    int64_t number = s.i64(0);
    uint64_t ts = s.u64(1);
    bool last = s.is_null(2);
    std::string label = s.is_null(4) || s.text(4).empty() ? "step" : s.text(4);
    cw.slice(label + " " + std::to_string(number), "step", steps_tid, ts,
             last ? std::max(tf.end, ts) : s.u64(2));
    cw.w().raw(",\"args\":{\"number\":").i64(number).raw(",\"thread\":").u64(s.u64(3));
    cw.w().raw("}");
    cw.end();
  }
}

void chrome_instants(Db& db, ChromeWriter& cw, const std::map<int64_t, std::string>& devices) {
  {
    Stmt s(db, "SELECT ts, device, kind, duration_ns, stream, thread FROM syncs ORDER BY ts, seq");
    while (s.step()) {
      std::string kind = s.text(2);
      cw.instant("sync " + kind, "sync", s.u64(5), s.u64(0), 't');
      cw.w().raw(",\"args\":{\"kind\":").json_string(kind);
      cw.w().raw(",\"duration_ns\":").u64(s.u64(3)).raw(",\"stream\":").u64(s.u64(4));
      cw.w().raw(",\"device\":").json_string(device_name(devices, s.i64(1))).raw("}");
      cw.end();
    }
  }
  {
    Stmt s(db,
           "SELECT m.ts, m.device, n.text, m.value, m.thread FROM marks m "
           "LEFT JOIN strings n ON n.id = m.name ORDER BY m.ts, m.seq");
    while (s.step()) {
      std::string name = s.is_null(2) ? "" : s.text(2);
      cw.instant(name.empty() ? "(unnamed mark)" : name, "mark", s.u64(4), s.u64(0), 't');
      cw.w().raw(",\"args\":{\"value\":").u64(s.u64(3)).raw("}");
      cw.end();
    }
  }
  {
    Stmt s(db,
           "SELECT ts, device, direction, bytes, stream, pinned, async, thread FROM memcpys "
           "ORDER BY ts, seq");
    while (s.step()) {
      std::string direction = s.text(2);
      cw.instant("memcpy " + direction, "memcpy", s.u64(7), s.u64(0), 't');
      cw.w().raw(",\"args\":{\"direction\":").json_string(direction);
      cw.w().raw(",\"bytes\":").u64(s.u64(3)).raw(",\"stream\":").u64(s.u64(4));
      cw.w().raw(",\"pinned\":").raw(s.i64(5) ? "true" : "false");
      cw.w().raw(",\"async\":").raw(s.i64(6) ? "true" : "false");
      cw.w().raw(",\"device\":").json_string(device_name(devices, s.i64(1))).raw("}");
      cw.end();
    }
  }
  {
    Stmt s(db,
           "SELECT ts, device, kind, requested_size, stream, device_free, device_total, "
           "allocated, reserved, released, thread FROM allocator_events ORDER BY ts, seq");
    static constexpr const char* kFields[] = {"requested_size", "stream",    "device_free",
                                              "device_total",   "allocated", "reserved",
                                              "released"};
    while (s.step()) {
      cw.instant(s.text(2), "allocator", s.u64(10), s.u64(0), 'p');
      cw.w().raw(",\"args\":{\"device\":").json_string(device_name(devices, s.i64(1)));
      for (int i = 0; i < 7; ++i) cw.w().raw(",\"").raw(kFields[i]).raw("\":").u64(s.u64(3 + i));
      cw.w().raw("}");
      cw.end();
    }
  }
}

// ---- CSV ----------------------------------------------------------------------------------

}  // namespace

void export_chrome(const Trace& trace, std::ostream& out) {
  Db& db = trace.db();
  namespace k = store::meta_keys;
  TimeFrame tf = time_frame(trace);
  auto devices = device_names(trace);
  int64_t pid = trace.meta_int(k::kPid).value_or(0);
  if (pid <= 0) pid = 1;  // Perfetto reserves pid 0 for the kernel's idle task

  // Real thread ids: every thread with raw events or scopes. The steps track takes the id
  // after the highest so it never merges with a real thread.
  std::vector<uint64_t> threads;
  {
    Stmt s(db, "SELECT thread FROM event_blocks UNION SELECT thread FROM scopes ORDER BY 1");
    while (s.step()) threads.push_back(s.u64(0));
  }
  uint64_t steps_tid = threads.empty() ? 1 : threads.back() + 1;
  bool has_steps = false;
  {
    Stmt s(db, "SELECT EXISTS (SELECT 1 FROM steps)");
    has_steps = s.step() && s.i64(0) != 0;
  }

  Writer w(out, trace.path());
  ChromeWriter cw(w, pid, tf);
  w.raw("{\"traceEvents\":[");
  cw.metadata("process_name", 0, "name", program_name(trace.meta_text(k::kCommandLine)));
  for (uint64_t t : threads) {
    cw.metadata("thread_name", t, "name", "thread " + std::to_string(t));
    cw.sort_index(t, static_cast<int64_t>(t));
  }
  if (has_steps) {
    cw.metadata("thread_name", steps_tid, "name", "steps");
    cw.sort_index(steps_tid, -1);
  }
  chrome_counters(trace.reader(), cw, devices);
  chrome_scopes(db, cw, tf);
  chrome_steps(db, cw, tf, steps_tid);
  chrome_instants(db, cw, devices);
  w.raw("\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"tool\":\"tidemark\"");
  w.raw(",\"trace\":").json_string(trace.shown_path());
  w.raw(",\"command_line\":").json_string(trace.meta_text(k::kCommandLine));
  w.raw(",\"host\":").json_string(trace.meta_text(k::kHost));
  w.raw(",\"pid\":").i64(trace.meta_int(k::kPid).value_or(0));
  w.raw(",\"tool_version\":").json_string(trace.meta_text(k::kToolVersion));
  w.raw(",\"start_unix_ns\":").i64(trace.meta_int(k::kStartUnixNs).value_or(0));
  w.raw(",\"origin_ts_ns\":").u64(tf.origin);
  w.raw(",\"dropped_events\":").i64(trace.meta_int(k::kDroppedCount).value_or(0));
  w.raw("}}\n");
  w.flush();
}

void export_csv(const Trace& trace, std::ostream& out) {
  TimeFrame tf = time_frame(trace);
  auto devices = device_names(trace);
  // Sites by Note [Allocation site] (trace.h), the rule `tidemark top --by site` uses.
  std::unordered_map<uint64_t, std::optional<store::ResolvedFrame>> sites;
  Writer w(out, trace.path());
  w.raw(
      "device,addr,size,requested_size,stream,segment,pool,alloc_ns,free_requested_ns,"
      "free_completed_ns,thread,scope,category,stack,site_function,site_file,site_line\n");
  Stmt s(trace.db(),
         "SELECT a.device, a.addr, a.size, a.requested_size, a.stream, a.segment, a.pool, "
         "a.alloc_ts, a.free_requested_ts, a.free_completed_ts, a.thread, sc.text, a.category, "
         "a.stack FROM allocations a LEFT JOIN strings sc ON sc.id = a.scope ORDER BY a.seq");
  auto rel = [&](int col) {
    if (!s.is_null(col)) w.i64(static_cast<int64_t>(s.u64(col) - tf.origin));
  };
  while (s.step()) {
    w.csv_field(device_name(devices, s.i64(0))).raw(",");
    w.hex(s.u64(1)).raw(",");
    w.u64(s.u64(2)).raw(",").u64(s.u64(3)).raw(",").u64(s.u64(4)).raw(",");
    w.hex(s.u64(5)).raw(",");
    w.csv_field(s.text(6)).raw(",");
    rel(7);
    w.raw(",");
    rel(8);
    w.raw(",");
    rel(9);
    w.raw(",").u64(s.u64(10)).raw(",");
    w.csv_field(s.is_null(11) ? "" : s.text(11)).raw(",");
    w.csv_field(s.text(12)).raw(",");
    uint64_t stack = s.u64(13);
    w.u64(stack).raw(",");
    auto [it, fresh] = sites.try_emplace(stack);
    if (fresh) it->second = trace.site_frame(stack);
    if (const auto& site = it->second) {
      w.csv_field(site->function).raw(",").csv_field(site->file).raw(",");
      if (site->line > 0) w.i64(site->line);
    } else {
      w.raw(",,");
    }
    w.raw("\n");
  }
  w.flush();
}

std::string_view export_format_name(ExportFormat format) {
  switch (format) {
    case ExportFormat::chrome:
      return "chrome";
    case ExportFormat::csv:
      return "csv";
    case ExportFormat::snapshot:
      return "snapshot";
  }
  return "chrome";
}

std::optional<ExportFormat> parse_export_format(std::string_view name) {
  for (ExportFormat f : {ExportFormat::chrome, ExportFormat::csv, ExportFormat::snapshot})
    if (export_format_name(f) == name) return f;
  return std::nullopt;
}

ExportResult export_to(const Trace& trace, std::ostream& out, const ExportOptions& options) {
  ExportResult r;
  switch (options.format) {
    case ExportFormat::chrome:
      export_chrome(trace, out);
      break;
    case ExportFormat::csv:
      export_csv(trace, out);
      break;
    case ExportFormat::snapshot:
      r.snapshot = export_snapshot(trace, out, options.snapshot);
      break;
  }
  return r;
}

ExportResult export_to_file(const Trace& trace, const std::string& path,
                            const ExportOptions& options) {
  OutputFile file(path, {trace.path()});  // Note [Output files]
  ExportResult r = export_to(trace, file.stream(), options);
  file.commit();
  return r;
}

}  // namespace tidemark::analysis
