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
#include "profiler/store/allocator_tables.h"
#include "profiler/store/event_tables.h"
#include "profiler/store/meta_keys.h"

namespace tidemark::analysis {

namespace {

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

void chrome_scopes(const store::TraceReader& reader, ChromeWriter& cw, const TimeFrame& tf) {
  store::for_each_scope(reader, [&](const store::ScopeRow& s) {
    const bool open = !s.pop_ts;
    const uint64_t pop = open ? std::max(tf.end, s.push_ts) : *s.pop_ts;
    cw.slice(s.name.empty() ? "(unnamed scope)" : s.name, "scope", s.thread, s.push_ts, pop);
    cw.w().raw(",\"args\":{\"path\":").json_string(s.path);
    cw.w().raw(",\"depth\":").i64(s.depth);
    if (s.value != 0) cw.w().raw(",\"value\":").i64(s.value);
    if (open) cw.w().raw(",\"open_at_end\":true");
    cw.w().raw("}");
    cw.end();
  });
}

void chrome_steps(const store::TraceReader& reader, ChromeWriter& cw, const TimeFrame& tf,
                  uint64_t steps_tid) {
  store::for_each_step(reader, [&](const store::StepRow& s) {
    const std::string label = s.name.empty() ? "step" : s.name;
    cw.slice(label + " " + std::to_string(s.number), "step", steps_tid, s.ts,
             s.end_ts ? *s.end_ts : std::max(tf.end, s.ts));
    cw.w().raw(",\"args\":{\"number\":").i64(s.number).raw(",\"thread\":").u64(s.thread);
    cw.w().raw("}");
    cw.end();
  });
}

void chrome_instants(const store::TraceReader& reader, ChromeWriter& cw,
                     const std::map<int64_t, std::string>& devices) {
  store::for_each_sync(reader, [&](const store::SyncRow& s) {
    cw.instant("sync " + s.kind, "sync", s.thread, s.ts, 't');
    cw.w().raw(",\"args\":{\"kind\":").json_string(s.kind);
    cw.w().raw(",\"duration_ns\":").u64(s.duration_ns).raw(",\"stream\":").u64(s.stream);
    cw.w().raw(",\"device\":").json_string(device_name(devices, s.device)).raw("}");
    cw.end();
  });
  store::for_each_mark(reader, [&](const store::MarkRow& m) {
    cw.instant(m.name.empty() ? "(unnamed mark)" : m.name, "mark", m.thread, m.ts, 't');
    cw.w().raw(",\"args\":{\"value\":").u64(m.value).raw("}");
    cw.end();
  });
  store::for_each_memcpy(reader, [&](const store::MemcpyRow& m) {
    cw.instant("memcpy " + m.direction, "memcpy", m.thread, m.ts, 't');
    cw.w().raw(",\"args\":{\"direction\":").json_string(m.direction);
    cw.w().raw(",\"bytes\":").u64(m.bytes).raw(",\"stream\":").u64(m.stream);
    cw.w().raw(",\"pinned\":").raw(m.pinned ? "true" : "false");
    cw.w().raw(",\"async\":").raw(m.async ? "true" : "false");
    cw.w().raw(",\"device\":").json_string(device_name(devices, m.device)).raw("}");
    cw.end();
  });
  store::for_each_allocator_event(reader, [&](const store::AllocatorEventRow& a) {
    cw.instant(a.kind, "allocator", a.thread, a.ts, 'p');
    cw.w().raw(",\"args\":{\"device\":").json_string(device_name(devices, a.device));
    const std::pair<const char*, uint64_t> fields[] = {{"requested_size", a.requested_size},
                                                       {"stream", a.stream},
                                                       {"device_free", a.device_free},
                                                       {"device_total", a.device_total},
                                                       {"allocated", a.allocated},
                                                       {"reserved", a.reserved},
                                                       {"released", a.released}};
    for (const auto& [name, value] : fields) cw.w().raw(",\"").raw(name).raw("\":").u64(value);
    cw.w().raw("}");
    cw.end();
  });
}

// ---- CSV ----------------------------------------------------------------------------------

}  // namespace

void export_chrome(const Trace& trace, std::ostream& out) {
  namespace k = store::meta_keys;
  TimeFrame tf = time_frame(trace);
  auto devices = device_names(trace);
  int64_t pid = trace.meta_int(k::kPid).value_or(0);
  if (pid <= 0) pid = 1;  // Perfetto reserves pid 0 for the kernel's idle task

  // Real thread ids: every thread with raw events or scopes. The steps track takes the id
  // after the highest so it never merges with a real thread.
  const store::TraceReader& reader = trace.reader();
  const std::vector<uint64_t> threads = store::threads(reader);
  uint64_t steps_tid = threads.empty() ? 1 : threads.back() + 1;
  bool has_steps = false;
  store::for_each_step(reader, [&](const store::StepRow&) { has_steps = true; });

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
  chrome_counters(reader, cw, devices);
  chrome_scopes(reader, cw, tf);
  chrome_steps(reader, cw, tf, steps_tid);
  chrome_instants(reader, cw, devices);
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
  auto rel = [&](std::optional<uint64_t> ts) {
    if (ts) w.i64(static_cast<int64_t>(*ts - tf.origin));
  };
  store::for_each_allocation_row(
      trace.reader(), {}, store::AllocationOrder::seq, [&](const store::AllocationRow& a) {
        w.csv_field(device_name(devices, a.device)).raw(",");
        w.hex(a.addr).raw(",");
        w.u64(a.size).raw(",").u64(a.requested_size).raw(",").u64(a.stream).raw(",");
        w.hex(a.segment).raw(",");
        w.csv_field(store::pool_name(a.pool)).raw(",");
        rel(a.alloc_ts);
        w.raw(",");
        rel(a.free_requested_ts);
        w.raw(",");
        rel(a.free_completed_ts);
        w.raw(",").u64(a.thread).raw(",");
        w.csv_field(a.scope).raw(",");
        w.csv_field(events::category_name(a.category)).raw(",");
        const uint64_t stack = a.stack_id;
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
      });
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
  OutputFile file(path, trace.input_files());  // Note [Output files]
  ExportResult r = export_to(trace, file.stream(), options);
  file.commit();
  return r;
}

}  // namespace tidemark::analysis
