#include "profiler/store/compress.h"

#include <zstd.h>

#include "profiler/store/trace_format.h"

namespace tidemark::store::detail {

// Note [Compressed blobs]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Since schema 5 every `event_blocks.data` and `memory_lod.data` is one zstd frame
// (RFC 8878) of the encoding docs/trace-format.md describes, at zstd's level 1. The varint
// deltas leave runs that repeat from event to event (the same stack, size and stream for
// every step's allocations); zstd takes them out. Measured on a Fashion-MNIST recording (821k
// events): event blocks 9.67 MB -> 2.2-2.4 MB, curve chunks 3.2 MB -> 0.72 MB (1.13 MB in
// chunks of 512 rows instead of 2048); level 1 compresses at about 200 MB/s on one core here
// and was as small as level 3 (zlib's level 1: 4.09 MB for the blocks, at a fifth of the
// speed).
//
// Each frame states its content size, so a reader allocates once, and a frame that claims
// more than kMaxBlobBytes or does not decode to exactly its size is a damaged trace, said
// with the blob's name: a trace is hostile input like any other file (a frame of a few bytes
// can claim gigabytes).

std::vector<uint8_t> compress(std::span<const uint8_t> raw) {
  std::vector<uint8_t> out(ZSTD_compressBound(raw.size()));
  const size_t n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), 1);
  if (ZSTD_isError(n)) throw StoreError(std::string("zstd: ") + ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

void decompress(std::span<const uint8_t> stored, std::vector<uint8_t>& out,
                const std::string& what, const char* kind) {
  auto fail = [&](const std::string& reason) -> void {
    throw StoreError(what + ": corrupt " + kind + " (" + reason + ")");
  };
  const unsigned long long size = ZSTD_getFrameContentSize(stored.data(), stored.size());
  if (size == ZSTD_CONTENTSIZE_ERROR) fail("not a zstd frame");
  if (size == ZSTD_CONTENTSIZE_UNKNOWN) fail("zstd frame without its size");
  if (size > kMaxBlobBytes)
    fail("claims " + std::to_string(size) + " bytes, more than " + std::to_string(kMaxBlobBytes));
  const size_t frame = ZSTD_findFrameCompressedSize(stored.data(), stored.size());
  if (ZSTD_isError(frame)) fail(std::string("zstd: ") + ZSTD_getErrorName(frame));
  if (frame != stored.size()) fail("bytes after the zstd frame");
  out.resize(static_cast<size_t>(size));
  const size_t n = ZSTD_decompress(out.data(), out.size(), stored.data(), stored.size());
  if (ZSTD_isError(n)) fail(std::string("zstd: ") + ZSTD_getErrorName(n));
  if (n != size) fail("decodes to " + std::to_string(n) + " of " + std::to_string(size) + " bytes");
}

}  // namespace tidemark::store::detail
