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

// Whether a frame carries zstd's content checksum: every frame since schema 7 does (Note
// [Compressed blobs]); schemas 5 and 6 wrote frames without.
enum class Checksum { none, required };

// One zstd frame holding `raw`, with its size in the frame header and, `required`, the
// checksum of its content after it.
std::vector<uint8_t> compress(std::span<const uint8_t> raw, Checksum checksum = Checksum::required);

// The content of the single zstd frame `stored`, into `out` (replaced). Throws StoreError
// "<what>: corrupt <kind> (<reason>)" when `stored` is not exactly one frame that states its
// size, that size is over kMaxBlobBytes, the data does not decode to that size, or the
// content does not match the frame's checksum; with `required`, a frame without a checksum
// is refused too (a flipped bit in its header must not switch the check off).
void decompress(std::span<const uint8_t> stored, std::vector<uint8_t>& out, const std::string& what,
                const char* kind, Checksum checksum);

}  // namespace tidemark::store::detail
