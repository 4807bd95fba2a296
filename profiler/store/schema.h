// The SQL of schema v7 (docs/trace-format.md is the reference; keep both in step and bump
// kSchemaVersion for any change).
#pragma once

namespace tidemark::store::detail {

// Tables the writer fills while recording.
inline constexpr const char* kRawSchema = R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE devices (id INTEGER PRIMARY KEY, type TEXT NOT NULL, idx INTEGER NOT NULL,
  name TEXT NOT NULL, capacity INTEGER NOT NULL, rank INTEGER, rank_idx INTEGER,
  UNIQUE (type, idx));
CREATE TABLE strings (id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE);
CREATE TABLE modules (id INTEGER PRIMARY KEY, path TEXT NOT NULL, start INTEGER NOT NULL,
  "end" INTEGER NOT NULL, file_offset INTEGER NOT NULL);
CREATE TABLE stack_nodes (id INTEGER PRIMARY KEY, parent INTEGER NOT NULL, ip INTEGER NOT NULL);
CREATE TABLE event_blocks (id INTEGER PRIMARY KEY, thread INTEGER NOT NULL,
  first_seq INTEGER NOT NULL, last_seq INTEGER NOT NULL, first_ts INTEGER NOT NULL,
  last_ts INTEGER NOT NULL, count INTEGER NOT NULL, data BLOB NOT NULL);
CREATE INDEX event_blocks_by_seq ON event_blocks (first_seq);
CREATE TABLE dropped (ts INTEGER NOT NULL, count INTEGER NOT NULL);
)sql";

// What finalize adds to the raw tables of a file older than version 6 (the devices of a merged
// trace: Note [Merged devices] in profiler/analysis/merge.h).
inline constexpr const char* kDevicesV6 =
    "ALTER TABLE devices ADD COLUMN rank INTEGER; ALTER TABLE devices ADD COLUMN rank_idx INTEGER;";

// Tables finalize() builds; dropped and recreated by every finalize.
inline constexpr const char* kDerivedTables[] = {
    "frames",     "allocations", "segments", "storages", "tensors",          "syncs",
    "memcpys",    "scopes",      "steps",    "marks",    "allocator_events", "collectives",
    "memory_lod", "lod_levels"};

inline constexpr const char* kDerivedSchema = R"sql(
CREATE TABLE frames (ip INTEGER NOT NULL, depth INTEGER NOT NULL, function TEXT NOT NULL,
  file TEXT NOT NULL, line INTEGER NOT NULL, inlined INTEGER NOT NULL, module TEXT NOT NULL,
  PRIMARY KEY (ip, depth)) WITHOUT ROWID;
CREATE TABLE allocations (id INTEGER PRIMARY KEY, device INTEGER NOT NULL, addr INTEGER NOT NULL,
  size INTEGER NOT NULL, requested_size INTEGER NOT NULL, stream INTEGER NOT NULL,
  segment INTEGER NOT NULL, pool TEXT NOT NULL, alloc_ts INTEGER NOT NULL,
  free_requested_ts INTEGER, free_completed_ts INTEGER, seq INTEGER NOT NULL,
  thread INTEGER NOT NULL, stack INTEGER NOT NULL, scope INTEGER, category TEXT NOT NULL);
CREATE TABLE segments (id INTEGER PRIMARY KEY, device INTEGER NOT NULL, kind TEXT NOT NULL,
  addr INTEGER NOT NULL, size INTEGER NOT NULL, segment INTEGER NOT NULL, stream INTEGER NOT NULL,
  pool TEXT NOT NULL, alloc_ts INTEGER NOT NULL, free_ts INTEGER, seq INTEGER NOT NULL,
  thread INTEGER NOT NULL, stack INTEGER NOT NULL);
CREATE TABLE storages (storage_id INTEGER PRIMARY KEY, device INTEGER NOT NULL,
  addr INTEGER NOT NULL, nbytes INTEGER NOT NULL, create_ts INTEGER NOT NULL, release_ts INTEGER,
  thread INTEGER NOT NULL, stack INTEGER NOT NULL);
CREATE TABLE tensors (tensor_id INTEGER PRIMARY KEY, storage_id INTEGER NOT NULL,
  base_id INTEGER NOT NULL, device INTEGER NOT NULL, sizes TEXT NOT NULL, strides TEXT NOT NULL,
  storage_offset INTEGER NOT NULL, dtype INTEGER NOT NULL, op INTEGER NOT NULL,
  create_ts INTEGER NOT NULL, release_ts INTEGER, thread INTEGER NOT NULL,
  stack INTEGER NOT NULL);
