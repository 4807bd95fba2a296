// Phase 1 of the PyTorch snapshot importer: the snapshot's pickle read into plain structs
// (snapshot_reader.h).
#include "profiler/importers/snapshot_reader.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace tidemark::importers::snapshot {

namespace {

// A value's 8 bytes of payload, for hashing and comparing by bits.
uint64_t payload(const pickle::Val& v) {
  uint64_t bits;
  std::memcpy(&bits, &v.i, sizeof bits);
  return bits;
}

// DictsByContent's hash and equality (Note [Frame dicts by content]): two dicts are equal with
// the same keys and values in the same order.
pickle::Ref dict_of(const pickle::Document& doc, uint32_t id) {
  pickle::Val v;
  v.type = Type::dict;
  v.index = id;
  return {&doc, v};
}

uint64_t mix(uint64_t h, uint64_t x) {
  h = (h ^ x) * 0x9e3779b97f4a7c15ull;
  return h ^ (h >> 29);
}

uint64_t hash_of(Ref v) {
  uint64_t h = static_cast<uint8_t>(v.type());
  if (auto s = v.type() == Type::bytes ? v.as_bytes() : v.as_string())
    return mix(h, std::hash<std::string_view>{}(*s));
  if (v.type() == Type::global) {
    auto [m, n] = *v.as_global();
    return mix(mix(h, std::hash<std::string_view>{}(m)), std::hash<std::string_view>{}(n));
  }
  return mix(h, v.is_none() ? 0 : payload(v.val()));
}

bool same(Ref a, Ref b) {
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Type::string:
      return a.as_string() == b.as_string();
    case Type::bytes:
      return a.as_bytes() == b.as_bytes();
    case Type::global:
      return a.as_global() == b.as_global();
    case Type::none:
      return true;
    default:  // by the bits: 0.0 and -0.0 differ, NaN equals itself
      return payload(a.val()) == payload(b.val());
  }
}

uint32_t hash_of_dict(const pickle::Document& doc, uint32_t id) {
  const Ref d = dict_of(doc, id);
  uint64_t h = d.size();
  for (size_t k = 0; k < d.size(); ++k) h = mix(mix(h, hash_of(d.key(k))), hash_of(d.value(k)));
  return static_cast<uint32_t>(h ^ (h >> 32));
}

bool equal_dicts(const pickle::Document& doc, uint32_t a, uint32_t b) {
  const Ref x = dict_of(doc, a), y = dict_of(doc, b);
  if (x.size() != y.size()) return false;
  for (size_t k = 0; k < x.size(); ++k)
    if (!same(x.key(k), y.key(k)) || !same(x.value(k), y.value(k))) return false;
  return true;
}

// A frame dict: one with a 'filename' (PyTorch's frames are {'filename', 'line', 'name'}).
bool is_frame(Ref d) {
  for (size_t k = 0, n = d.size(); k < n; ++k)
    if (d.key(k).as_string() == "filename") return true;
  return false;
}

}  // namespace

uint32_t DictsByContent::find_or_add(const pickle::Document& doc, uint32_t id, bool may_add) {
  if ((count_ + 1) * 2 > slots_.size()) grow();
  const uint32_t h = hash_of_dict(doc, id);
  for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
    Slot& s = slots_[i];
    if (s.id_plus_1 == 0) {
      if (!may_add) return kAbsent;
      s = {h, id + 1};
      ++count_;
      return id;
    }
    if (s.hash == h && equal_dicts(doc, s.id_plus_1 - 1, id)) return s.id_plus_1 - 1;
  }
}

void DictsByContent::grow() {
  std::vector<Slot> old(std::max<size_t>(64, slots_.size() * 2));
  old.swap(slots_);
  for (const Slot& s : old) {
    if (s.id_plus_1 == 0) continue;
    size_t i = s.hash & (slots_.size() - 1);
    while (slots_[i].id_plus_1) i = (i + 1) & (slots_.size() - 1);
    slots_[i] = s;
  }
}

// ---- SnapshotReader ---------------------------------------------------------------------------

void SnapshotReader::fail(const Where& w, const std::string& what) const {
  throw ImportError(name_ + ": not a PyTorch memory snapshot: " + w.str() + ": " + what);
}

Ref SnapshotReader::required(Ref dict, std::string_view key, const Where& w) const {
  std::optional<Ref> v = dict.get(key);
  if (!v) fail(w, "no '" + std::string(key) + "' field");
  return *v;
}

