// ExpectNoLeaks and ExpectPeakBelow (tidemark/testing.h).
//
// Note [One sink for every guard]
// events::remove_sink() does not wait for emitters that already loaded the sink pointer, so a
// sink that lives on a test's stack could be called after its destructor ran. Guards therefore
// never install themselves: one process-wide forwarding sink, never destroyed, is installed
// while at least one guard is alive and hands events to the registered guards under a mutex. A
// guard unregisters under that mutex, after which no thread can reach it; a late call to the
// forwarding sink finds no guard and returns.
#include "tidemark/testing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "profiler/naming/site_rule.h"
#include "profiler/naming/units.h"
#include "profiler/record/stacks.h"

namespace tidemark::testing {

namespace ev = events;

namespace {

// A watcher of events, called with the registry's mutex held. `ips` is the emitting thread's
// stack (innermost first) for alloc and tensor_create while a guard wants stacks.
class Watcher {
 public:
  virtual ~Watcher() = default;
  virtual void on_event(const ev::Event& e, const uint64_t* ips, int n) = 0;
  virtual int stack_depth() const { return 0; }
};

class Registry {
 public:
  static Registry& get() {
    static Registry* r = new Registry;  // never destroyed: Note [One sink for every guard]
    return *r;
  }

  std::mutex& mutex() { return mu_; }

  // Returns false when every sink slot is taken (nothing is watched then).
  bool add(Watcher* w) {
    std::lock_guard lock(mu_);
    watchers_.push_back(w);
    update_depth();
    if (!installed_) installed_ = ev::add_sink(&sink_);
    if (!installed_) {
      watchers_.pop_back();
      update_depth();
    }
    return installed_;
  }

  void remove(Watcher* w) {
    std::lock_guard lock(mu_);
    auto it = std::find(watchers_.begin(), watchers_.end(), w);
    if (it == watchers_.end()) return;
    watchers_.erase(it);
    update_depth();
    if (watchers_.empty() && installed_) {
      ev::remove_sink(&sink_);
      installed_ = false;
    }
  }

 private:
  class ForwardingSink final : public ev::Sink {
   public:
    explicit ForwardingSink(Registry& r) : r_(r) {}
    void on_event(const ev::Event& e) noexcept override { r_.forward(e); }

   private:
    Registry& r_;
  };

  Registry() : sink_(*this) {}

  static bool watched(ev::Kind k) {
    switch (k) {
      case ev::Kind::alloc:
      case ev::Kind::free_requested:
      case ev::Kind::storage_create:
      case ev::Kind::storage_release:
      case ev::Kind::tensor_create:
      case ev::Kind::tensor_release:
        return true;
      default:
        return false;
    }
  }

  [[gnu::noinline]] void forward(const ev::Event& e) noexcept {
    if (!watched(e.kind)) return;
    uint64_t ips[record::kMaxStackDepth];
    int n = 0;
    int depth = depth_.load(std::memory_order_relaxed);
    // Captured before taking the lock; skips this frame and the sink's.
    if (depth > 0 && (e.kind == ev::Kind::alloc || e.kind == ev::Kind::tensor_create))
      n = record::capture_stack(ips, depth, 2);
    try {
      std::lock_guard lock(mu_);
      for (Watcher* w : watchers_) w->on_event(e, ips, n);
    } catch (...) {
      // Out of memory while bookkeeping: a sink must not throw (events.h). The guard misses
      // this event; an allocation it missed is never reported as a leak.
    }
  }

  void update_depth() {
    int d = 0;
    for (Watcher* w : watchers_) d = std::max(d, w->stack_depth());
    depth_.store(std::min(d, record::kMaxStackDepth), std::memory_order_relaxed);
  }

  std::mutex mu_;
  std::vector<Watcher*> watchers_;
  std::atomic<int> depth_{0};
  bool installed_ = false;
  ForwardingSink sink_;
};

// (device, address): how the allocator events name a block.
using BlockKey = std::pair<int, uint64_t>;
BlockKey block_key(ev::DeviceId d, uint64_t addr) {
  return {static_cast<int>(d.type) * 256 + d.index, addr};
}

struct BlockKeyHash {
  size_t operator()(const BlockKey& k) const noexcept {
    return std::hash<uint64_t>()(k.second ^ (static_cast<uint64_t>(k.first) << 56));
  }
};

// "4096 bytes (4.00 KiB)"
std::string bytes_text(int64_t bytes) {
  std::string s = std::to_string(bytes) + " bytes";
  if (bytes >= 1024) s += " (" + analysis::format_bytes(bytes) + ")";
  return s;
}

// ---- Allocation sites ---------------------------------------------------------------------

// Note [Allocation site]'s test of a frame (profiler/naming/site_rule.h), by function and
// module only: a user's tests may well live under a directory named "profiler".
bool is_internal(const store::ResolvedFrame& f) {
  return analysis::is_library_frame(f, /*by_path=*/false);
}

// GoogleTest's own frames end a printed stack.
bool is_test_runner(const store::ResolvedFrame& f) {
  return analysis::qualified_name(f.function).starts_with("testing::");
}

std::string frame_text(const store::ResolvedFrame& f) {
  std::string s = f.function.empty() ? "??" : f.function;
  if (!f.file.empty()) s += " at " + f.file + ":" + std::to_string(f.line);
  return s;
}

// Symbolizes the stacks of one report, each address once.
class SiteNamer {
 public:
  explicit SiteNamer(int frames_shown)
      : symbolizer_(record::read_modules()), frames_shown_(std::max(frames_shown, 1)) {}

