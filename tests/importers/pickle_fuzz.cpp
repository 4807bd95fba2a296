// libFuzzer target: the pickle reader, then the snapshot importer's interpretation of whatever
// parsed, into a writer that keeps nothing. Any input must end in a value or an ImportError:
// no crash, no sanitizer report, no leak; and a reader that replaces equal dicts must read it as
// the plain reader does (the parser drops what was replaced). Built by scripts/fuzz-pickle.sh
// (clang, -fsanitize=fuzzer,address,undefined); not part of tidemark_importers.
#include <cstddef>
#include <cstdint>
#include <string>

#include "first_of_each_content.h"
#include "profiler/importers/pytorch_snapshot.h"
#include "profiler/pickle/pickle.h"
#include "profiler/store/trace_writer.h"

namespace {

namespace st = tidemark::store;

class NullWriter final : public st::TraceWriter {
 public:
  void append(const tidemark::events::Event& e, uint64_t stack_id) override {
    // Touch what a real writer reads.
    sink_ += e.ts_ns + e.seq + stack_id + static_cast<uint64_t>(e.kind);
  }
  void add_stack_node(uint64_t id, uint64_t parent, uint64_t ip) override {
    sink_ += id ^ parent ^ ip;
  }
  void add_modules(const std::vector<st::ModuleInfo>&) override {}
  void add_dropped(uint64_t, uint64_t) override {}
  void commit() override {}
  void close(uint64_t) override {}
  uint64_t sink_ = 0;
};

namespace pk = tidemark::importers::pickle;

// What a pickle reads as (or the error it fails with).
std::string reading(const std::string& bytes, pk::AppendHook* hook) {
  try {
    return pk::parse(bytes, {}, hook).root().repr(1 << 16);
  } catch (const pk::PickleError& e) {
    return std::string("error: ") + e.what();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  pk::testing::FirstOfEachContent hook;
  if (reading(bytes, nullptr) != reading(bytes, &hook) || hook.empty_drops) __builtin_trap();
  try {
    NullWriter writer;
    st::SymbolizeFn symbolize;
    uint64_t end = 0;
    tidemark::importers::detail::convert_pytorch_snapshot(
        std::move(bytes), "fuzz", [&](const st::TraceMeta&) -> st::TraceWriter& { return writer; },
        &symbolize, &end);
    if (symbolize) (void)symbolize(1);
  } catch (const tidemark::importers::ImportError&) {
  }
  return 0;
}
