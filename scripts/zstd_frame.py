"""zstd frames for the scripts that read or craft a trace's blobs (docs/trace-format.md,
"Compressed blobs"): Python's standard library has no zstd.

  frame(data)    one frame holding `data` in raw blocks: valid zstd that every decoder reads,
                 built without a library (for crafting damaged traces), without a checksum
                 (as schemas 5 and 6 wrote their frames);
  checked(data)  one frame holding `data` with its content checksum, as schema 7 writes every
                 frame, compressed by the system's libzstd through ctypes;
  content(blob)  the content of one frame, decoded by the system's libzstd through ctypes.
"""
import ctypes
import ctypes.util
import struct

MAGIC = b"\x28\xb5\x2f\xfd"
_MAX_RAW_BLOCK = 128 * 1024  # RFC 8878: a block holds at most 128 KiB
_lib = None


def frame(data):
    # Frame header descriptor 0xE0: an 8-byte content size, a single segment (so no window
    # descriptor), no checksum; then raw blocks (type 0), the last one flagged.
    out = bytearray(MAGIC)
    out.append(0xE0)
    out += struct.pack("<Q", len(data))
    pos = 0
    while True:
        piece = data[pos:pos + _MAX_RAW_BLOCK]
        pos += len(piece)
        last = pos >= len(data)
        out += struct.pack("<I", (len(piece) << 3) | int(last))[:3]
        out += piece
        if last:
            return bytes(out)


def _zstd():
    global _lib
    if _lib is None:
        for name in (ctypes.util.find_library("zstd"), "libzstd.so.1"):
            if not name:
                continue
            try:
                lib = ctypes.CDLL(name)
            except OSError:
                continue
            lib.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
            lib.ZSTD_getFrameContentSize.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
            lib.ZSTD_decompress.restype = ctypes.c_size_t
            lib.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
            lib.ZSTD_isError.restype = ctypes.c_uint
            lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
            lib.ZSTD_createCCtx.restype = ctypes.c_void_p
            lib.ZSTD_freeCCtx.argtypes = [ctypes.c_void_p]
            lib.ZSTD_CCtx_setParameter.restype = ctypes.c_size_t
            lib.ZSTD_CCtx_setParameter.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
            lib.ZSTD_compressBound.restype = ctypes.c_size_t
            lib.ZSTD_compressBound.argtypes = [ctypes.c_size_t]
            lib.ZSTD_compress2.restype = ctypes.c_size_t
            lib.ZSTD_compress2.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p,
                                           ctypes.c_size_t]
            _lib = lib
            break
        else:
            raise RuntimeError("libzstd (Debian's libzstd1) not found: it decodes a trace's compressed blobs")
    return _lib


def content(blob):
    lib = _zstd()
    blob = bytes(blob)
    size = lib.ZSTD_getFrameContentSize(blob, len(blob))
    if size >= 2**64 - 2:  # ZSTD_CONTENTSIZE_ERROR or _UNKNOWN
        raise ValueError("not a zstd frame that states its size")
    buf = ctypes.create_string_buffer(max(size, 1))
    got = lib.ZSTD_decompress(buf, size, blob, len(blob))
    if lib.ZSTD_isError(got) or got != size:
        raise ValueError("damaged zstd frame")
    return buf.raw[:size]


_C_CHECKSUM_FLAG = 201  # ZSTD_c_checksumFlag (zstd.h)


def checked(data):
    lib = _zstd()
    data = bytes(data)
    cctx = lib.ZSTD_createCCtx()
    try:
        if lib.ZSTD_isError(lib.ZSTD_CCtx_setParameter(cctx, _C_CHECKSUM_FLAG, 1)):
            raise RuntimeError("libzstd refused the checksum flag")
        cap = lib.ZSTD_compressBound(len(data))
        buf = ctypes.create_string_buffer(cap)
        n = lib.ZSTD_compress2(cctx, buf, cap, data, len(data))
        if lib.ZSTD_isError(n):
            raise RuntimeError("libzstd could not compress")
        return buf.raw[:n]
    finally:
        lib.ZSTD_freeCCtx(cctx)