  // "      f() at file:line\n" lines: from the allocation site outwards.
  std::string describe(const std::vector<uint64_t>& ips) {
    if (ips.empty()) return "      (no stack captured: NoLeaksOptions::stack_depth is 0)\n";
    std::vector<store::ResolvedFrame> frames;
    for (uint64_t ip : ips) {
      const auto& fs = resolve(ip);
      if (fs.empty()) frames.push_back({"", "", 0, false, hex(ip)});
      frames.insert(frames.end(), fs.begin(), fs.end());
    }
    size_t site = 0;
    while (site < frames.size() && (frames[site].function.empty() || is_internal(frames[site])))
      ++site;
    if (site == frames.size()) site = 0;  // all internal: show the innermost
    std::string out;
    int shown = 0;
    for (size_t i = site; i < frames.size() && shown < frames_shown_; ++i) {
      if (is_test_runner(frames[i])) break;
      out += "      " + (frames[i].function.empty() ? frames[i].module : frame_text(frames[i]));
      out += "\n";
      ++shown;
    }
    return out;
  }

 private:
  static std::string hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
  }
  const std::vector<store::ResolvedFrame>& resolve(uint64_t ip) {
    auto it = cache_.find(ip);
    if (it == cache_.end()) it = cache_.emplace(ip, symbolizer_.resolve(ip)).first;
    return it->second;
  }

  record::Symbolizer symbolizer_;
  int frames_shown_;
  std::unordered_map<uint64_t, std::vector<store::ResolvedFrame>> cache_;
};

}  // namespace

// ---- ExpectNoLeaks ------------------------------------------------------------------------

struct ExpectNoLeaks::State final : Watcher {
  struct Block {
    ev::DeviceId device;
    uint64_t addr = 0, size = 0, requested = 0, seq = 0;
    std::vector<uint64_t> ips;
  };
  struct Tensor {
    ev::DeviceId device;
    uint64_t id = 0, storage_id = 0, base_id = 0, seq = 0;
    std::vector<int64_t> sizes;
    std::string dtype, op;
    std::vector<uint64_t> ips;
  };

  NoLeaksOptions options;
  uint64_t thread = 0;  // Threads::this_thread: the creating thread
  std::unordered_map<BlockKey, Block, BlockKeyHash> blocks;
  std::unordered_map<uint64_t, Tensor> tensors;
  // Storages born inside the scope: which block each one owns, and its size.
  std::unordered_map<uint64_t, std::pair<BlockKey, uint64_t>> storages;

  int stack_depth() const override { return options.stack_depth; }

  bool counts(const ev::Event& e) const { return thread == 0 || e.thread_id == thread; }

  void on_event(const ev::Event& e, const uint64_t* ips, int n) override {
    switch (e.kind) {
      case ev::Kind::alloc:
        if (counts(e)) {
          Block& b = blocks[block_key(e.device, e.block.addr)];
          b = {e.device,     e.block.addr,
               e.block.size, e.block.requested_size,
               e.seq,        std::vector<uint64_t>(ips, ips + n)};
        }
        break;
      case ev::Kind::free_requested:
        blocks.erase(block_key(e.device, e.block.addr));
        break;
      case ev::Kind::storage_create:
        storages[e.storage.storage_id] = {block_key(e.device, e.storage.addr), e.storage.nbytes};
        break;
      case ev::Kind::storage_release:
        storages.erase(e.storage.storage_id);
        break;
      case ev::Kind::tensor_create:
        if (counts(e)) {
          Tensor& t = tensors[e.tensor.tensor_id];
          t = {e.device,
               e.tensor.tensor_id,
               e.tensor.storage_id,
               e.tensor.base_id,
               e.seq,
               std::vector<int64_t>(e.tensor.sizes.begin(), e.tensor.sizes.end()),
               std::string(e.tensor.dtype),
               std::string(e.tensor.op),
               std::vector<uint64_t>(ips, ips + n)};
        }
        break;
      case ev::Kind::tensor_release:
        tensors.erase(e.tensor.tensor_id);
        break;
      default:
        break;
    }
  }
};

