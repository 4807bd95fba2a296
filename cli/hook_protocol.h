// The command's side of the in-process Python hook's protocol: Note [Hook protocol] in
// python/hook/tidemark_hook/protocol.py states it; these are its names, mirrored.
#pragma once

#include <string>

namespace tidemark::cli::hook {

inline constexpr const char* kDir = "TIDEMARK_PYTHON_DIR";
inline constexpr const char* kMode = "TIDEMARK_PYTHON_MODE";
inline constexpr const char* kMaxEntries = "TIDEMARK_PYTHON_MAX_ENTRIES";
inline constexpr const char* kStacks = "TIDEMARK_PYTHON_STACKS";
inline constexpr const char* kStepOn = "TIDEMARK_PYTHON_STEP_ON";
inline constexpr const char* kNvtx = "TIDEMARK_PYTHON_NVTX";
inline constexpr const char* kEstimateLibrary = "TIDEMARK_ESTIMATE_LIBRARY";
inline constexpr const char* kEstimateGpu = "TIDEMARK_ESTIMATE_GPU";
inline constexpr const char* kEstimateCapacity = "TIDEMARK_ESTIMATE_CAPACITY";
inline constexpr const char* kEstimateFix = "TIDEMARK_ESTIMATE_FIX";
inline constexpr const char* kModeEstimate = "estimate";

// NAME=value
inline std::string assign(const char* name, const std::string& value) {
  return std::string(name) + "=" + value;
}

// What the hook writes into the folder.
inline constexpr const char* kRankSnapshotPrefix = "snapshot-rank";
inline constexpr const char* kPidSnapshotPrefix = "snapshot-pid";
inline constexpr const char* kStatusPrefix = "status-pid";

}  // namespace tidemark::cli::hook
