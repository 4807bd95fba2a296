#include "profiler/store/compress.h"

#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <new>

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
//
// Since schema 7 every frame also ends with zstd's content checksum (the low 32 bits of the
// content's XXH64), which the decoder verifies. Without it a flipped bit inside a frame often
// decodes to other events that look valid: of 150 one-bit flips in a real trace's blocks, 19
// did, and every command accepted them. A reader of a schema-7 file also refuses a frame
// whose header has lost the checksum flag, so no single flip turns the check off. The
// checksum costs 4 bytes a frame; its time is within noise (a 256 KiB block at level 1 here:
// 286-289 MB/s with it, 287-300 MB/s without).

std::vector<uint8_t> compress(std::span<const uint8_t> raw, Checksum checksum) {
  // One compression context per thread: making one per call cost more than the level-1
  // compression of a small block.
  struct Context {
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    ~Context() { ZSTD_freeCCtx(cctx); }
  };
  thread_local Context context;
  if (!context.cctx) throw std::bad_alloc();
  ZSTD_CCtx_reset(context.cctx, ZSTD_reset_session_and_parameters);
  ZSTD_CCtx_setParameter(context.cctx, ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(context.cctx, ZSTD_c_checksumFlag, checksum == Checksum::required ? 1 : 0);
  std::vector<uint8_t> out(ZSTD_compressBound(raw.size()));
  const size_t n = ZSTD_compress2(context.cctx, out.data(), out.size(), raw.data(), raw.size());
  if (ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation) throw std::bad_alloc();
  if (ZSTD_isError(n)) throw StoreError(std::string("zstd: ") + ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

void decompress(std::span<const uint8_t> stored, std::vector<uint8_t>& out, const std::string& what,
                const char* kind, Checksum checksum) {
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
  if (checksum == Checksum::required) {
    // RFC 8878, 3.1.1.1.1: after the 4-byte magic number, the frame header descriptor,
    // whose bit 2 is the Content_Checksum_flag.
    constexpr uint8_t kMagic[4] = {0x28, 0xb5, 0x2f, 0xfd};
    if (stored.size() < 5 || !std::equal(kMagic, kMagic + 4, stored.data()) || !(stored[4] & 0x04))
      fail("zstd frame without its checksum");
  }
  out.resize(static_cast<size_t>(size));
  const size_t n = ZSTD_decompress(out.data(), out.size(), stored.data(), stored.size());
  // Out of memory is not damage: said as such (std::bad_alloc), never "corrupt".
  if (ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation) throw std::bad_alloc();
  if (ZSTD_getErrorCode(n) == ZSTD_error_checksum_wrong)
    fail("its checksum does not match: the file is damaged");
  if (ZSTD_isError(n)) fail(std::string("zstd: ") + ZSTD_getErrorName(n));
  if (n != size) fail("decodes to " + std::to_string(n) + " of " + std::to_string(size) + " bytes");
}

}  // namespace tidemark::store::detail
