// The compression of the trace's blobs (event blocks, memory_lod chunks): Note [Compressed
// blobs] in compress.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tidemark::store::detail {

// The most a stored blob may expand to. The writer's blocks and the chunks stay far below it
// (tens of KiB); a damaged or hostile frame that claims more is refused before anything is
// allocated.
inline constexpr size_t kMaxBlobBytes = size_t{64} << 20;

// One zstd frame holding `raw`, with its size in the frame header.
std::vector<uint8_t> compress(std::span<const uint8_t> raw);

// The content of the single zstd frame `stored`, into `out` (replaced). Throws StoreError
// "<what>: corrupt <kind> (<reason>)" when `stored` is not exactly one frame that states its
// size, that size is over kMaxBlobBytes, or the data does not decode to that size.
void decompress(std::span<const uint8_t> stored, std::vector<uint8_t>& out,
                const std::string& what, const char* kind);

}  // namespace tidemark::store::detail