int64_t SnapshotReader::integer(Ref v, std::string_view key, const Where& w) const {
  if (auto i = v.as_int()) return *i;
  if (v.type() == Type::boolean) return *v.as_bool();
  fail(w, "'" + std::string(key) + "' is " + std::string(pickle::type_name(v.type())) + " " +
              v.repr(40) + ", expected an int");
}

// A size or an address: 0 to kMaxBytes.
uint64_t SnapshotReader::bytes(Ref v, std::string_view key, const Where& w) const {
  int64_t i = integer(v, key, w);
  if (i < 0) fail(w, "'" + std::string(key) + "' is negative (" + std::to_string(i) + ")");
  if (static_cast<uint64_t>(i) > kMaxBytes)
    fail(w,
         "'" + std::string(key) + "' " + std::to_string(i) + " is out of range (more than 2^56)");
  return static_cast<uint64_t>(i);
}

uint64_t SnapshotReader::unsigned_field(Ref dict, std::string_view key, const Where& w) const {
  return bytes(required(dict, key, w), key, w);
}

uint64_t SnapshotReader::stream_field(Ref dict, const Where& w) const {
  std::optional<Ref> v = dict.get("stream");
  if (!v || v->is_none()) return 0;
  return static_cast<uint64_t>(integer(*v, "stream", w));  // a cudaStream_t as an integer
}

// A frames list's run, or none (PyTorch's empty list) for an absent or odd value.
FrameRun SnapshotReader::frames_of(std::optional<Ref> v) {
  if (!v || v->is_none()) return 0;
  if (v->type() != Type::list && v->type() != Type::tuple) {
    notes_.add("'frames' values that are not lists (read as no frames)");
    return 0;
  }
  return run_of(*v);
}

// The run of a list or tuple (cached by its identity: a released list keeps its run).
FrameRun SnapshotReader::run_of(Ref list) {
  const uint32_t id = list.identity();
  if (id < run_of_list_.size() && run_of_list_[id] != kNoRun) return run_of_list_[id];
  FrameRun run = 0;
  if (const size_t n = list.size(); n > 0) {
    // By content: a hash of the items, then the runs with that hash compared item by item.
    run_key_.clear();
    uint64_t h = n;
    for (size_t i = 0; i < n; ++i) {
      const pickle::Val v = list[i].val();
      run_key_.push_back(v);
      h = (h ^ (uint64_t{static_cast<uint8_t>(v.type)} << 32 | v.index) ^ payload(v) * 31) *
          0x9e3779b97f4a7c15ull;
      h ^= h >> 29;
    }
    auto same = [&](FrameRun r) {
      auto [items, count] = run_items(r);
      if (count != n) return false;
      for (size_t i = 0; i < n; ++i)
        if (items[i].type != run_key_[i].type || items[i].index != run_key_[i].index ||
            payload(items[i]) != payload(run_key_[i]))
          return false;
      return true;
    };
    auto [b, e] = runs_.equal_range(h);
    for (auto it = b; it != e && run == 0; ++it)
      if (same(it->second)) run = it->second;
    if (run == 0) {
      run = static_cast<FrameRun>(run_end_.size());
      run_items_.insert(run_items_.end(), run_key_.begin(), run_key_.end());
      run_end_.push_back(run_items_.size());
      runs_.emplace(h, run);
    }
  }
  if (id >= run_of_list_.size())
    run_of_list_.resize(std::max<size_t>(id + 1, run_of_list_.size() * 3 / 2), kNoRun);
  run_of_list_[id] = run;
  return run;
}

void SnapshotReader::consumed(uint64_t offset) {
  if (on_consumed) on_consumed(offset);
}

