// Note [Merged devices] (merge.h).
#include "profiler/analysis/merge.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <queue>
#include <set>
#include <unordered_map>

#include "profiler/naming/units.h"
#include "profiler/store/meta_keys.h"
#include "profiler/store/trace_reader.h"
#include "profiler/store/trace_writer.h"

namespace tidemark::analysis {

namespace ev = tidemark::events;

namespace {

constexpr int kIdShift = 48;                           // tensor and storage ids: id | rank << 48
constexpr int kThreadShift = store::kMergedRankShift;  // threads: thread | rank << 32
constexpr int64_t kMaxRanks = int64_t{1} << 13;        // return addresses: ip | (rank + 1) << 48

struct Source {
  MergedRank info;
  std::optional<int64_t> world_size;
  std::unique_ptr<store::TraceReader> reader;
  store::TraceMeta meta;
  uint64_t node_offset = 0;
};

// Opens each input and reads its rank and world size.
std::vector<Source> open_sources(const std::vector<std::string>& inputs,
                                 const std::vector<std::string>& names) {
  if (inputs.empty()) throw MergeError("merge: no traces given");
  std::vector<Source> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string& path = inputs[i];
    Source s;
    s.info.path = i < names.size() ? names[i] : path;
    s.reader = std::make_unique<store::TraceReader>(
        store::TraceReader::open(path, store::TraceReader::Require::raw));
    s.meta = s.reader->meta();
    if (!s.meta.merged_ranks.empty())
      throw MergeError(s.info.path + ": is a merged trace already; merge the ranks' own traces");
    if (s.meta.rank) {
      s.info.rank = *s.meta.rank;
      s.info.rank_from = "meta";
    } else if (std::optional<int64_t> r = rank_from_file_name(s.info.path)) {
      s.info.rank = *r;
      s.info.rank_from = "file name";
    } else {
      throw MergeError(s.info.path +
                       ": has no rank (not recorded under mpirun or torchrun, and no number "
                       "in its name); record with -o run-%r.db or name it rank-N.db");
    }
    if (s.info.rank >= kMaxRanks)
      throw MergeError(s.info.path + ": rank " + std::to_string(s.info.rank) + " is beyond the " +
                       std::to_string(kMaxRanks) + " ranks a merged trace holds");
    s.world_size = s.meta.world_size;
    s.info.complete = s.reader->finalized() && s.reader->clean_end();
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(),
            [](const Source& a, const Source& b) { return a.info.rank < b.info.rank; });
  return out;
}

// Refuses traces that are not of one run; returns the world size.
int64_t check_one_run(const std::vector<Source>& sources, std::vector<std::string>& warnings) {
  const Source* sized = nullptr;
  for (size_t i = 0; i < sources.size(); ++i) {
    const Source& s = sources[i];
    if (i > 0 && sources[i - 1].info.rank == s.info.rank)
      throw MergeError(sources[i - 1].info.path + " and " + s.info.path + ": both are rank " +
                       std::to_string(s.info.rank) + "; give each rank's trace once");
    if (!s.world_size) continue;
    if (sized && *sized->world_size != *s.world_size)
      throw MergeError(sized->info.path + " and " + s.info.path + ": not of one run (world size " +
                       std::to_string(*sized->world_size) + " and " +
                       std::to_string(*s.world_size) + ")");
    sized = &s;
  }
  if (std::any_of(sources.begin(), sources.end(), [&](const Source& s) {
        return s.meta.synthetic_times != sources.front().meta.synthetic_times;
      }))
    throw MergeError(sources.front().info.path +
                     ": some traces have clock times and others only the order of a snapshot's "
                     "entries (no times); they cannot be lined up");
  const int64_t world = sized ? *sized->world_size : sources.back().info.rank + 1;
  for (const Source& s : sources)
    if (s.info.rank >= world)
      throw MergeError(s.info.path + ": rank " + std::to_string(s.info.rank) +
                       " is beyond the run's world size " + std::to_string(world));
  std::string missing;
  std::set<int64_t> present;
  for (const Source& s : sources) present.insert(s.info.rank);
  for (int64_t r = 0; r < world; ++r)
    if (!present.count(r)) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  if (!missing.empty())
    warnings.push_back("the run has " + std::to_string(world) + " ranks; no trace of rank " +
                       missing + " was given");
  return world;
}

// The merged trace's devices: per type, numbered in rank order (Note [Merged devices]).
struct DeviceMap {
  std::map<std::pair<int64_t, std::pair<int, int>>, ev::DeviceId> ids;  // (rank, (type, idx))
  std::vector<store::DeviceInfo> devices;
  int next[2] = {0, 0};

