// Writing a replayed trace (replay.h, write_replayed_trace): the recorded events, with the
// replayed devices' allocator events replaced by the replay's, so every command and the GUI
// read the replay as they read a recording.
#include <algorithm>
#include <unordered_map>

#include "profiler/analysis/output_file.h"
#include "profiler/replay/replay.h"
#include "profiler/store/trace_writer.h"

namespace tidemark::replay {

namespace ev = tidemark::events;

namespace {

struct Replayed {
  ev::Event event;
  uint64_t request_seq = 0;  // of the recorded event it replaces (0: the starting state)
  uint64_t stack_id = 0;
};

struct DeviceReplay {
  ev::DeviceId id;
  std::vector<Replayed> events;
  size_t next = 0;
  Result result;
  std::unordered_map<uint64_t, uint32_t> block_by_seq;  // recorded alloc seq -> block
  std::unordered_map<uint64_t, uint32_t> live;          // recorded address -> block
};

}  // namespace

void write_replayed_trace(const analysis::Trace& trace, const std::vector<Plan>& plans,
                          const Settings& settings, const std::string& output) {
  const store::TraceReader& reader = trace.reader();
  analysis::OutputFile out(output, trace.input_files());

  std::vector<DeviceReplay> replays(plans.size());
  for (size_t i = 0; i < plans.size(); ++i) {
    DeviceReplay& d = replays[i];
    d.id = plans[i].event_device;
    auto keep = [&](const ev::Event& e, const Request& during) {
      Replayed r;
      r.event = e;
      r.event.device = d.id;
      r.event.ts_ns = during.ts;
      r.event.thread_id = during.thread;
      r.request_seq = during.seq;
      r.stack_id = during.stack_id;
      if (e.kind == ev::Kind::alloc && during.kind == Request::Kind::alloc)
        r.event.block.category = plans[i].blocks[during.block].category;
      d.events.push_back(r);
    };
    d.result = run(plans[i], settings, keep, &trace);
    for (uint32_t b = 0; b < plans[i].blocks.size(); ++b)
      d.block_by_seq[plans[i].blocks[b].seq] = b;
  }

  store::TraceMeta meta = reader.meta();
  meta.allocator_settings = settings.conf.text();
  for (store::DeviceInfo& info : meta.devices)
    for (const DeviceReplay& d : replays)
      if (info.id == d.id && d.result.capacity != kUnlimited) info.capacity = d.result.capacity;
  store::remove_trace_sidecars(out.part_path());
  auto writer = store::TraceWriter::create(out.part_path(), meta);
  for (const store::StackNode& n : reader.stack_nodes())
    writer->add_stack_node(n.id, n.parent, n.ip);
  writer->add_modules(reader.modules());
  for (const store::DroppedRow& d : reader.dropped()) writer->add_dropped(d.count, d.ts_ns);

  uint64_t seq = 1, last_ts = 0;
  auto append = [&](ev::Event e, uint64_t stack_id) {
    e.seq = seq++;
    last_ts = std::max(last_ts, e.ts_ns);
    writer->append(e, stack_id);
  };
  auto flush = [&](uint64_t upto) {
    for (DeviceReplay& d : replays)
      for (; d.next < d.events.size() && d.events[d.next].request_seq <= upto; ++d.next)
        append(d.events[d.next].event, d.events[d.next].stack_id);
  };
  auto replay_of = [&](ev::DeviceId id) -> DeviceReplay* {
    for (DeviceReplay& d : replays)
      if (d.id == id) return &d;
    return nullptr;
  };
  // The address a recorded block has in the replay (the recorded one when it has none).
  auto moved = [](DeviceReplay& d, uint64_t addr) {
    auto it = d.live.find(addr);
    if (it == d.live.end()) return addr;
    uint64_t now = d.result.addresses[it->second];
    return now ? now : addr;
  };
  reader.for_each_event([&](const ev::Event& e, uint64_t stack_id) {
    DeviceReplay* d = replay_of(e.device);
    if (d && is_allocator_event(e.kind)) {
      // Dropped: the replay answers it. Follow the recorded blocks for the events below.
      if (e.kind == ev::Kind::alloc) {
        auto b = d->block_by_seq.find(e.seq);
        if (b != d->block_by_seq.end()) d->live[e.block.addr] = b->second;
      } else if (e.kind == ev::Kind::free_requested) {
        d->live.erase(e.block.addr);
      }
      flush(e.seq);
      return;
    }
    flush(e.seq);
    if (d && (e.kind == ev::Kind::storage_create || e.kind == ev::Kind::storage_release)) {
      ev::Event c = e;
      c.storage.addr = moved(*d, e.storage.addr);
      return append(c, stack_id);
    }
    if (d && e.kind == ev::Kind::category) {
      ev::Event c = e;
      c.category.addr = moved(*d, e.category.addr);
      return append(c, stack_id);
    }
    append(e, stack_id);
  });
  flush(UINT64_MAX);
  uint64_t end = reader.end_ts().value_or(last_ts);
  writer->close(std::max(end, last_ts));
  writer.reset();

  store::FinalizeOptions options;
  options.symbolize = [&reader](uint64_t ip) { return reader.frames(ip); };
  store::finalize(out.part_path(), options);
  // An old trace's WAL left beside `output` must not be replayed onto the new one.
  store::remove_trace_sidecars(output);
  out.commit();
}

}  // namespace tidemark::replay