pickle::Val SnapshotReader::dict_appended(pickle::Document& doc, pickle::Val dict) {
  const uint32_t id = dict.index;
  // Each dict is looked at once: frame dicts go into every frames list that names them.
  if (id < same_as_.size() && same_as_[id]) {
    dict.index = same_as_[id] - 1;
    return dict;
  }
  if (id < entry_of_dict_.size() && entry_of_dict_[id] != kNoEntry) return dict;
  if (id >= entry_of_dict_.size())
    entry_of_dict_.resize(std::max<size_t>(id + 1, entry_of_dict_.size() * 3 / 2), kNoEntry);
  entry_of_dict_[id] = kNotEarly;
  const pickle::Document* saved = doc_;
  doc_ = &doc;
  Ref e(&doc, dict);
  std::optional<Ref> f[kEntryFields];
  bool flat = true;
  for (size_t k = 0, n = e.size(); k < n; ++k) {
    int field = entry_field(e.key(k));
    if (field >= 0) f[field] = e.value(k);
    const Type t = e.value(k).type();
    flat = flat && t != Type::list && t != Type::tuple && t != Type::dict;
  }
  Entry entry;
  if (f[kAction] && early_.size() < kNotEarly && convert_entry(f, entry)) {
    entry_of_dict_[id] = static_cast<uint32_t>(early_.size());
    early_.push_back(entry);
    if (f[kFrames]) doc.release(f[kFrames]->val());
    doc.release(dict);
  } else if (!f[kAction] && flat) {
    const bool frame = is_frame(e);
    uint32_t first = by_content_.find_or_add(doc, id, !frame || distinct_frames_ < max_frames_);
    if (first == id) {
      distinct_frames_ += frame;
    } else if (first == DictsByContent::kAbsent) {  // Note [Frame bound]
      ++frames_left_out_;
      if (left_out_ == DictsByContent::kAbsent) {
        left_out_ = id;
        doc.release(dict);
      }
      first = left_out_;
    }
    if (first != id) {
      if (id >= same_as_.size())
        same_as_.resize(std::max<size_t>(id + 1, same_as_.size() * 3 / 2), 0);
      same_as_[id] = first + 1;
      doc.release(dict);
      dict.index = first;
    }
  }
  doc_ = saved;
  return dict;
}

void SnapshotReader::dropped(size_t first, size_t end, size_t first_string) {
  auto forget = [first, end](std::vector<uint32_t>& by_id, uint32_t none) {
    for (size_t id = first; id < std::min(end, by_id.size()); ++id) by_id[id] = none;
  };
  forget(same_as_, 0);
  forget(entry_of_dict_, kNoEntry);
  forget(run_of_list_, kNoRun);
  std::erase_if(key_cache_, [first_string](const auto& k) { return k.first >= first_string; });
  for (ContextCache& c : context_cache_)
    if (c.index >= first_string) c.valid = false;
}

void SnapshotReader::read(Ref root) {
  Ref segments = root, traces{doc_, {}}, host_segments{doc_, {}}, host_traces{doc_, {}};
  if (root.type() == Type::dict) {
    segments = required(root, "segments", {"snapshot"});
    if (auto t = root.get("device_traces")) traces = *t;
    // The pinned host allocator's, with `_record_memory_history(record_pinned_host_memory=True)`.
    if (auto h = root.get("host_segments")) host_segments = *h;
    if (auto h = root.get("host_traces")) host_traces = *h;
    if (auto s = root.get("allocator_settings")) read_settings(*s);
    if (auto a = root.get("external_annotations")) read_annotations(*a);
    if (auto e = root.get("tidemark_estimate")) {
      const std::optional<std::string_view> text = e->as_string();
      if (text && text->size() <= kMaxEstimateBytes)
        estimated_ = std::string(*text);
      else
        notes_.add("'tidemark_estimate' is not a string of at most 1 MiB (left out)");
    }
  } else if (root.type() != Type::list) {
    // PyTorch < 2.1 pickled a bare list of segments; anything else is not a snapshot.
    throw ImportError(name_ + ": not a PyTorch memory snapshot: the pickle holds " +
                      std::string(pickle::type_name(root.type())) + " " + root.repr(60) +
                      ", expected a dict with 'segments' and 'device_traces'");
  }
  if (segments.type() != Type::list)
    fail({"segments"},
         "is " + std::string(pickle::type_name(segments.type())) + ", expected a list");
  read_segments(segments);
  if (traces.type() == Type::list) {
    for (size_t d = 0; d < traces.size(); ++d)
      read_trace(static_cast<int>(std::min<size_t>(d, std::numeric_limits<int>::max())), traces[d]);
  } else if (traces.type() == Type::dict) {  // {device: [entries]}
    for (size_t i = 0; i < traces.size(); ++i) {
      auto d = traces.key(i).as_int();
      if (!d) fail({"device_traces"}, "a key is not a device index");
      read_trace(device_index(*d, {"device_traces"}), traces.value(i));
    }
  } else if (!traces.is_none()) {
    fail({"device_traces"},
         "is " + std::string(pickle::type_name(traces.type())) + ", expected a list");
  }
  read_host(host_segments, host_traces);
  if (untimed_ > 0) {
    // Note [Synthetic times]: without times, every entry's time is its place in its trace.
    for (auto& [d, entries] : traces_)
      for (size_t i = 0; i < entries.size(); ++i) entries[i].time_ns = i * 1000;
    synthetic_times_ = true;
    if (!annotations_.empty())
      notes_.add("annotations left out (the trace has no times to place them at)",
                 annotations_.size());
    annotations_.clear();
  }
  if (frames_left_out_ > 0)
    notes_.add("frames left out past " + std::to_string(max_frames_) + " distinct ones (one per " +
                   std::to_string(kBytesPerFrame) + " bytes of the file, at least " +
                   std::to_string(kMinFrames) +
                   "; --max-events raises it) (read as one frame, '(frames left out)')",
               frames_left_out_);
  std::vector<Entry>().swap(early_);
  std::vector<uint32_t>().swap(entry_of_dict_);
  std::vector<uint32_t>().swap(same_as_);
  by_content_ = {};
}