  ev::DeviceId add(int64_t rank, const store::DeviceInfo& d) {
    const auto key =
        std::make_pair(rank, std::make_pair(static_cast<int>(d.id.type), int{d.id.index}));
    if (auto it = ids.find(key); it != ids.end()) return it->second;
    int& n = next[d.id.type == ev::DeviceType::cuda ? 1 : 0];
    if (n > 127)
      throw MergeError("merge: more than 128 " + device_name({d.id.type, 0}) +
                       " devices in all; merge fewer ranks at once");
    store::DeviceInfo m = d;
    m.id = {d.id.type, static_cast<int8_t>(n++)};
    m.rank = rank;
    m.rank_id = d.id;
    m.name = "rank" + std::to_string(rank) + "/" + d.name;
    devices.push_back(m);
    return ids[key] = m.id;
  }
  ev::DeviceId at(int64_t rank, ev::DeviceId id) {
    const auto key = std::make_pair(rank, std::make_pair(static_cast<int>(id.type), int{id.index}));
    if (auto it = ids.find(key); it != ids.end()) return it->second;
    store::DeviceInfo d;
    d.id = id;
    d.name = device_name(id);
    return add(rank, d);
  }
};

// A private pools list (meta `private_pools`, JSON) with the devices renamed for the merge.
std::string renamed_pools(const std::string& pools, int64_t rank) {
  if (pools.empty()) return {};
  nlohmann::json j = nlohmann::json::parse(pools, nullptr, false);
  if (!j.is_array()) return {};
  for (auto& p : j)
    if (p.is_object() && p.contains("device") && p["device"].is_string())
      p["device"] = "rank" + std::to_string(rank) + "/" + p["device"].get<std::string>();
  return j.dump();
}

void map_event(ev::Event& e, int64_t rank) {
  const uint64_t id_tag = static_cast<uint64_t>(rank) << kIdShift;
  e.thread_id |= static_cast<uint64_t>(rank) << kThreadShift;
  switch (ev::payload_of(e.kind)) {
    case ev::Payload::tensor:
      e.tensor.tensor_id |= id_tag;
      e.tensor.storage_id |= id_tag;
      if (e.tensor.base_id) e.tensor.base_id |= id_tag;
      break;
    case ev::Payload::storage:
      e.storage.storage_id |= id_tag;
      break;
    default:
      break;
  }
}

store::TraceMeta merged_meta(const std::vector<Source>& sources, const DeviceMap& devices,
                             int64_t world, const Source& first) {
  store::TraceMeta meta;
  meta.tool_version = first.meta.tool_version;
  meta.command_line = sources.front().meta.command_line;
  std::set<std::string> hosts;
  for (const Source& s : sources) hosts.insert(s.meta.host);
  for (const std::string& h : hosts) meta.host += (meta.host.empty() ? "" : ",") + h;
  meta.pid = sources.front().meta.pid;
  meta.start_unix_ns = first.meta.start_unix_ns;
  meta.start_ts_ns = first.meta.start_ts_ns;
  meta.devices = devices.devices;
  meta.allocator_settings = sources.front().meta.allocator_settings;
  meta.synthetic_times = first.meta.synthetic_times;
  meta.world_size = world;
  nlohmann::json pools = nlohmann::json::array(), ranks = nlohmann::json::array();
  for (const Source& s : sources) {
    meta.stack_depth = std::max(meta.stack_depth, s.meta.stack_depth);
    if (!s.reader->loss_counted()) meta.loss_counted = false;  // Note [Counted losses]
    if (meta.categories_inferred.empty()) meta.categories_inferred = s.meta.categories_inferred;
    nlohmann::json p =
        nlohmann::json::parse(renamed_pools(s.meta.private_pools, s.info.rank), nullptr, false);
    if (p.is_array())
      for (auto& x : p) pools.push_back(x);
    ranks.push_back({{"rank", s.info.rank},
                     {"path", s.info.path},
                     {"pid", s.meta.pid},
                     {"host", s.meta.host},
                     {"start_unix_ns", s.meta.start_unix_ns},
                     {"offset_ns", s.info.offset_ns},
                     {"complete", s.info.complete}});
  }
  if (!pools.empty()) meta.private_pools = pools.dump();
  meta.merged_ranks = ranks.dump();
  return meta;
}

// Writes the events of every source, each rank's in its own order, interleaved by time: one
// cursor per rank, so memory holds the blocks being read, not the ranks' events.
uint64_t write_events(std::vector<Source>& sources, DeviceMap& devices, store::TraceWriter& w) {
  using Head = std::pair<uint64_t, size_t>;  // (merged time, source)
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heads;
  std::vector<store::TraceReader::EventCursor> cursors;
  cursors.reserve(sources.size());
  auto time_of = [&](size_t s) {
    const int64_t t = static_cast<int64_t>(cursors[s].event().ts_ns) + sources[s].info.offset_ns;
    return static_cast<uint64_t>(std::max<int64_t>(t, 0));
  };
  for (size_t s = 0; s < sources.size(); ++s) {
    cursors.push_back(sources[s].reader->event_cursor());
    if (cursors[s].next()) heads.push({time_of(s), s});
  }
  uint64_t seq = 0, end = 0;
  while (!heads.empty()) {
    const auto [ts, s] = heads.top();
    heads.pop();
    Source& src = sources[s];
    ev::Event e = cursors[s].event();  // spans and names still point into the cursor's block
    e.ts_ns = ts;
    e.seq = ++seq;
    e.device = devices.at(src.info.rank, e.device);
    map_event(e, src.info.rank);
    const uint64_t stack_id = cursors[s].stack_id();
    w.append(e, stack_id ? stack_id + src.node_offset : 0);
    end = std::max(end, ts);
    if (seq % (1 << 18) == 0) w.commit();
    if (cursors[s].next()) heads.push({time_of(s), s});
  }
  for (Source& src : sources)
    for (const store::DroppedRow& d : src.reader->dropped())
      w.add_dropped(d.count, static_cast<uint64_t>(std::max<int64_t>(
                                 static_cast<int64_t>(d.ts_ns) + src.info.offset_ns, 0)));
  return end;
}

}  // namespace

