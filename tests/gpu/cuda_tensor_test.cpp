// CUDA tensors: allocation through the caching allocator, copies both ways with their memcpy
// and sync events, item(), pinned memory, fills, streams and events with measured waits, and
// the clear errors of the ops CUDA does not support. The last test runs where there is no
// device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "gpu_test_util.h"
#include "tensorlib/core/memory.h"
#include "tensorlib/cuda/cuda.h"
#include "tensorlib/tensorlib.h"

namespace tl {
namespace {

using gpu_test::EventLog;
using gpu_test::ev::CopyDirection;
using gpu_test::ev::Kind;
using gpu_test::ev::SyncKind;

const Device kGpu("cuda:0");

void sleep_on(const cuda::Stream& s, int ms) {
  static int delay;
  delay = ms;
  ASSERT_EQ(cudaLaunchHostFunc(
                static_cast<cudaStream_t>(s.native()),
                [](void* d) {
                  std::this_thread::sleep_for(std::chrono::milliseconds(*static_cast<int*>(d)));
                },
                &delay),
            cudaSuccess);
}

TEST(CudaTensor, EmptyAllocatesThroughTheCachingAllocator) {
  TL_REQUIRE_GPU();
  EventLog log;
  const int64_t before = memory_allocated(kGpu);
  {
    Tensor t = empty({1024}, TensorOptions().device("cuda"));
    EXPECT_TRUE(t.is_cuda());
    EXPECT_EQ(memory_allocated(kGpu) - before, 4096);
    auto allocs = log.of(Kind::alloc);
    ASSERT_FALSE(allocs.empty());
    EXPECT_EQ(allocs.back().device.type, gpu_test::ev::DeviceType::cuda);
  }
  EXPECT_EQ(memory_allocated(kGpu), before);
}

TEST(CudaTensor, CopiesBothWaysWithEvents) {
  TL_REQUIRE_GPU();
  Tensor h = arange(12, TensorOptions().dtype(kFloat32)).reshape({3, 4});
  EventLog log;
  Tensor d = h.to(kGpu);
  Tensor back = d.cpu();
  EXPECT_TRUE(equal(back, h));
  auto copies = log.of(Kind::memcpy);
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].memcpy.direction, CopyDirection::host_to_device);
  EXPECT_EQ(copies[0].memcpy.bytes, 48u);
  EXPECT_FALSE(copies[0].memcpy.pinned);
  EXPECT_EQ(copies[1].memcpy.direction, CopyDirection::device_to_host);
  EXPECT_FALSE(copies[1].memcpy.async);
  auto syncs = log.of(Kind::sync);
  ASSERT_EQ(syncs.size(), 1u);
  EXPECT_EQ(syncs[0].sync.kind, SyncKind::copy_to_host);
  EXPECT_GT(syncs[0].sync.duration_ns, 0u);
  Tensor d2 = empty({3, 4}, TensorOptions().device(kGpu));
  d2.copy_(d);  // device to device
  EXPECT_TRUE(equal(d2.cpu(), h));
  EXPECT_EQ(log.of(Kind::memcpy)[2].memcpy.direction, CopyDirection::device_to_device);
}

TEST(CudaTensor, StridedAndConvertingCopiesRunOnTheDevice) {
  TL_REQUIRE_GPU();
  Tensor h = arange(12, TensorOptions().dtype(kFloat32)).reshape({3, 4});
  Tensor d = h.to(kGpu);
  {
    EventLog log;  // device to device: a kernel, no transfer through the host
    Tensor t = d.t().contiguous();
    Tensor i = d.to(kInt64);
    EXPECT_TRUE(log.of(Kind::memcpy).empty());
    EXPECT_TRUE(log.of(Kind::sync).empty());
    EXPECT_TRUE(equal(t.cpu(), h.t().contiguous()));
    EXPECT_TRUE(equal(i.cpu(), h.to(kInt64)));
  }
  EXPECT_TRUE(equal(d.t().cpu(), h.t()));                // non-contiguous source
  EXPECT_TRUE(equal(d.to(kInt64).cpu(), h.to(kInt64)));  // dtype on the device
  Tensor dst = zeros({4, 3}, TensorOptions().device(kGpu));
  dst.t().copy_(h);  // non-contiguous destination
  EXPECT_TRUE(equal(dst.cpu(), h.t().contiguous()));
  Tensor col = zeros({3, 4}, TensorOptions().device(kGpu));
  col.select(1, 2).copy_(h.select(1, 0));  // a strided column only
  Tensor expect = zeros({3, 4});
  expect.select(1, 2).copy_(h.select(1, 0));
  EXPECT_TRUE(equal(col.cpu(), expect));
}

TEST(CudaTensor, ItemIsASyncPoint) {
  TL_REQUIRE_GPU();
  Tensor d = full({1}, 7.5, TensorOptions().device(kGpu));
  EventLog log;
  EXPECT_EQ(d.item().to<double>(), 7.5);
  auto syncs = log.of(Kind::sync);
  ASSERT_EQ(syncs.size(), 1u);
  EXPECT_EQ(syncs[0].sync.kind, SyncKind::item);
  EXPECT_EQ(syncs[0].device.type, gpu_test::ev::DeviceType::cuda);
  ASSERT_EQ(log.of(Kind::memcpy).size(), 1u);
  EXPECT_EQ(log.of(Kind::memcpy)[0].memcpy.direction, CopyDirection::device_to_host);
}