// One annotation; false when a field is missing or odd.
bool SnapshotReader::read_annotation(Ref a, Annotation& out) {
  std::optional<Ref> stage = a.get("stage"), name = a.get("name"), device = a.get("device"),
                     time = a.get("time_us");
  if (!stage || !name || !time) return false;
  const std::optional<std::string_view> st = stage->as_string(), nm = name->as_string();
  const std::optional<int64_t> tm = time->as_int();
  if (!st || !nm || !tm || (*st != "START" && *st != "END")) return false;
  if (*tm < 0 || *tm > std::numeric_limits<int64_t>::max() / 1000) return false;
  int64_t dv = 0;
  if (device) {
    const std::optional<int64_t> d = device->as_int();
    if (!d || *d < 0 || *d > 127) return false;
    dv = *d;
  }
  out = {static_cast<int>(dv), *st == "START", *nm, static_cast<uint64_t>(*tm) * 1000};
  return true;
}

// external_annotations: [{'stage': 'START'|'END', 'name': str, 'device': int, 'time_us': int}]
// (record_function ranges). Odd entries are skipped and counted.
void SnapshotReader::read_annotations(Ref list) {
  if (list.type() != Type::list && list.type() != Type::tuple) {
    if (!list.is_none()) notes_.add("'external_annotations' that is not a list (left out)");
    return;
  }
  count_records(list.size(), {"external_annotations"});
  for (size_t i = 0; i < list.size(); ++i) {
    Ref a = list[i];
    Annotation out;
    if (!read_annotation(a, out)) {
      notes_.add("annotations with odd fields (left out)");
      continue;
    }
    annotations_.push_back(out);
  }
  std::stable_sort(annotations_.begin(), annotations_.end(),
                   [](const Annotation& x, const Annotation& y) { return x.time_ns < y.time_ns; });
}

// Note [Expansion bound]: a pickle's memo lets a small file name one list many times (one
// 1M-entry trace shared by 100 devices is 2 MB of pickle and 100M entries to import). Real
// snapshots spend 50 bytes or more per entry, block and annotation, so more than one record
// per 16 input bytes (and more than a million) is refused unless the caller raised the limit.
void SnapshotReader::count_records(size_t n, const Where& w) {
  records_ += n;
  if (records_ > max_records_)
    throw ImportError(
        name_ + ": " + w.str() + ": the snapshot expands to more than " +
        std::to_string(max_records_) + " trace entries, blocks and annotations from " +
        std::to_string(input_bytes_) +
        " bytes (lists shared through the pickle's memo?); --max-events raises the limit");
}

