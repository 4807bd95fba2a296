#include "interpose/nvtx_inject.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "profiler/events/events.h"

namespace ev = tidemark::events;

// The opaque handles NVTX hands back to the program: ours, never freed (a handle may be used
// until the process ends).
struct nvtxDomainRegistration_st {
  uint64_t id;
  std::string name;
};
struct nvtxStringRegistration_st {
  std::string text;
};

namespace tidemark::interpose::nvtx {

namespace {

struct Registry {
  std::mutex mu;
  std::deque<nvtxDomainRegistration_st> domains;
  std::deque<nvtxStringRegistration_st> strings;
  struct Range {
    std::string name;
    uint64_t domain;
    uint64_t start_ns;
  };
  std::unordered_map<nvtxRangeId_t, Range> ranges;  // started, not yet ended
  std::atomic<nvtxRangeId_t> next_range{1};
};

Registry& registry() {
  static auto* r = new Registry;  // never destroyed: NVTX calls may come during exit
  return *r;
}

// Per thread and domain, the names of the ranges pushed and not yet popped.
thread_local std::unordered_map<uint64_t, std::vector<std::string>>* t_stacks = nullptr;
std::vector<std::string>& stack_of(uint64_t domain) {
  if (!t_stacks) t_stacks = new std::unordered_map<uint64_t, std::vector<std::string>>;
  return (*t_stacks)[domain];
}

uint64_t domain_id(nvtxDomainHandle_t d) {
  return d ? d->id : 0;
}

std::string utf8(const wchar_t* w) {
  std::string out;
  for (; w && *w; ++w) {
    auto c = static_cast<uint32_t>(*w);
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xc0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xe0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (c & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (c & 0x3f));
    }
  }
  return out;
}

std::string message(const nvtxEventAttributes_t* a) {
  if (!a) return {};
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return a->message.ascii ? a->message.ascii : "";
    case NVTX_MESSAGE_TYPE_UNICODE:
      return utf8(a->message.unicode);
    case NVTX_MESSAGE_TYPE_REGISTERED:
      return a->message.registered ? a->message.registered->text : "";
    default:
      return {};
  }
}

// The text of an NVTX argument, built where no exception can leave for NVTX's (C) caller: ""
// when it cannot be built.
std::string text(const char* s) noexcept {
  try {
    return s ? s : "";
  } catch (...) {
    return {};
  }
}
std::string text(const wchar_t* w) noexcept {
  try {
    return utf8(w);
  } catch (...) {
    return {};
  }
}
std::string text(const nvtxEventAttributes_t* a) noexcept {
  try {
    return message(a);
  } catch (...) {
    return {};
  }
}

void emit(ev::Kind kind, std::string_view name, uint64_t value, uint64_t ts = 0) {
  if (!ev::enabled()) return;
  ev::Event e;
  e.kind = kind;
  e.ts_ns = ts;
  e.name.name = name;
  e.name.value = value;
  ev::dispatch(e);
}

// Note [Step ranges]
// A program recorded by injection marks its iterations with NVTX ranges
// (`torch.cuda.nvtx.range_push("step")`, or ranges named `ProfilerStep#12`): each start of a
// range named TIDEMARK_STEP_RANGE ("step" when unset, `tidemark record --step-range`; empty:
// none) also emits a `step` event, so steps, per-step growth, leaks by step and `tidemark
// watch` work as for a tensorlib program. The name matches exactly, or followed by a number,
// optionally after one of `#`, ` `, `_`, `:` or `-` (`step 3`, `ProfilerStep#12`): the number
// is the step's; without one the steps are numbered 1, 2, ... in the order they start.
struct StepRanges {
  std::string name = "step";
  std::atomic<uint64_t> counter{0};
  StepRanges() {
    if (const char* env = std::getenv("TIDEMARK_STEP_RANGE")) name = env;
  }
};
StepRanges& step_ranges() {
  static auto* s = new StepRanges;  // never destroyed, as the registry
  return *s;
}

