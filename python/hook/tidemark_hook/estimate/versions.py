"""What depends on the torch version and on the card, in one place (docs/estimate.md, "Tables").

Each table says where its numbers come from. A torch outside SUPPORTED is refused: the fake
device reaches into torch's internals (the dispatcher's Python mode, storages' weak references,
torch.accelerator), which change between versions.
"""

# The torch versions the estimate runs on: (major, minor) from, to (both included). Tested on
# the last; the earlier ones share every internal the fake device uses.
SUPPORTED = ((2, 6), (2, 15))


def torch_version(torch):
    """(major, minor) of the torch imported."""
    parts = torch.__version__.split("+")[0].split(".")
    return int(parts[0]), int(parts[1])


def unsupported(torch):
    """Why this torch cannot be estimated, or None."""
    v = torch_version(torch)
    if SUPPORTED[0] <= v <= SUPPORTED[1]:
        return None
    lo, hi = (".".join(map(str, x)) for x in SUPPORTED)
    return (f"torch {torch.__version__} is not supported by tidemark estimate (supported: "
            f"{lo} to {hi}); install one of those into the environment the script runs in")


MiB = 1 << 20


class Gpu:
    """A card as torch.cuda.get_device_properties() describes it, and what its libraries take."""

    def __init__(self, name, total_memory, major, minor, multi_processor_count):
        self.name = name
        self.total_memory = total_memory
        self.major = major
        self.minor = minor
        self.multi_processor_count = multi_processor_count

    @property
    def cublas_workspace(self):
        """Bytes of the cuBLAS workspace PyTorch allocates through the caching allocator for each
        cuBLAS handle (one per thread that runs matmuls on the device): CUBLAS_WORKSPACE_CONFIG's
        default, ":4096:2:16:8" (4096 KiB twice and 16 KiB eight times: 8,519,680 bytes), and on
        Hopper and later ":4096:8" (32 MiB) -- at::cuda::getChosenWorkspaceSize."""
        return 32 * MiB if self.major >= 9 else 4096 * 1024 * 2 + 16 * 1024 * 8


# Cards by the name --gpu takes (case and spaces ignored), with the memory torch reports for
# them (cudaGetDeviceProperties' totalGlobalMem).
GPUS = {
    "a100-40gb": Gpu("NVIDIA A100-SXM4-40GB", 42298834944, 8, 0, 108),
    "a100-80gb": Gpu("NVIDIA A100-SXM4-80GB", 85094825984, 8, 0, 108),
    "h100-80gb": Gpu("NVIDIA H100 80GB HBM3", 84929347584, 9, 0, 132),
    "h200": Gpu("NVIDIA H200", 150106046464, 9, 0, 132),
    "l4": Gpu("NVIDIA L4", 23580639232, 8, 9, 58),
    "l40s": Gpu("NVIDIA L40S", 47697362944, 8, 9, 142),
    "a10g": Gpu("NVIDIA A10G", 23609475072, 8, 6, 80),
    "rtx-4090": Gpu("NVIDIA GeForce RTX 4090", 25386352640, 8, 9, 128),
    "rtx-3090": Gpu("NVIDIA GeForce RTX 3090", 25438126080, 8, 6, 82),
    "t4": Gpu("Tesla T4", 15828320256, 7, 5, 40),
    "v100-32gb": Gpu("Tesla V100-SXM2-32GB", 34089730048, 7, 0, 80),
}
DEFAULT_GPU = "a100-80gb"


def gpu(name, capacity=0):
    """The card named (GPUS), with `capacity` bytes of memory instead of its own when given."""
    key = (name or DEFAULT_GPU).lower().replace(" ", "-").replace("_", "-")
    if key not in GPUS:
        raise ValueError(f"--gpu {name}: not a card the estimate knows ({', '.join(GPUS)})")
    g = GPUS[key]
    if capacity:
        g = Gpu(g.name, capacity, g.major, g.minor, g.multi_processor_count)
    return g


# The aten operators that run on cuBLAS (or cuBLASLt) and so take the calling thread's handle
# and its workspace.
CUBLAS_OPS = frozenset({
    "mm", "addmm", "bmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "vdot", "_addmm_activation",
    "_scaled_mm", "_int_mm",
})

# CUDA autocast's operator lists (aten/src/ATen/autocast_mode.cpp, AutocastCUDA), the same from
# 2.6 to 2.15 for what a training script calls. `lower`: run in the autocast dtype; `fp32`: run
# in float32; `fp32_opt`: reductions run in float32 unless given a dtype; `promote`: the widest
# input type.
AUTOCAST_LOWER = frozenset({
    "_convolution", "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "convolution", "prelu", "addmm", "addmv", "addr",
    "matmul", "einsum", "mm", "mv", "linalg_vecdot", "linear", "addbmm", "baddbmm", "bmm",
    "chain_matmul", "linalg_multi_dot", "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell",
    "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell", "_scaled_dot_product_flash_attention",
    "scaled_dot_product_attention", "__matmul__", "__rmatmul__",
})
AUTOCAST_FP32 = frozenset({
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm", "native_layer_norm",
    "group_norm", "frobenius_norm", "nuclear_norm", "cosine_similarity", "poisson_nll_loss",
    "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div",
    "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss",
    "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
    "cross_entropy", "cross_entropy_loss", "__pow__", "__rpow__",
})
AUTOCAST_FP32_OPT = frozenset({
    "prod", "softmax", "log_softmax", "cumprod", "cumsum", "linalg_vector_norm",
    "linalg_matrix_norm", "sum", "norm",
})
AUTOCAST_PROMOTE = frozenset({
    "addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sampler", "index_put",
    "scatter_add", "tensordot", "cat", "stack", "vdot",
})