ExpectNoLeaks::ExpectNoLeaks(NoLeaksOptions options, std::source_location where)
    : state_(std::make_shared<State>()), where_(where) {
  options.stack_depth = std::clamp(options.stack_depth, 0, record::kMaxStackDepth);
  state_->options = options;
  if (options.threads == Threads::this_thread) state_->thread = ev::current_thread_id();
  if (!Registry::get().add(state_.get())) {
    ADD_FAILURE_AT(where_.file_name(), static_cast<int>(where_.line()))
        << "ExpectNoLeaks: every event sink slot (" << ev::kMaxSinks
        << ") is taken, so this scope is not checked";
  }
}

ExpectNoLeaks::~ExpectNoLeaks() {
  Registry::get().remove(state_.get());
  std::string message;
  try {
    message = report();
  } catch (const std::exception& e) {
    // Symbolizing failed: still fail the test, without sites.
    message = "ExpectNoLeaks: " + std::to_string(live_tensors()) + " tensors and " +
              std::to_string(live_blocks()) +
              " blocks allocated inside this scope are still "
              "alive at its end (naming their sites failed: " +
              e.what() + ")";
  }
  if (!message.empty())
    ADD_FAILURE_AT(where_.file_name(), static_cast<int>(where_.line())) << message;
}

size_t ExpectNoLeaks::live_tensors() const {
  std::lock_guard lock(Registry::get().mutex());
  return state_->tensors.size();
}

size_t ExpectNoLeaks::live_blocks() const {
  std::lock_guard lock(Registry::get().mutex());
  return state_->blocks.size();
}

uint64_t ExpectNoLeaks::live_bytes() const {
  std::lock_guard lock(Registry::get().mutex());
  uint64_t total = 0;
  for (const auto& [key, b] : state_->blocks) total += b.size;
  return total;
}