// The step number a range of this name starts, or 0 when it is not a step range.
uint64_t step_number(std::string_view range) noexcept {
  StepRanges& s = step_ranges();
  if (s.name.empty() || range.substr(0, s.name.size()) != s.name) return 0;
  std::string_view rest = range.substr(s.name.size());
  if (rest.empty()) return s.counter.fetch_add(1) + 1;
  if (rest.size() > 1 && std::string_view("# _:-").find(rest.front()) != std::string_view::npos)
    rest.remove_prefix(1);
  uint64_t n = 0;
  for (char c : rest) {
    if (c < '0' || c > '9' || n > (UINT64_MAX - 9) / 10) return 0;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return rest.empty() ? 0 : n;
}

// A step event at the start of a step range (`ts` 0: now).
void maybe_step(std::string_view range, uint64_t ts = 0) noexcept {
  if (!ev::enabled()) return;
  if (const uint64_t n = step_number(range)) emit(ev::Kind::step, range, n, ts);
}

// ---- Handlers (C ABI: nothing may throw out of them) ------------------------------------------

int push(uint64_t domain, std::string name) noexcept {
  try {
    auto& stack = stack_of(domain);
    maybe_step(name);
    emit(ev::Kind::scope_push, name, domain);
    stack.push_back(std::move(name));
    return static_cast<int>(stack.size()) - 1;
  } catch (...) {
    return -1;
  }
}

int pop(uint64_t domain) noexcept {
  try {
    auto& stack = stack_of(domain);
    if (stack.empty()) return -1;
    emit(ev::Kind::scope_pop, stack.back(), domain);
    stack.pop_back();
    return static_cast<int>(stack.size());
  } catch (...) {
    return -1;
  }
}

void mark(uint64_t domain, const std::string& name) noexcept {
  emit(ev::Kind::mark, name, domain);
}

// Start/end ranges need not nest and may end on another thread: both ends are emitted when
// the range ends, the push stamped with its start time.
nvtxRangeId_t start(uint64_t domain, std::string name) noexcept {
  try {
    Registry& r = registry();
    nvtxRangeId_t id = r.next_range.fetch_add(1);
    uint64_t now = ev::now_ns();
    maybe_step(name, now);
    std::lock_guard<std::mutex> lock(r.mu);
    r.ranges.emplace(id, Registry::Range{std::move(name), domain, now});
    return id;
  } catch (...) {
    return 0;
  }
}

void end(nvtxRangeId_t id) noexcept {
  try {
    Registry& r = registry();
    Registry::Range range;
    {
      std::lock_guard<std::mutex> lock(r.mu);
      auto it = r.ranges.find(id);
      if (it == r.ranges.end()) return;
      range = std::move(it->second);
      r.ranges.erase(it);
    }
    emit(ev::Kind::scope_push, range.name, range.domain, range.start_ns);
    emit(ev::Kind::scope_pop, range.name, range.domain);
  } catch (...) {
  }
}

void name_category(uint64_t domain, uint32_t category, const std::string& name) noexcept {
  try {
    emit(ev::Kind::mark,
         "nvtx_category:" + std::to_string(domain) + ":" + std::to_string(category) + ":" + name,
         category);
  } catch (...) {
  }
}

void NVTX_API MarkEx(const nvtxEventAttributes_t* a) {
  mark(0, text(a));
}
void NVTX_API MarkA(const char* m) {
  mark(0, text(m));
}
void NVTX_API MarkW(const wchar_t* m) {
  mark(0, text(m));
}
nvtxRangeId_t NVTX_API RangeStartEx(const nvtxEventAttributes_t* a) {
  return start(0, text(a));
}
nvtxRangeId_t NVTX_API RangeStartA(const char* m) {
  return start(0, text(m));
}
nvtxRangeId_t NVTX_API RangeStartW(const wchar_t* m) {
  return start(0, text(m));
}
void NVTX_API RangeEnd(nvtxRangeId_t id) {
  end(id);
}
int NVTX_API RangePushEx(const nvtxEventAttributes_t* a) {
  return push(0, text(a));
}
int NVTX_API RangePushA(const char* m) {
  return push(0, text(m));
}
int NVTX_API RangePushW(const wchar_t* m) {
  return push(0, text(m));
}
int NVTX_API RangePop() {
  return pop(0);
}
void NVTX_API NameCategoryA(uint32_t c, const char* n) {
  name_category(0, c, text(n));
}
void NVTX_API NameCategoryW(uint32_t c, const wchar_t* n) {
  name_category(0, c, text(n));
}

void NVTX_API DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  mark(domain_id(d), text(a));
}
nvtxRangeId_t NVTX_API DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return start(domain_id(d), text(a));
}
void NVTX_API DomainRangeEnd(nvtxDomainHandle_t, nvtxRangeId_t id) {
  end(id);
}
int NVTX_API DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return push(domain_id(d), text(a));
}
int NVTX_API DomainRangePop(nvtxDomainHandle_t d) {
  return pop(domain_id(d));
}
void NVTX_API DomainNameCategoryA(nvtxDomainHandle_t d, uint32_t c, const char* n) {
  name_category(domain_id(d), c, text(n));
}
void NVTX_API DomainNameCategoryW(nvtxDomainHandle_t d, uint32_t c, const wchar_t* n) {
  name_category(domain_id(d), c, text(n));
}

