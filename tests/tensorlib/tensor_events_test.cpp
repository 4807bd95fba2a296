// Storage and tensor births and deaths reach the installed sinks, in order, with the fields
// the profiler relies on (ids, base tensor, creating op, sizes).
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include <tensorlib/tensorlib.h>

namespace {

namespace ev = tidemark::events;

struct Seen {
  ev::Kind kind;
  uint64_t tensor_id = 0, storage_id = 0, base_id = 0, addr = 0, size = 0;
  std::string op;
  std::vector<int64_t> sizes, strides;
};

class RecordingSink final : public ev::Sink {
 public:
  void on_event(const ev::Event& e) noexcept override {
    std::lock_guard<std::mutex> lock(mu);
    Seen s{e.kind};
    switch (e.kind) {
      case ev::Kind::tensor_create:
      case ev::Kind::tensor_release:
        s.tensor_id = e.tensor.tensor_id;
        s.storage_id = e.tensor.storage_id;
        s.base_id = e.tensor.base_id;
        s.op = std::string(e.tensor.op);
        s.sizes.assign(e.tensor.sizes.begin(), e.tensor.sizes.end());
        s.strides.assign(e.tensor.strides.begin(), e.tensor.strides.end());
        break;
      case ev::Kind::storage_create:
      case ev::Kind::storage_release:
        s.storage_id = e.storage.storage_id;
        s.addr = e.storage.addr;
        s.size = e.storage.nbytes;
        break;
      case ev::Kind::alloc:
      case ev::Kind::free_requested:
      case ev::Kind::free_completed:
        s.addr = e.block.addr;
        s.size = e.block.requested_size;
        break;
      case ev::Kind::scope_push:
      case ev::Kind::scope_pop:
        s.op = std::string(e.name.name);
        break;
      case ev::Kind::sync:
        s.op = std::string(ev::sync_kind_name(e.sync.kind));
        s.size = e.sync.duration_ns;
        break;
      default:
        break;
    }
    seen.push_back(s);
  }
  std::vector<ev::Kind> kinds() const {
    std::vector<ev::Kind> k;
    for (auto& s : seen) k.push_back(s.kind);
    return k;
  }
  std::mutex mu;
  std::vector<Seen> seen;
};

class TensorEvents : public ::testing::Test {
 protected:
  void SetUp() override {
    tl::zeros({1});  // the small pool's first segment is now cached: no segment_alloc below
    ASSERT_TRUE(ev::add_sink(&sink));
  }
  void TearDown() override { ev::remove_sink(&sink); }
  RecordingSink sink;
};

TEST_F(TensorEvents, ATensorsLifeIsAllocStorageTensorThenTheReverse) {
  {
    tl::Tensor a = tl::zeros({4, 8});  // 128 bytes
    ASSERT_EQ(sink.seen.size(), 3u);
    EXPECT_EQ(sink.kinds(), (std::vector<ev::Kind>{ev::Kind::alloc, ev::Kind::storage_create,
                                                   ev::Kind::tensor_create}));
    EXPECT_EQ(sink.seen[0].size, 128u);
    EXPECT_EQ(sink.seen[0].addr, reinterpret_cast<uint64_t>(a.data_ptr()));
    EXPECT_EQ(sink.seen[1].addr, sink.seen[0].addr);
    EXPECT_EQ(sink.seen[2].op, "zeros");
    EXPECT_EQ(sink.seen[2].tensor_id, a.id());
    EXPECT_EQ(sink.seen[2].storage_id, a.storage()->id());
    EXPECT_EQ(sink.seen[2].sizes, (std::vector<int64_t>{4, 8}));
    EXPECT_EQ(sink.seen[2].base_id, 0u);
    sink.seen.clear();
  }
  EXPECT_EQ(sink.kinds(),
            (std::vector<ev::Kind>{ev::Kind::tensor_release, ev::Kind::storage_release,
                                   ev::Kind::free_requested, ev::Kind::free_completed}));
}

TEST_F(TensorEvents, ViewsAreTensorsOnTheSameStorageWithTheirBase) {
  tl::Tensor a = tl::ones({3, 5});
  sink.seen.clear();
  tl::Tensor t = a.t();
  tl::Tensor n = t.narrow(0, 1, 2);
  ASSERT_EQ(sink.kinds(),
            (std::vector<ev::Kind>{ev::Kind::tensor_create, ev::Kind::tensor_create}));
  EXPECT_EQ(sink.seen[0].op, "transpose");
  EXPECT_EQ(sink.seen[0].base_id, a.id());
  EXPECT_EQ(sink.seen[0].storage_id, a.storage()->id());
  EXPECT_EQ(sink.seen[0].strides, (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(sink.seen[1].op, "narrow");
  EXPECT_EQ(sink.seen[1].base_id, a.id());  // the root, not the intermediate view
  sink.seen.clear();
  a = tl::Tensor();
  t = tl::Tensor();
  // The narrow view keeps the storage (and the root tensor) alive: no frees yet.
  EXPECT_EQ(sink.kinds(), (std::vector<ev::Kind>{ev::Kind::tensor_release}));
  sink.seen.clear();
  n = tl::Tensor();
  EXPECT_EQ(sink.kinds(),
            (std::vector<ev::Kind>{ev::Kind::tensor_release, ev::Kind::tensor_release,
                                   ev::Kind::storage_release, ev::Kind::free_requested,
                                   ev::Kind::free_completed}));
}

TEST_F(TensorEvents, EventsCarryIncreasingSequenceNumbers) {
  struct SeqSink final : ev::Sink {
    void on_event(const ev::Event& e) noexcept override {
      if (last && e.seq <= last) ordered = false;
      last = e.seq;
      ts_ok = ts_ok && e.ts_ns > 0 && e.thread_id > 0;
    }
    uint64_t last = 0;
    bool ordered = true, ts_ok = true;
  } seq;
  ev::add_sink(&seq);
  for (int i = 0; i < 10; ++i) tl::Tensor x = tl::rand({16}) + 1;
  ev::remove_sink(&seq);
  EXPECT_TRUE(seq.ordered);
  EXPECT_TRUE(seq.ts_ok);
}

TEST(TensorEventsNoSink, NothingIsDeliveredWithoutASink) {
  EXPECT_FALSE(ev::enabled());
  RecordingSink sink;
  tl::Tensor a = tl::ones({2});
  EXPECT_TRUE(sink.seen.empty());
}

// Note [Sync points on the CPU]: item() is a sync of kind `item` on every backend, one per call,
// on the tensor's device; other reads (data_ptr) are not.
TEST_F(TensorEvents, ItemIsASyncPoint) {
  tl::Tensor loss = tl::full({}, 2.5);
  sink.seen.clear();
  double total = 0;
  for (int i = 0; i < 3; ++i) total += loss.item<double>();
  EXPECT_EQ(total, 7.5);
  (void)loss.data_ptr<float>();
  ASSERT_EQ(sink.seen.size(), 3u);
  for (const Seen& s : sink.seen) {
    EXPECT_EQ(s.kind, ev::Kind::sync);
    EXPECT_EQ(s.op, "item");
    EXPECT_LT(s.size, 1'000'000'000u);  // a duration in ns, not a timestamp
  }
}

// The autograd engine runs inside a scope named "backward" ("backward(retain_graph)" when the
// graph is kept), so traces show where backward ran.
TEST_F(TensorEvents, BackwardRunsInANamedScope) {
  tl::Tensor w = tl::ones({4}).requires_grad_();
  auto scopes = [&] {
    std::vector<std::string> v;
    for (const Seen& s : sink.seen)
      if (s.kind == ev::Kind::scope_push)
        v.push_back("push " + s.op);
      else if (s.kind == ev::Kind::scope_pop)
        v.push_back("pop " + s.op);
    return v;
  };
  tl::Tensor loss = (w * 2).sum();
  sink.seen.clear();
  loss.backward({}, /*retain_graph=*/true);
  EXPECT_EQ(scopes(), (std::vector<std::string>{"push backward(retain_graph)",
                                                "pop backward(retain_graph)"}));
  sink.seen.clear();
  loss.backward();
  EXPECT_EQ(scopes(), (std::vector<std::string>{"push backward", "pop backward"}));
}

}  // namespace
