#include "tensorlib/core/memory_category.h"

#include "tensorlib/core/tensor.h"

namespace tl {

void set_memory_category(const Tensor& t, MemoryCategory category) {
  namespace ev = tidemark::events;
  if (!t.defined()) return;
  t.storage()->set_memory_category(category);
  if (!ev::enabled() || !t.storage()->data()) return;
  ev::Event e;
  e.kind = ev::Kind::category;
  e.device = t.device().event_id();
  e.category = {reinterpret_cast<uint64_t>(t.storage()->data()), category};
  ev::dispatch(e);
}

MemoryCategory memory_category(const Tensor& t) {
  return t.defined() ? t.storage()->memory_category() : MemoryCategory::unknown;
}

}  // namespace tl
