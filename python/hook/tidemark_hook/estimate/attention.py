"""Note [Attention backends]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
`F.scaled_dot_product_attention` picks its kernel by the device's choice function; the meta
device has none, so it always takes the math path, which keeps the whole B x H x L x S attention
matrix;
a card runs flash or memory-efficient attention, which keep only the output and a logsumexp
(B x H x L, float32), so an estimate on the math path would be high by the matrix (a small GPT's
15.4 GB instead of 10.8 GB). So the choice is made as the card makes it (aten's sdp_utils, the
default order flash, memory-efficient, math; each backend as the program left it enabled with
torch.backends.cuda / sdpa_kernel), and the chosen backend's aten operator runs, with its meta
kernel and its autograd formula (install() replaces F.scaled_dot_product_attention):
* flash: compute capability 8.0 or later, float16 or bfloat16, no attention mask, a head
  dimension of at most 256 and a multiple of 8, query, key and value of the same head dimension;
* memory-efficient: compute capability 5.0 or later (bfloat16: 8.0), float16, bfloat16 or
  float32, a head dimension that is a multiple of 16 bytes' worth of elements;
* math otherwise.
What a kernel allocates inside the call is allocated around its outputs: flash attention's
backward takes a float32 accumulator for dQ (B x L' x H x D', L rounded up to 128 and D to 32,
or to 64 above 128) and the softmax's row sums (B x H x L'), freed when it returns.
"""


def choose(torch, gpu, args, kwargs):
    """The backend number (torch.nn.attention.SDPBackend) the card would run for these
    arguments of aten._fused_sdp_choice."""
    q, k, v = args[:3]
    mask = args[3] if len(args) > 3 else kwargs.get("attn_mask")
    backends = torch.backends.cuda
    dtype = q.dtype
    d = q.shape[-1]
    same_dims = k.shape[-1] == d and v.shape[-1] == d
    if backends.flash_sdp_enabled() and gpu.major >= 8 and dtype in (torch.float16, torch.bfloat16) \
            and mask is None and d <= 256 and d % 8 == 0 and same_dims and q.dim() == 4:
        return 1  # FLASH_ATTENTION
    if backends.mem_efficient_sdp_enabled() and gpu.major >= 5 and q.dim() == 4:
        ok_dtype = dtype in (torch.float16, torch.float32) or (dtype == torch.bfloat16 and gpu.major >= 8)
        alignment = 16 // q.element_size()
        if ok_dtype and d % alignment == 0 and v.shape[-1] % alignment == 0:
            return 2  # EFFICIENT_ATTENTION
    return 0  # MATH


def round_up(x, m):
    return (x + m - 1) // m * m


def flash_backward_temporaries(args):
    """Bytes of the float32 dQ accumulator and row sums flash attention's backward allocates
    (Note [Attention backends]) for aten._scaled_dot_product_flash_attention_backward's
    arguments (grad_out, query, ...), query B x H x L x D."""
    q = args[1]
    b, h, l, d = q.shape
    l_rounded = round_up(l, 128)
    d_rounded = round_up(d, 32 if d <= 128 else 64)
    return [4 * b * l_rounded * h * d_rounded, 4 * b * h * l_rounded]


def install(torch, gpu, notes, device):
    """F.scaled_dot_product_attention, running the backend the card would choose."""
    F = torch.nn.functional
    real = F.scaled_dot_product_attention
    names = ("math", "flash attention", "memory-efficient attention")

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
             enable_gqa=False):
        if enable_gqa or not all(isinstance(t, torch.Tensor) and device.is_gpu(t)
                                 for t in (query, key, value)):
            return real(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                        is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
        if torch.is_autocast_enabled("cuda"):  # CUDA autocast lists it: run in its dtype
            dtype = torch.get_autocast_dtype("cuda")
            query, key, value = (t.to(dtype) if t.dtype.is_floating_point and t.dtype != dtype
                                 else t for t in (query, key, value))
        backend = choose(torch, gpu, (query, key, value, attn_mask), {})
        notes.emulated("attention backend", f"{names[backend]} as the card chooses")
        aten = torch.ops.aten
        if backend == 1:
            return aten._scaled_dot_product_flash_attention(
                query, key, value, dropout_p, is_causal, False, scale=scale)[0]
        if backend == 2:
            grad = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
            return aten._scaled_dot_product_efficient_attention(
                query, key, value, attn_mask, grad, dropout_p, is_causal, scale=scale)[0]
        return real(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                    is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)

    F.scaled_dot_product_attention = sdpa