nvtxStringHandle_t register_string(std::string text) noexcept {
  try {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (auto& s : r.strings)
      if (s.text == text) return &s;
    r.strings.push_back({std::move(text)});
    return &r.strings.back();
  } catch (...) {
    return nullptr;
  }
}
nvtxStringHandle_t NVTX_API DomainRegisterStringA(nvtxDomainHandle_t, const char* s) {
  return register_string(text(s));
}
nvtxStringHandle_t NVTX_API DomainRegisterStringW(nvtxDomainHandle_t, const wchar_t* s) {
  return register_string(text(s));
}

// A domain is named once in the trace: a mark "nvtx_domain:<name>" whose value is the id its
// scopes and marks carry.
nvtxDomainHandle_t create_domain(std::string name) noexcept {
  try {
    Registry& r = registry();
    nvtxDomainHandle_t d;
    {
      std::lock_guard<std::mutex> lock(r.mu);
      for (auto& existing : r.domains)
        if (existing.name == name) return &existing;
      r.domains.push_back({r.domains.size() + 1, std::move(name)});
      d = &r.domains.back();
    }
    emit(ev::Kind::mark, "nvtx_domain:" + d->name, d->id);
    return d;
  } catch (...) {
    return nullptr;
  }
}
nvtxDomainHandle_t NVTX_API DomainCreateA(const char* n) {
  return create_domain(text(n));
}
nvtxDomainHandle_t NVTX_API DomainCreateW(const wchar_t* n) {
  return create_domain(text(n));
}
void NVTX_API DomainDestroy(nvtxDomainHandle_t) {}  // handles stay valid: ids are not reused

template <typename F>
void put(NvtxFunctionTable table, unsigned size, unsigned id, F fn) {
  if (id < size && table[id]) *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

}  // namespace

int initialize(NvtxGetExportTableFunc_t get_export_table) noexcept {
  if (!get_export_table) return 0;
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (!callbacks || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) ||
      !callbacks->GetModuleFunctionTable)
    return 0;
  NvtxFunctionTable core = nullptr, core2 = nullptr;
  unsigned core_size = 0, core2_size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) || !core ||
      !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size) || !core2)
    return 0;
  put(core, core_size, NVTX_CBID_CORE_MarkEx, MarkEx);
  put(core, core_size, NVTX_CBID_CORE_MarkA, MarkA);
  put(core, core_size, NVTX_CBID_CORE_MarkW, MarkW);
  put(core, core_size, NVTX_CBID_CORE_RangeStartEx, RangeStartEx);
  put(core, core_size, NVTX_CBID_CORE_RangeStartA, RangeStartA);
  put(core, core_size, NVTX_CBID_CORE_RangeStartW, RangeStartW);
  put(core, core_size, NVTX_CBID_CORE_RangeEnd, RangeEnd);
  put(core, core_size, NVTX_CBID_CORE_RangePushEx, RangePushEx);
  put(core, core_size, NVTX_CBID_CORE_RangePushA, RangePushA);
  put(core, core_size, NVTX_CBID_CORE_RangePushW, RangePushW);
  put(core, core_size, NVTX_CBID_CORE_RangePop, RangePop);
  put(core, core_size, NVTX_CBID_CORE_NameCategoryA, NameCategoryA);
  put(core, core_size, NVTX_CBID_CORE_NameCategoryW, NameCategoryW);
  put(core2, core2_size, NVTX_CBID_CORE2_DomainMarkEx, DomainMarkEx);
  put(core2, core2_size, NVTX_CBID_CORE2_DomainRangeStartEx, DomainRangeStartEx);
  put(core2, core2_size, NVTX_CBID_CORE2_DomainRangeEnd, DomainRangeEnd);
  put(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, DomainRangePushEx);
  put(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, DomainRangePop);
  put(core2, core2_size, NVTX_CBID_CORE2_DomainNameCategoryA, DomainNameCategoryA);
  put(core2, core2_size, NVTX_CBID_CORE2_DomainNameCategoryW, DomainNameCategoryW);
  put(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, DomainRegisterStringA);
  put(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringW, DomainRegisterStringW);
  put(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, DomainCreateA);
  put(core2, core2_size, NVTX_CBID_CORE2_DomainCreateW, DomainCreateW);
  put(core2, core2_size, NVTX_CBID_CORE2_DomainDestroy, DomainDestroy);
  return 1;
}

}  // namespace tidemark::interpose::nvtx
