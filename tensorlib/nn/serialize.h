// Saving and loading tensors and module state in the safetensors format
// (https://github.com/huggingface/safetensors, "Format"): an 8-byte little-endian header
// length N, N bytes of JSON mapping each name to {"dtype", "shape", "data_offsets": [begin,
// end]} (offsets into the data that follows the header) plus an optional "__metadata__"
// object of strings, then the tensors' bytes, contiguous and little-endian.
//
// Files written here: keys sorted, the header padded with spaces to a multiple of 8 bytes (so
// the data starts 8-aligned), tensors laid out by decreasing element size, then by name (so
// each is aligned to its element size, as the reference implementation does). Files read
// here are checked as the reference implementation checks them; every error names the file
// and the problem. dtypes: F64, F32, F16, BF16, I64, I32, U8 and BOOL map to tensorlib's;
// I16 and I8, which tensorlib lacks, load widened to int32.
#pragma once

#include <map>
#include <string>

#include "tensorlib/core/tensor.h"
#include "tensorlib/nn/module.h"

namespace tl::nn {

// Writes `tensors` (any device, layout or dtype tensorlib has) to `path`. The file is
// written under a temporary name in the same directory and renamed over `path` when
// complete, so a failure never leaves a half-written file.
void save_safetensors(const std::map<std::string, Tensor>& tensors, const std::string& path,
                      const std::map<std::string, std::string>& metadata = {});

// Reads every tensor of the file (CPU tensors); `metadata`, when given, receives
// "__metadata__" (empty when absent).
std::map<std::string, Tensor> load_safetensors(
    const std::string& path, std::map<std::string, std::string>* metadata = nullptr);

// module.state_dict() (parameters and buffers) to `path`, with metadata {"format": "pt"}:
// names and layouts are PyTorch's, so safetensors.torch.load_file reads it.
void save(const Module& module, const std::string& path);
// Loads `path` into `module` (load_state_dict): a missing or unexpected key or a shape
// mismatch is an error naming the file and the key.
void load(Module& module, const std::string& path);

}  // namespace tl::nn