CREATE TABLE syncs (id INTEGER PRIMARY KEY, ts INTEGER NOT NULL, seq INTEGER NOT NULL,
  device INTEGER NOT NULL, kind TEXT NOT NULL, duration_ns INTEGER NOT NULL,
  stream INTEGER NOT NULL, thread INTEGER NOT NULL, stack INTEGER NOT NULL);
CREATE TABLE memcpys (id INTEGER PRIMARY KEY, ts INTEGER NOT NULL, seq INTEGER NOT NULL,
  device INTEGER NOT NULL, direction TEXT NOT NULL, bytes INTEGER NOT NULL,
  stream INTEGER NOT NULL, pinned INTEGER NOT NULL, async INTEGER NOT NULL,
  thread INTEGER NOT NULL, stack INTEGER NOT NULL);
CREATE TABLE scopes (id INTEGER PRIMARY KEY, thread INTEGER NOT NULL, name INTEGER NOT NULL,
  path INTEGER NOT NULL, depth INTEGER NOT NULL, value INTEGER NOT NULL,
  push_ts INTEGER NOT NULL, pop_ts INTEGER, push_seq INTEGER NOT NULL, stack INTEGER NOT NULL);
CREATE TABLE steps (id INTEGER PRIMARY KEY, number INTEGER NOT NULL, ts INTEGER NOT NULL,
  end_ts INTEGER, seq INTEGER NOT NULL, thread INTEGER NOT NULL, name INTEGER NOT NULL);
CREATE TABLE marks (id INTEGER PRIMARY KEY, ts INTEGER NOT NULL, seq INTEGER NOT NULL,
  device INTEGER NOT NULL, name INTEGER NOT NULL, value INTEGER NOT NULL,
  thread INTEGER NOT NULL, stack INTEGER NOT NULL);
CREATE TABLE allocator_events (id INTEGER PRIMARY KEY, ts INTEGER NOT NULL, seq INTEGER NOT NULL,
  device INTEGER NOT NULL, kind TEXT NOT NULL, requested_size INTEGER NOT NULL,
  stream INTEGER NOT NULL, device_free INTEGER NOT NULL, device_total INTEGER NOT NULL,
  allocated INTEGER NOT NULL, reserved INTEGER NOT NULL, released INTEGER NOT NULL,
  thread INTEGER NOT NULL, stack INTEGER NOT NULL);
CREATE TABLE collectives (id INTEGER PRIMARY KEY, ts INTEGER NOT NULL, seq INTEGER NOT NULL,
  device INTEGER NOT NULL, op TEXT NOT NULL, bytes INTEGER NOT NULL,
  group_size INTEGER NOT NULL, rank INTEGER NOT NULL, group_id INTEGER NOT NULL,
  duration_ns INTEGER NOT NULL, thread INTEGER NOT NULL, stack INTEGER NOT NULL);
CREATE TABLE memory_lod (id INTEGER PRIMARY KEY, device INTEGER NOT NULL,
  level INTEGER NOT NULL, chunk INTEGER NOT NULL, min_t INTEGER NOT NULL, max_t INTEGER NOT NULL,
  first_seq INTEGER, last_seq INTEGER, rows INTEGER NOT NULL, data BLOB NOT NULL);
CREATE TABLE lod_levels (device INTEGER NOT NULL, level INTEGER NOT NULL,
  width_ns INTEGER NOT NULL, rows INTEGER NOT NULL, PRIMARY KEY (device, level)) WITHOUT ROWID;
)sql";

// Created after the rows are in (faster than maintaining them row by row).
inline constexpr const char* kDerivedIndexes = R"sql(
CREATE INDEX allocations_by_alloc_ts ON allocations (device, alloc_ts);
CREATE INDEX allocations_unfreed ON allocations (device) WHERE free_requested_ts IS NULL;
CREATE INDEX segments_by_alloc_ts ON segments (device, alloc_ts);
CREATE INDEX tensors_by_storage ON tensors (storage_id);
CREATE INDEX syncs_by_ts ON syncs (ts);
CREATE INDEX memcpys_by_ts ON memcpys (ts);
CREATE INDEX scopes_by_push_ts ON scopes (thread, push_ts);
CREATE INDEX steps_by_ts ON steps (ts);
CREATE INDEX marks_by_ts ON marks (ts);
CREATE INDEX collectives_by_ts ON collectives (ts);
CREATE INDEX memory_lod_by_chunk ON memory_lod (device, level, chunk, min_t, max_t, first_seq,
  last_seq, rows);
)sql";

}  // namespace tidemark::store::detail
