#include "tensorlib/nn/unfold.h"

#include "tensorlib/autograd/function.h"
#include "tensorlib/autograd/grad_mode.h"
#include "tensorlib/nn/image_util.h"

namespace tl::nn::detail {

Tensor unfold2d(const Tensor& input, const tl::detail::Window2d& w, double pad) {
  TL_INTERNAL_ASSERT(input.is_cuda() && input.dim() == 4);
  const tl::detail::CudaKernels* k = tl::detail::cuda_kernels();
  Tensor cols;
  {
    NoGradGuard no_grad;
    const Tensor x = input.contiguous();
    cols = empty({w.batch, w.channels * w.kh * w.kw, w.out_h * w.out_w}, x.options());
    k->im2col(cols, x, w, pad);
  }
  autograd::record(cols, "Unfold2d", {&input}, {},
                   [w, k](const autograd::variable_list& g, const autograd::variable_list&) {
                     check_no_double_backward("unfold2d");
                     const Tensor gc = g[0].contiguous();
                     Tensor gi = empty({w.batch, w.channels, w.height, w.width}, gc.options());
                     k->col2im(gi, gc, w);
                     return autograd::variable_list{gi};
                   });
  return cols;
}

}  // namespace tl::nn::detail