TEST(CudaTensor, FillsAndFactories) {
  TL_REQUIRE_GPU();
  const auto opts = TensorOptions().device(kGpu);
  EXPECT_TRUE(equal(zeros({5}, opts).cpu(), zeros({5})));
  EXPECT_TRUE(equal(ones({2, 3}, opts).cpu(), ones({2, 3})));
  EXPECT_TRUE(equal(full({4}, 2.5, opts).cpu(), full({4}, 2.5)));
  Tensor t = ones({4, 4}, opts);
  t.t().zero_();  // strided fill (staged)
  EXPECT_TRUE(equal(t.cpu(), zeros({4, 4})));
}

TEST(CudaTensor, PinnedMemoryAndNonBlockingCopies) {
  TL_REQUIRE_GPU();
  Tensor h = arange(1 << 20, TensorOptions().dtype(kFloat32));
  EXPECT_FALSE(h.is_pinned());
  Tensor p = h.pin_memory();
  EXPECT_TRUE(p.is_pinned());
  EXPECT_TRUE(equal(p, h));
  EventLog log;
  Tensor d = cuda::to(p, kGpu, /*non_blocking=*/true);
  auto copies = log.of(Kind::memcpy);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_TRUE(copies[0].memcpy.pinned);
  EXPECT_TRUE(copies[0].memcpy.async);
  EXPECT_TRUE(log.of(Kind::sync).empty());
  cuda::current_stream().synchronize();
  EXPECT_TRUE(equal(d.cpu(), h));
  EXPECT_GT(cuda::pinned_memory_stats().reserved_bytes, 0);
}

TEST(CudaTensor, DataLoaderPinsBatches) {
  TL_REQUIRE_GPU();
  auto ds = std::make_shared<data::TensorDataset>(randn({8, 3}), arange(8));
  data::DataLoaderOptions o;
  o.batch_size = 4;
  o.pin_memory = true;
  data::DataLoader loader(ds, o);
  for (auto& b : loader) {
    EXPECT_TRUE(b.data.is_pinned());
    EXPECT_TRUE(b.target.is_pinned());
  }
}

TEST(CudaTensor, StreamEventAndDeviceSyncsAreMeasured) {
  TL_REQUIRE_GPU();
  EventLog log;
  cuda::Stream s = cuda::get_stream_from_pool(kGpu);
  EXPECT_NE(s.id(), 0u);
  {
    cuda::StreamGuard guard(s);
    EXPECT_EQ(cuda::current_stream(kGpu), s);
  }
  EXPECT_EQ(cuda::current_stream(kGpu).id(), 0u);
  cuda::Event start, end;
  start.record(s);
  sleep_on(s, 50);
  end.record(s);
  end.synchronize();
  EXPECT_GE(start.elapsed_time(end), 45.0f);
  sleep_on(s, 50);
  s.synchronize();
  sleep_on(s, 50);
  cuda::synchronize(kGpu);
  auto syncs = log.of(Kind::sync);
  ASSERT_EQ(syncs.size(), 3u);
  EXPECT_EQ(syncs[0].sync.kind, SyncKind::event);
  EXPECT_EQ(syncs[1].sync.kind, SyncKind::stream);
  EXPECT_EQ(syncs[1].sync.stream, s.id());
  EXPECT_EQ(syncs[2].sync.kind, SyncKind::device);
  for (const auto& e : syncs) EXPECT_GE(e.sync.duration_ns, 40'000'000u);
}

TEST(CudaTensor, RecordStreamDefersTheFree) {
  TL_REQUIRE_GPU();
  cuda::Stream side = cuda::get_stream_from_pool(kGpu);
  const int64_t active0 = memory_stats(kGpu)["active_bytes.all.current"];
  {
    Tensor t = empty({1 << 10}, TensorOptions().device(kGpu));
    sleep_on(side, 200);
    cuda::record_stream(t, side);
  }
  EXPECT_EQ(memory_stats(kGpu)["active_bytes.all.current"] - active0, 4096);
  side.synchronize();
  synchronize(kGpu);  // tl::synchronize: completes the deferred frees
  EXPECT_EQ(memory_stats(kGpu)["active_bytes.all.current"], active0);
}

TEST(CudaTensor, OpsWithoutKernelsFailClearly) {
  TL_REQUIRE_GPU();
  auto expect_error = [](const std::function<void()>& f, const std::string& text) {
    try {
      f();
      ADD_FAILURE() << "expected tl::Error containing: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  Tensor flags = ones({2, 2}, TensorOptions(kBool).device(kGpu));
  expect_error([&] { (void)flags.matmul(flags); }, "not implemented for 'bool' tensors");
  Tensor cpu_side = ones({2, 2});
  expect_error(
      [&] {
        (void)cpu_side.matmul(ones({2, 2}, TensorOptions().device(kGpu)));
      },
      "Expected all tensors to be on the same device");
}

// Runs everywhere: without a device the backend answers with clear errors, never aborts.
TEST(CudaBackendWithoutDevice, ErrorsAreClear) {
  if (gpu_test::has_cuda_device()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(cuda::is_available());
  EXPECT_EQ(cuda::device_count(), 0);
  try {
    (void)empty({4}, TensorOptions().device("cuda"));
    FAIL() << "expected tl::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA device cuda:0 is not available"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)ones({2}).pin_memory(), Error);
  EXPECT_FALSE(ones({2}).is_pinned());
  data::DataLoaderOptions o;
  o.batch_size = 2;
  o.pin_memory = true;  // no effect without a device
  data::DataLoader loader(std::make_shared<data::TensorDataset>(ones({4, 2}), arange(4)), o);
  for (auto& b : loader) EXPECT_FALSE(b.data.is_pinned());
}

}  // namespace
}  // namespace tl
