// NVTX injection (NVTX_INJECTION64_PATH): NVTX's own export table is filled with our handlers,
// so ranges, marks, domains, registered strings and category names become events - before
// CUDA starts, and without a GPU.
#pragma once

#define NVTX_NO_IMPL  // the types and callback ids only: this library implements NVTX
#include <nvtx3/nvToolsExt.h>

namespace tidemark::interpose::nvtx {

// Fills the CORE and CORE2 callback tables. Returns 1 on success, 0 when the table is not
// what this build knows (NVTX then turns every call into a no-op).
int initialize(NvtxGetExportTableFunc_t get_export_table) noexcept;

}  // namespace tidemark::interpose::nvtx
