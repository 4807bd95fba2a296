#include "profiler/store/event_tail.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>

#include "profiler/store/event_stream.h"
#include "profiler/store/meta_keys.h"
#include "profiler/store/sqlite_db.h"

namespace tidemark::store {

using detail::Stmt;

struct EventTail::State {
  explicit State(const std::string& p) : path(p), db(p, detail::Db::Mode::follow) {}
  std::string path;
  detail::Db db;
  int64_t last_block = 0;
  std::map<uint64_t, std::pair<int64_t, uint32_t>> latest;  // thread -> its latest row, events read
  DecodedBlock block;                                       // reused between blocks
};

EventTail::EventTail(const std::string& path) : s_(std::make_unique<State>(path)) {}

EventTail::~EventTail() = default;

size_t EventTail::poll(const std::function<void(const DecodedEvent&)>& fn) {
  State& s = *s_;
  size_t read = 0;
  // Hands over the events of the block row `q` (id, data, its header) after the `seen` ones
  // read before.
  auto consume = [&](Stmt& q, uint32_t seen) {
    const int64_t id = q.i64(0);
    const std::string what = s.path + ": event block " + std::to_string(id);
    const BlockHeader header = detail::block_header(q, 2, what);
    s.last_block = std::max(s.last_block, id);
    s.latest[header.thread] = {id, header.count};
    decode_block(q.blob(1), header, BlockForm::sealed, s.block, what);
    for (size_t i = seen; i < s.block.events.size(); ++i) {
      ++read;
      fn(s.block.events[i]);
    }
  };
  // The latest row of each thread again when it grew (a block is stored at every commit and
  // grows until it is full: Note [Blocks grow across commits] in trace_writer.cpp), then the
  // rows added since.
  const std::string select =
      std::string("SELECT id, data, ") + detail::kBlockHeaderColumns + " FROM event_blocks ";
  Stmt grown(s.db, (select + "WHERE id = ? AND count > ?").c_str());
  for (auto& [thread, latest] : s.latest) {
    grown.reset();
    const uint32_t seen = latest.second;
    grown.bind(1, latest.first).bind(2, static_cast<int64_t>(seen));
    if (grown.step()) consume(grown, seen);  // updates `latest` (the same key)
  }
  Stmt added(s.db, (select + "WHERE id > ? ORDER BY id").c_str());
  added.bind(1, s.last_block);
  while (added.step()) consume(added, 0);
  return read;
}

bool EventTail::finalized() const {
  Stmt q(s_->db, "SELECT value FROM meta WHERE key = ?");
  q.bind(1, meta_keys::kFinalized);
  return q.step() && q.i64(0) == 1;
}

}  // namespace tidemark::store