std::optional<int64_t> rank_from_file_name(std::string_view path) {
  std::string stem = std::filesystem::path(std::string(path)).stem().string();
  std::string lower = stem;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::vector<std::string> after_rank, numbers;
  for (size_t i = 0; i < lower.size();) {
    if (!std::isdigit(static_cast<unsigned char>(lower[i]))) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < lower.size() && std::isdigit(static_cast<unsigned char>(lower[j]))) ++j;
    numbers.push_back(lower.substr(i, j - i));
    size_t k = i;  // "rank3", "rank-3", "rank_3", "rank.3"
    if (k > 0 && (lower[k - 1] == '-' || lower[k - 1] == '_' || lower[k - 1] == '.')) --k;
    if (k >= 4 && lower.compare(k - 4, 4, "rank") == 0) after_rank.push_back(numbers.back());
    i = j;
  }
  const std::vector<std::string>& pick = after_rank.empty() ? numbers : after_rank;
  if (pick.empty()) return std::nullopt;
  if (pick.size() > 1)
    throw MergeError(std::string(path) + ": its name has several numbers (" + pick[0] + ", " +
                     pick[1] +
                     "), so which is the rank is ambiguous; name it rank-N or give --rank");
  if (pick[0].size() > 6)
    throw MergeError(std::string(path) + ": " + pick[0] + " in its name is no rank");
  return std::stoll(pick[0]);
}

