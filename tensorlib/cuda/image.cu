// im2col and col2im on the GPU: the unfold behind CUDA convolution and max pooling
// (nn/unfold.cpp). One thread per output element, grid-stride, 64-bit indices; col2im gathers
// the columns each pixel was read by (at most kh*kw), so it needs no atomics and is
// deterministic.
#include "tensorlib/cuda/device_util.cuh"

namespace tl::cuda::kernels {
namespace {

template <typename T>
__global__ void __launch_bounds__(kBlock) im2col_kernel(const T* img, T* cols, Window w, T pad) {
  const int64_t positions = w.out_h * w.out_w;
  const int64_t total = w.batch * w.channels * w.kh * w.kw * positions;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    // i = ((n * C + c) * kh * kw + ki * kw + kj) * positions + oh * out_w + ow
    const int64_t pos = i % positions;
    int64_t rest = i / positions;
    const int64_t kj = rest % w.kw;
    rest /= w.kw;
    const int64_t ki = rest % w.kh;
    const int64_t plane = rest / w.kh;  // n * C + c
    const int64_t oh = pos / w.out_w, ow = pos % w.out_w;
    const int64_t h = oh * w.sh - w.ph + ki * w.dh, x = ow * w.sw - w.pw + kj * w.dw;
    cols[i] = h >= 0 && h < w.height && x >= 0 && x < w.width
                  ? img[(plane * w.height + h) * w.width + x]
                  : pad;
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlock) col2im_kernel(const T* cols, T* img, Window w) {
  const int64_t positions = w.out_h * w.out_w;
  const int64_t total = w.batch * w.channels * w.height * w.width;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    const int64_t x = i % w.width;
    const int64_t h = (i / w.width) % w.height;
    const int64_t plane = i / (w.width * w.height);
    dev_opmath_t<T> acc = 0;
    for (int64_t ki = 0; ki < w.kh; ++ki) {
      const int64_t hh = h + w.ph - ki * w.dh;  // = oh * sh when pixel h is read at row ki
      if (hh < 0 || hh % w.sh != 0 || hh / w.sh >= w.out_h) continue;
      for (int64_t kj = 0; kj < w.kw; ++kj) {
        const int64_t xx = x + w.pw - kj * w.dw;
        if (xx < 0 || xx % w.sw != 0 || xx / w.sw >= w.out_w) continue;
        const int64_t row = (plane * w.kh + ki) * w.kw + kj;
        acc += to_math<dev_opmath_t<T>>(cols[row * positions + (hh / w.sh) * w.out_w + xx / w.sw]);
      }
    }
    img[i] = convert<T>(acc);
  }
}

template <typename F>
cudaError_t dispatch_float(ScalarType dtype, F&& f) {
  switch (dtype) {
    case ScalarType::Float32:
      return f.template operator()<float>();
    case ScalarType::Float64:
      return f.template operator()<double>();
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_im2col(const void* img, void* cols, ScalarType dtype, const Window& w,
                          double pad, cudaStream_t stream) {
  const int64_t total = w.batch * w.channels * w.kh * w.kw * w.out_h * w.out_w;
  if (total == 0) return cudaSuccess;
  return dispatch_float(dtype, [&]<typename T>() {
    im2col_kernel<T><<<grid_for(total), kBlock, 0, stream>>>(static_cast<const T*>(img),
                                                             static_cast<T*>(cols), w, T(pad));
    return cudaGetLastError();
  });
}

cudaError_t launch_col2im(const void* cols, void* img, ScalarType dtype, const Window& w,
                          cudaStream_t stream) {
  const int64_t total = w.batch * w.channels * w.height * w.width;
  if (total == 0) return cudaSuccess;
  return dispatch_float(dtype, [&]<typename T>() {
    col2im_kernel<T><<<grid_for(total), kBlock, 0, stream>>>(static_cast<const T*>(cols),
                                                             static_cast<T*>(img), w);
    return cudaGetLastError();
  });
}

}  // namespace tl::cuda::kernels