// Note [Frame bound]
// ~~~~~~~~~~~~~~~~~~
// A frame the snapshot names once costs its pickle ~20 bytes and the import 300 to 600 (the
// dict and its strings while parsing, its place in the stacks and the trace's frame table), so
// a file whose frames are all distinct (no program's are: the real snapshots name 12 to 960
// distinct frames, one per 1.4 to 15 KB of file) would take 25 times its size. The reader
// keeps at most one distinct frame per 1024 bytes of file, and at least 100,000 (or
// --max-events of them, when given); a frame dict of a new content past that is left out as it
// is parsed: in its list's place the first one left out, which the stacks read as one frame
// named "(frames left out)", counted in the notes. The parser then drops the dict from its
// tables (Note [Dropping replaced dicts] in pickle.cpp); what remains of it is a memo slot (8
// bytes). Such a file imports in about 1.1 times its size (BM_ImportDistinctFrames, 250 MB;
// one Python pickled, 83 MB: 1.8, most of it fixed), linear in it. At one frame per 256 bytes
// the frames kept took 2.9 and 2.6 times the file.
void SnapshotReader::set_limits(uint64_t input_bytes, uint64_t max_records) {
  input_bytes_ = input_bytes;
  max_records_ = max_records ? max_records : std::max<uint64_t>(1'000'000, input_bytes / 16);
  max_frames_ = std::max<uint64_t>({kMinFrames, input_bytes / kBytesPerFrame, max_records});
}

int SnapshotReader::device_index(int64_t d, const Where& w) const {
  if (d < 0 || d > std::numeric_limits<int8_t>::max())
    fail(w, "device index " + std::to_string(d) + " is out of range (0 to 127)");
  return static_cast<int>(d);
}

// Pinned host memory: `host_segments` as `segments` and `host_traces` as `device_traces`, all
// on the one kPinnedHost device (their `device` fields are not read). host_traces may be a
// list of traces, one trace (a list of entries) or a dict of traces; several are merged by
// time.
void SnapshotReader::read_host(Ref segments, Ref traces) {
  if (!segments.is_none()) {
    if (segments.type() != Type::list)
      fail({"host_segments"},
           "is " + std::string(pickle::type_name(segments.type())) + ", expected a list");
    read_segments(segments, "host_segments", true);
  }
  if (traces.is_none()) return;
  std::vector<std::pair<int64_t, Ref>> lists;
  if (traces.type() == Type::list && traces.size() > 0 && traces[0].type() == Type::dict) {
    lists.emplace_back(-1, traces);  // one trace
  } else if (traces.type() == Type::list) {
    for (size_t i = 0; i < traces.size(); ++i)
      lists.emplace_back(static_cast<int64_t>(i), traces[i]);
  } else if (traces.type() == Type::dict) {
    for (size_t i = 0; i < traces.size(); ++i)
      lists.emplace_back(static_cast<int64_t>(i), traces.value(i));
  } else {
    fail({"host_traces"},
         "is " + std::string(pickle::type_name(traces.type())) + ", expected a list");
  }
  size_t read = 0;
  for (const auto& [i, list] : lists) {
    read += list.size() > 0;
    read_trace(kPinnedHost, list, true, i);
  }
  if (read > 1) {
    std::vector<Entry>& t = traces_[kPinnedHost];
    std::stable_sort(t.begin(), t.end(),
                     [](const Entry& a, const Entry& b) { return a.time_ns < b.time_ns; });
  }
}

