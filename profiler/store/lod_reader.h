// TraceReader's directory of memory_lod chunks (Note [LOD chunks] in lod.cpp): per device and
// level, the chunks in stored order with their time and seq ranges, read once.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "profiler/store/trace_reader.h"

namespace tidemark::store {

struct TraceReader::LodChunks {
  struct Chunk {
    int64_t id = 0;  // memory_lod rowid
    uint64_t min_t = 0, max_t = 0;
    uint64_t first_seq = 0, last_seq = 0;  // level 0
    int64_t rows = 0;
  };
  int level = 0;
  std::vector<Chunk> chunks;
  // The largest max_t of chunks[0..i] and the smallest min_t of chunks[i..]: both
  // non-decreasing, so the chunks a time range touches are found by binary search although t
  // may step back a little between rows.
  std::vector<uint64_t> max_t_upto, min_t_from;
};

struct TraceReader::LodCache {
  std::mutex mu;
  std::map<std::pair<int64_t, int>, std::unique_ptr<const LodChunks>> levels;
};

}  // namespace tidemark::store
