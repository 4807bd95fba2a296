// Keys of the `meta` table (docs/trace-format.md, "meta").
#pragma once

namespace tidemark::store::meta_keys {

inline constexpr const char* kSchemaVersion = "schema_version";
inline constexpr const char* kToolVersion = "tool_version";
inline constexpr const char* kCommandLine = "command_line";
inline constexpr const char* kHost = "host";
inline constexpr const char* kPid = "pid";
inline constexpr const char* kFinalizerPid = "finalizer_pid";
inline constexpr const char* kStartUnixNs = "start_unix_ns";
inline constexpr const char* kStartTsNs = "start_ts_ns";
inline constexpr const char* kAllocatorSettings = "allocator_settings";
inline constexpr const char* kStackDepth = "stack_depth";
inline constexpr const char* kSyntheticTimes = "synthetic_times";
inline constexpr const char* kEndTsNs = "end_ts_ns";
inline constexpr const char* kEndUnixNs = "end_unix_ns";
inline constexpr const char* kCleanEnd = "clean_end";
inline constexpr const char* kEventCount = "event_count";
inline constexpr const char* kDroppedCount = "dropped_count";
inline constexpr const char* kFinalized = "finalized";
inline constexpr const char* kFinalizedUnixNs = "finalized_unix_ns";
inline constexpr const char* kFinalizedToolVersion = "finalized_tool_version";
inline constexpr const char* kFirstTsNs = "first_ts_ns";
inline constexpr const char* kLastTsNs = "last_ts_ns";
inline constexpr const char* kWriterError = "writer_error";
// Whether `dropped_count` is every event lost (Note [Counted losses] in trace_writer.h).
inline constexpr const char* kLossCounted = "loss_counted";
inline constexpr const char* kCategoriesInferred = "categories_inferred";
inline constexpr const char* kPrivatePools = "private_pools";
inline constexpr const char* kDuplicateIds = "duplicate_ids";
inline constexpr const char* kRank = "rank";
inline constexpr const char* kWorldSize = "world_size";
inline constexpr const char* kMergedRanks = "merged_ranks";
inline constexpr const char* kEstimated = "estimated";

}  // namespace tidemark::store::meta_keys