// `segments`, or (host) `host_segments`, whose segments are all on kPinnedHost.
void SnapshotReader::read_segments(Ref segments, const char* what, bool host) {
  segments_.reserve(segments_.size() + segments.size());
  for (size_t i = 0; i < segments.size(); ++i) {
    Where w{what, static_cast<int64_t>(i)};
    Ref s = segments[i];
    if (s.type() != Type::dict)
      fail(w, "is " + std::string(pickle::type_name(s.type())) + ", expected a dict");
    Segment seg;
    seg.device =
        host ? kPinnedHost : device_index(integer(required(s, "device", w), "device", w), w);
    seg.addr = unsigned_field(s, "address", w);
    seg.size = unsigned_field(s, "total_size", w);
    seg.stream = stream_field(s, w);
    seg.frames = frames_field(s);
    seg.pool = seg.size == kSmallBuffer ? ev::Pool::small : ev::Pool::large;
    if (auto t = s.get("segment_type")) {
      auto type = t->as_string();
      if (type == "small" || type == "large")
        seg.pool = *type == "small" ? ev::Pool::small : ev::Pool::large;
      else
        notes_.add("segments of an unknown 'segment_type' (pool taken from the size)");
    }
    if (auto e = s.get("is_expandable")) seg.expandable = e->as_bool().value_or(false);
    if (auto p = s.get("segment_pool_id"); p && !p->is_none()) {  // Note [Private pools]
      const bool pair = (p->type() == Type::tuple || p->type() == Type::list) && p->size() == 2;
      const std::optional<int64_t> a = pair ? (*p)[0].as_int() : std::nullopt,
                                   b = pair ? (*p)[1].as_int() : std::nullopt;
      if (a && b)
        seg.pool_id = {*a, *b};
      else
        notes_.add(
            "segments whose 'segment_pool_id' is not a pair of ints (read as the default pool)");
    }
    Ref blocks = required(s, "blocks", w);
    if (blocks.type() != Type::list) fail(w, "'blocks' is not a list");
    count_records(blocks.size(), w);
    uint64_t next = seg.addr;  // PyTorch < 2.1 blocks have no address: they tile the segment
    for (size_t j = 0; j < blocks.size(); ++j) {
      Where bw{what, static_cast<int64_t>(i), -1, "blocks", static_cast<int64_t>(j)};
      Ref b = blocks[j];
      if (b.type() != Type::dict) fail(bw, "is not a dict");
      Block blk;
      blk.addr = b.get("address") ? unsigned_field(b, "address", bw) : next;
      blk.size = unsigned_field(b, "size", bw);
      // PyTorch 2.0 gave a block's request and frames in `history` (newest first).
      std::optional<Ref> first;
      if (auto h = b.get("history"); h && h->size() > 0 && (*h)[0].type() == Type::dict)
        first = (*h)[0];
      if (b.get("requested_size"))
        blk.requested = unsigned_field(b, "requested_size", bw);
      else if (first && first->get("real_size"))
        blk.requested = unsigned_field(*first, "real_size", bw);
      else
        blk.requested = blk.size;
      next = blk.addr + blk.size;
      if (next > kMaxBytes)
        fail(bw,
             "the block ends beyond 2^56 (its address is its segment's plus the sizes before it)");
      Ref state = required(b, "state", bw);
      auto st = state.as_string();
      if (st == "active_allocated") {
        blk.state = BlockState::allocated;
      } else if (st == "active_pending_free" || st == "active_awaiting_free") {
        blk.state = BlockState::pending;
      } else {
        if (st != "inactive") notes_.add("blocks of an unknown 'state' (read as inactive)");
        blk.state = BlockState::inactive;
      }
      blk.frames = b.get("frames") || !first ? frames_field(b) : frames_field(*first);
      if (blk.state != BlockState::inactive) seg.blocks.push_back(blk);
    }
    segments_.push_back(std::move(seg));
  }
}

// A trace entry's fields read without a note or an error; false when one would be needed
// (read_trace then reads the entry and says what is wrong).
bool SnapshotReader::convert_entry(const std::optional<Ref> (&f)[kEntryFields], Entry& entry) {
  auto a = f[kAction]->as_string();
  if (!a) return false;
  entry.action = parse_action(*a);
  if (entry.action == Action::other) return false;
  auto clean_int = [](const std::optional<Ref>& v) -> std::optional<int64_t> {
    if (!v) return std::nullopt;
    if (auto i = v->as_int()) return *i;
    if (v->type() == Type::boolean) return *v->as_bool();
    return std::nullopt;
  };
  auto clean_bytes = [&](const std::optional<Ref>& v) -> std::optional<uint64_t> {
    auto i = clean_int(v);
    if (!i || *i < 0 || static_cast<uint64_t>(*i) > kMaxBytes) return std::nullopt;
    return static_cast<uint64_t>(*i);
  };
  if (f[kTimeUs]) {
    auto t = clean_int(f[kTimeUs]);
    if (!t || *t < 0 || *t > std::numeric_limits<int64_t>::max() / 1000) return false;
    entry.time_ns = static_cast<uint64_t>(*t) * 1000;
    entry.timed = true;
  }
  auto size = clean_bytes(f[kSize]);
  if (!size) return false;
  entry.size = *size;
  if (f[kStream] && !f[kStream]->is_none()) {
    auto st = clean_int(f[kStream]);
    if (!st) return false;
    entry.stream = static_cast<uint64_t>(*st);
  }
  if (entry.action == Action::oom) {
    if (f[kDeviceFree]) {
      auto df = clean_bytes(f[kDeviceFree]);
      if (!df) return false;
      entry.addr = *df;
    }
  } else if (entry.action != Action::snapshot) {
    auto addr = clean_bytes(f[kAddr]);
    if (!addr) return false;
    entry.addr = *addr;
  }
  if (f[kCategory])
    if (auto c = f[kCategory]->as_string())
      for (int k = 0; k <= static_cast<int>(ev::Category::temporary); ++k)
        if (*c == ev::category_name(static_cast<ev::Category>(k)))
          entry.category = static_cast<ev::Category>(k);
  if (f[kFrames] && !f[kFrames]->is_none()) {
    if (f[kFrames]->type() != Type::list && f[kFrames]->type() != Type::tuple) return false;
    entry.frames = run_of(*f[kFrames]);
  }
  auto compile = context_of(f[kCompileContext], true),
       metadata = context_of(f[kUserMetadata], false);
  if (!compile || !metadata) return false;
  entry.compile_context = *compile;
  entry.user_metadata = *metadata;
  return true;
}