std::string ExpectNoLeaks::report() const {
  std::vector<State::Block> blocks;
  std::vector<State::Tensor> tensors;
  std::unordered_map<uint64_t, std::pair<BlockKey, uint64_t>> storages;
  {
    std::lock_guard lock(Registry::get().mutex());
    for (const auto& [key, b] : state_->blocks) blocks.push_back(b);
    for (const auto& [id, t] : state_->tensors) tensors.push_back(t);
    storages = state_->storages;
  }
  if (blocks.empty() && tensors.empty()) return {};
  auto by_seq = [](const auto& a, const auto& b) { return a.seq < b.seq; };
  std::sort(blocks.begin(), blocks.end(), by_seq);
  std::sort(tensors.begin(), tensors.end(), by_seq);

  // A block behind a live tensor is described with the tensor.
  std::map<BlockKey, const State::Block*> live_blocks;
  for (const State::Block& b : blocks) live_blocks[block_key(b.device, b.addr)] = &b;
  std::map<BlockKey, bool> owned;
  uint64_t total = 0;
  for (const State::Block& b : blocks) total += b.size;

  SiteNamer namer(state_->options.frames_shown);
  std::string items;
  for (const State::Tensor& t : tensors) {
    items += "  tensor #" + std::to_string(t.id) + " " + t.dtype + " [";
    for (size_t i = 0; i < t.sizes.size(); ++i)
      items += (i ? ", " : "") + std::to_string(t.sizes[i]);
    items += "]";
    if (t.base_id != 0) items += " (a view of tensor #" + std::to_string(t.base_id) + ")";
    items += " from " + (t.op.empty() ? std::string("?") : t.op) + " on " +
             analysis::device_name(t.device);
    auto st = storages.find(t.storage_id);
    if (t.base_id != 0) {
      // Its base is listed too when it was created here; either way the block is the base's.
      auto blk = st == storages.end() ? live_blocks.end() : live_blocks.find(st->second.first);
      if (blk != live_blocks.end()) owned[blk->first] = true;
    } else if (st != storages.end()) {
      auto blk = live_blocks.find(st->second.first);
      if (blk != live_blocks.end()) {
        owned[blk->first] = true;
        items += ", " + std::to_string(st->second.second) + " bytes in block of " +
                 std::to_string(blk->second->size) + " bytes";
      }
    }
    items += ", created at:\n" + namer.describe(t.ips);
  }
  for (const State::Block& b : blocks) {
    if (owned.count(block_key(b.device, b.addr))) continue;
    char addr[24];
    std::snprintf(addr, sizeof addr, "0x%llx", static_cast<unsigned long long>(b.addr));
    items += std::string("  block ") + addr + " of " + std::to_string(b.size) + " bytes (" +
             std::to_string(b.requested) + " requested) on " + analysis::device_name(b.device) +
             ", allocated at:\n" + namer.describe(b.ips);
  }

  std::string head = "ExpectNoLeaks: ";
  auto count = [](size_t n, const char* what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  if (!tensors.empty()) head += count(tensors.size(), "tensor");
  if (!tensors.empty() && blocks.size() > 0) head += " and ";
  if (!blocks.empty()) head += count(blocks.size(), "block");
  head += " allocated inside this scope " +
          std::string(tensors.size() + blocks.size() == 1 ? "is" : "are") +
          " still alive at its end";
  if (total > 0) head += " (" + bytes_text(static_cast<int64_t>(total)) + " in blocks)";
  head += ":\n";
  std::string message = head + items;
  while (!message.empty() && message.back() == '\n') message.pop_back();
  return message;
}

// ---- ExpectPeakBelow ----------------------------------------------------------------------

struct ExpectPeakBelow::State final : Watcher {
  struct Device {
    ev::DeviceId id;
    int64_t current = 0, peak = 0;
    uint64_t peak_alloc_size = 0;  // the allocation that reached the peak
  };

  uint64_t thread = 0;  // Threads::this_thread: the creating thread
  std::map<int, Device> devices;
  // Threads::this_thread: the blocks of that thread, so only their frees count.
  std::unordered_set<BlockKey, BlockKeyHash> own_blocks;

  Device& device(ev::DeviceId id) {
    Device& d = devices[block_key(id, 0).first];
    d.id = id;
    return d;
  }

  // Allocated memory, as Note [Memory curves] (profiler/events/events.h) folds it; with
  // Threads::this_thread, of that thread's blocks only.
  void on_event(const ev::Event& e, const uint64_t*, int) override {
    const int64_t by = ev::curve_delta(e).allocated;
    if (by == 0) return;
    if (thread != 0 && !own(e)) return;
    Device& d = device(e.device);
    d.current += by;
    if (by > 0 && d.current > d.peak) {
      d.peak = d.current;
      d.peak_alloc_size = e.block.size;
    }
  }
  // Whether an allocated-memory change is of a block the creating thread allocated.
  bool own(const ev::Event& e) {
    const BlockKey key = block_key(e.device, e.block.addr);
    if (e.kind == ev::Kind::alloc) {
      if (e.thread_id != thread) return false;
      own_blocks.insert(key);
      return true;
    }
    return own_blocks.erase(key) > 0;
  }
};

ExpectPeakBelow::ExpectPeakBelow(uint64_t limit_bytes, PeakOptions options,
                                 std::source_location where)
    : state_(std::make_shared<State>()), limit_(limit_bytes), where_(where) {
  if (options.threads == Threads::this_thread) state_->thread = ev::current_thread_id();
  if (!Registry::get().add(state_.get())) {
    ADD_FAILURE_AT(where_.file_name(), static_cast<int>(where_.line()))
        << "ExpectPeakBelow: every event sink slot (" << ev::kMaxSinks
        << ") is taken, so this scope is not checked";
  }
}

ExpectPeakBelow::~ExpectPeakBelow() {
  Registry::get().remove(state_.get());
  std::string message;
  for (const auto& [key, d] : state_->devices) {
    if (d.peak <= 0 || static_cast<uint64_t>(d.peak) <= limit_) continue;
    message += "ExpectPeakBelow: allocated memory on " + analysis::device_name(d.id) +
               " peaked at " + bytes_text(d.peak) +
               " above its level at the start of the scope, over the limit of " +
               bytes_text(static_cast<int64_t>(limit_)) + " by " +
               bytes_text(d.peak - static_cast<int64_t>(limit_)) +
               "; the allocation that reached the peak was " +
               bytes_text(static_cast<int64_t>(d.peak_alloc_size)) + "\n";
  }
  if (!message.empty())
    ADD_FAILURE_AT(where_.file_name(), static_cast<int>(where_.line())) << message;
}

int64_t ExpectPeakBelow::peak_bytes(ev::DeviceId device) const {
  std::lock_guard lock(Registry::get().mutex());
  auto it = state_->devices.find(block_key(device, 0).first);
  return it == state_->devices.end() ? 0 : it->second.peak;
}

int64_t ExpectPeakBelow::peak_bytes() const {
  std::lock_guard lock(Registry::get().mutex());
  int64_t peak = 0;
  for (const auto& [key, d] : state_->devices) peak = std::max(peak, d.peak);
  return peak;
}

int64_t ExpectPeakBelow::current_bytes(ev::DeviceId device) const {
  std::lock_guard lock(Registry::get().mutex());
  auto it = state_->devices.find(block_key(device, 0).first);
  return it == state_->devices.end() ? 0 : it->second.current;
}

}  // namespace tidemark::testing
