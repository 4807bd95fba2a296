// Scopes, steps and marks: user annotations that travel as events (scope_push / scope_pop,
// step, mark). Header-only like the rest of the contract, so tensorlib (module forwards) and
// user code can annotate without linking the recorder. With no sink installed each costs one
// branch.
#pragma once

#include <atomic>
#include <string>
#include <string_view>

#include "profiler/events/events.h"

namespace tidemark::events {

inline void emit_name(Kind kind, std::string_view name, uint64_t value = 0) noexcept {
  if (!enabled()) return;
  Event e;
  e.kind = kind;
  e.name = {name, value};
  dispatch(e);
}

// RAII scope: `tl::profiler::Scope s("model.layer1");` Allocations made while it is open are
// attributed to it (and to the scopes around it).
class Scope {
 public:
  explicit Scope(std::string_view name) : active_(enabled()) {
    if (!active_) return;
    name_.assign(name);
    emit_name(Kind::scope_push, name_);
  }
  ~Scope() {
    if (active_) emit_name(Kind::scope_pop, name_);
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool active_;
  std::string name_;  // copied only while recording: pop names the scope it closes
};

namespace detail {
inline std::atomic<uint64_t> g_step{0};
}

// Marks an iteration boundary; returns the number of the step that starts (1, 2, ...).
inline uint64_t step() noexcept {
  uint64_t n = detail::g_step.fetch_add(1) + 1;
  emit_name(Kind::step, "", n);
  return n;
}

// A named point in time ("eval starts").
inline void mark(std::string_view name) noexcept {
  emit_name(Kind::mark, name);
}

}  // namespace tidemark::events