// Note [Entry contexts] (snapshot_emitter.h): an entry's `compile_context` or
// `user_metadata`, interned. None for an absent key, None, "" and PyTorch's "N/A" (the
// compile_context of an entry outside any compiled region); nullopt for a value that is not
// a str. The same value is usually one memoized string, so the last one is remembered.
std::optional<ContextId> SnapshotReader::context_of(const std::optional<Ref>& v, bool compile) {
  if (!v || v->is_none()) return ContextId{0};
  if (v->type() != Type::string) return std::nullopt;
  ContextCache& cache = context_cache_[compile ? 0 : 1];
  const uint32_t index = v->val().index;
  if (cache.valid && cache.index == index) return cache.id;
  const std::string_view text = *v->as_string();
  ContextId id = 0;
  if (!text.empty() && !(compile && text == "N/A")) {
    auto [it, fresh] = context_ids_.try_emplace(text, static_cast<ContextId>(contexts_.size()));
    if (fresh) contexts_.push_back(text);
    id = it->second;
  }
  cache = {true, index, id};
  return id;
}

// Device `device`'s trace (device_traces[device]), or a trace of pinned host memory
// (host_traces[index], on kPinnedHost).
void SnapshotReader::read_trace(int device, Ref trace, bool host, int64_t index) {
  const char* what = host ? "host_traces" : "device_traces";
  if (!host) index = device;
  Where tw{what, index};
  if (trace.type() != Type::list) fail(tw, "is not a list");
  if (trace.size() == 0) return;
  if (host)
    device = kPinnedHost;
  else
    device_index(device, tw);
  count_records(trace.size(), tw);
  std::vector<Entry>& out = traces_[device];
  // The usual case: the trace is exactly the entries read while parsing, in order (each dict
  // once): they become the device's trace without a copy.
  if (out.empty() && trace.size() == early_.size()) {
    bool all = true;
    uint64_t untimed = 0;
    for (size_t i = 0; i < trace.size() && all; ++i) {
      const pickle::Val v = trace[i].val();
      all = v.type == Type::dict && v.index < entry_of_dict_.size() && entry_of_dict_[v.index] == i;
      if (all) untimed += !early_[i].timed;
    }
    if (all) {
      untimed_ += untimed;
      out = std::move(early_);
      early_.clear();
      early_home_ = &out;  // another trace naming the same dicts (memo-shared) reads them there
      return;
    }
  }
  out.reserve(out.size() + trace.size());
  for (size_t i = 0; i < trace.size(); ++i) {
    Where w{what, index, static_cast<int64_t>(i)};
    Ref e = trace[i];
    if (e.type() == Type::dict && e.val().index < entry_of_dict_.size() &&
        entry_of_dict_[e.val().index] < early_home_->size()) {
      const Entry early =
          (*early_home_)[entry_of_dict_[e.val().index]];  // a copy: `out` may be its home
      untimed_ += !early.timed;
      out.push_back(early);
      continue;
    }
    if (e.type() != Type::dict) fail(w, "is not a dict");
    // One pass over the entry's items (a later duplicate key wins, as in Python).
    std::optional<Ref> f[kEntryFields];
    for (size_t k = 0; k < e.size(); ++k) {
      int field = entry_field(e.key(k));
      if (field >= 0) f[field] = e.value(k);
    }
    auto need = [&](int field) -> Ref {
      if (!f[field]) fail(w, "no '" + std::string(kEntryFieldNames[field]) + "' field");
      return *f[field];
    };
    Entry entry;
    auto a = need(kAction).as_string();
    if (!a) fail(w, "'action' is not a str");
    entry.action = parse_action(*a);
    if (entry.action == Action::other) {
      notes_.add("entries of an action the importer does not know, such as '" +
                 std::string(a->substr(0, 40)) + "' (skipped)");
      continue;
    }
    if (f[kTimeUs]) {
      int64_t t = integer(*f[kTimeUs], "time_us", w);
      if (t < 0 || t > std::numeric_limits<int64_t>::max() / 1000)
        fail(w, "'time_us' " + std::to_string(t) + " is out of range");
      entry.time_ns = static_cast<uint64_t>(t) * 1000;
      entry.timed = true;
    } else {
      ++untimed_;  // PyTorch before 2.1 wrote no times
    }
    entry.size = bytes(need(kSize), "size", w);
    if (f[kStream] && !f[kStream]->is_none())
      entry.stream = static_cast<uint64_t>(integer(*f[kStream], "stream", w));
    if (entry.action == Action::oom) {
      if (f[kDeviceFree]) entry.addr = bytes(*f[kDeviceFree], "device_free", w);
    } else if (entry.action != Action::snapshot) {
      entry.addr = bytes(need(kAddr), "addr", w);
    }
    if (f[kCategory])
      if (auto c = f[kCategory]->as_string())
        for (int k = 0; k <= static_cast<int>(ev::Category::temporary); ++k)
          if (*c == ev::category_name(static_cast<ev::Category>(k)))
            entry.category = static_cast<ev::Category>(k);
    entry.frames = frames_of(f[kFrames]);
    for (bool compile : {true, false}) {
      const std::optional<ContextId> c =
          context_of(f[compile ? kCompileContext : kUserMetadata], compile);
      if (!c)
        notes_.add(std::string("trace entries whose '") +
                   (compile ? "compile_context" : "user_metadata") +
                   "' is not a str (read as none)");
      (compile ? entry.compile_context : entry.user_metadata) = c.value_or(0);
    }
    out.push_back(entry);
  }
}

