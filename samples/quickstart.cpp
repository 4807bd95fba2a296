// The README's 20-line example, built so it stays true.
#include <tensorlib/tensorlib.h>
#include <iostream>

int main() {
  tl::manual_seed(0);
  tl::Tensor x = tl::randn({64, 128});  // float32, on the CPU
  tl::Tensor w = tl::randn({128, 10}, tl::kFloat32);
  tl::Tensor logits = tl::matmul(x, w) + tl::ones({10});  // broadcasting
  tl::Tensor probs = logits.softmax(1);
  tl::Tensor first = probs[0];  // a view: no copy
  std::cout << first.is_view() << " " << probs.sum(1).mean().item<float>() << "\n";

  tl::Tensor t = x.t();  // strides {1, 128}, shares storage
  std::cout << t.is_contiguous() << " " << t.reshape({-1}).is_view() << "\n";  // 0 0: copied

  std::cout << "allocated " << tl::memory_allocated() << " B, reserved " << tl::memory_reserved()
            << " B\n";
  probs = logits = tl::Tensor();  // blocks go back to the cache
  tl::empty_cache();              // and segments to the system
  std::cout << tl::memory_stats()["reserved_bytes.all.peak"] << "\n";
}