MergeResult merge_ranks(const std::vector<std::string>& inputs, const std::string& output,
                        const std::vector<std::string>& names) {
  MergeResult result;
  std::vector<Source> sources = open_sources(inputs, names);
  result.world_size = check_one_run(sources, result.warnings);

  // The clock of the rank that started first (Note [Merged devices]).
  const Source* first = &sources.front();
  for (const Source& s : sources)
    if (s.meta.start_unix_ns < first->meta.start_unix_ns) first = &s;
  const int64_t first_base =
      first->meta.synthetic_times
          ? static_cast<int64_t>(first->meta.start_ts_ns)
          : first->meta.start_unix_ns - static_cast<int64_t>(first->meta.start_ts_ns);
  DeviceMap devices;
  uint64_t nodes = 0;
  for (Source& s : sources) {
    s.info.offset_ns =
        s.meta.synthetic_times
            ? first_base - static_cast<int64_t>(s.meta.start_ts_ns)
            : (s.meta.start_unix_ns - static_cast<int64_t>(s.meta.start_ts_ns)) - first_base;
    for (const store::DeviceInfo& d : s.meta.devices) devices.add(s.info.rank, d);
    // A first pass for the devices the events name and their count; the events themselves
    // are read again, streaming, by write_events.
    s.reader->for_each_event([&](const ev::Event& e, uint64_t) {
      devices.at(s.info.rank, e.device);
      ++s.info.events;
    });
    s.node_offset = nodes;
    for (const store::StackNode& n : s.reader->stack_nodes())
      nodes = std::max(nodes, n.id + s.node_offset);
    if (!s.info.complete)
      result.warnings.push_back(
          "rank " + std::to_string(s.info.rank) + " (" + s.info.path + "): " +
          (s.reader->clean_end() ? "not finalized"
                                 : "the recording did not end cleanly (was the rank killed?)") +
          "; merged the " + std::to_string(s.info.events) + " events it committed" +
          (s.reader->finalized() ? ""
                                 : ", its stacks unresolved (`tidemark finalize " + s.info.path +
                                       "` first resolves them)"));
  }
  for (const store::DeviceInfo& d : devices.devices)
    for (Source& s : sources)
      if (s.info.rank == *d.rank)
        s.info.devices.push_back("rank" + std::to_string(*d.rank) + "/" + device_name(d.rank_id));

  const store::TraceMeta meta = merged_meta(sources, devices, result.world_size, *first);
  store::remove_trace_sidecars(output);
  auto writer = store::TraceWriter::create(output, meta);
  // Frames: each rank's as its own trace resolved them, under the tagged addresses.
  auto frames = std::make_shared<std::unordered_map<uint64_t, std::vector<store::ResolvedFrame>>>();
  for (Source& s : sources) {
    const uint64_t tag = static_cast<uint64_t>(s.info.rank + 1) << kIdShift;
    const bool resolved = s.reader->finalized();
    for (const store::StackNode& n : s.reader->stack_nodes()) {
      writer->add_stack_node(n.id + s.node_offset, n.parent ? n.parent + s.node_offset : 0,
                             n.ip | tag);
      if (resolved && !frames->count(n.ip | tag)) (*frames)[n.ip | tag] = s.reader->frames(n.ip);
    }
  }
  writer->close(write_events(sources, devices, *writer));
  writer.reset();
  for (const Source& s : sources) result.events += s.info.events;
  store::FinalizeOptions options;
  options.symbolize = [frames](uint64_t ip) {
    auto it = frames->find(ip);
    return it == frames->end() ? std::vector<store::ResolvedFrame>{} : it->second;
  };
  store::finalize(output, options);
  for (Source& s : sources) result.ranks.push_back(s.info);
  return result;
}

}  // namespace tidemark::analysis