int SnapshotReader::entry_field(Ref key) {
  if (key.type() != Type::string) return -1;
  const uint32_t idx = key.val().index;
  for (const auto& [i, field] : key_cache_)
    if (i == idx) return field;
  int field = -1;
  std::string_view k = *key.as_string();
  for (int j = 0; j < kEntryFields; ++j)
    if (k == kEntryFieldNames[j]) field = j;
  if (key_cache_.size() < 64) key_cache_.emplace_back(idx, field);
  return field;
}

// allocator_settings as PyTorch's `key:value,key:value` configuration text. Real settings
// are a few hundred bytes, but the memo lets a pickle name one list at every level of a
// nest (2^40 leaves from 436 bytes), so the text is bounded: settings that render to more
// than kMaxSettingsBytes, or nest deeper than kMaxSettingsDepth, are left out (counted in
// the notes), and replay then assumes PyTorch's defaults, as for a snapshot without them.
void SnapshotReader::read_settings(Ref v) {
  std::string text;
  if (render_settings(v, 0, text)) {
    allocator_settings_ = std::move(text);
  } else {
    notes_.add(
        "'allocator_settings' longer than 64 KiB or nested deeper than 16 levels (left out; "
        "replay assumes PyTorch's defaults)");
  }
}

// Appends `v`'s text to `s`; false once the text passes a bound.
bool SnapshotReader::render_settings(Ref v, int depth, std::string& s) {
  if (depth > kMaxSettingsDepth) return false;
  switch (v.type()) {
    case Type::dict:
      if (depth) s += "{";
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) s += ",";
        if (!render_settings(v.key(i), depth + 1, s)) return false;
        s += ":";
        if (!render_settings(v.value(i), depth + 1, s)) return false;
      }
      if (depth) s += "}";
      break;
    case Type::list:
    case Type::tuple:
      s += "[";
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) s += ",";
        if (!render_settings(v[i], depth + 1, s)) return false;
      }
      s += "]";
      break;
    case Type::string:
      s += *v.as_string();
      break;
    case Type::boolean:
      s += *v.as_bool() ? "True" : "False";
      break;
    default:
      s += v.repr(60);
  }
  return s.size() <= kMaxSettingsBytes;
}

}  // namespace tidemark::importers::snapshot
