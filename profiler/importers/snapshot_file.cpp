#include "profiler/importers/snapshot_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "profiler/importers/import_error.h"
#include "profiler/importers/pytorch_snapshot.h"

namespace tidemark::importers::detail {

void check_pickle_start(std::string_view head, const std::string& source_name) {
  if (head.empty()) throw ImportError(source_name + ": not a pickle: the file is empty");
  if (static_cast<uint8_t>(head[0]) == 0x80) return;
  std::string hint = head.substr(0, 6) == "SQLite" ? " (it is a SQLite file: already a trace?)"
                     : head.substr(0, 2) == "PK"
                         ? " (it is a zip file: torch.save output, not a memory snapshot)"
                         : "";
  throw ImportError(
      source_name +
      ": not a pickle of protocol 2 to 5: it does not start with the PROTO opcode (0x80)" + hint);
}

std::string read_snapshot_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) throw ImportError(path + ": cannot open: no such file");
  if (fs::is_directory(st)) throw ImportError(path + ": cannot read: is a directory");
  if (!fs::is_regular_file(st))
    throw ImportError(path +
                      ": cannot read: not a regular file (a device, pipe or socket); save the "
                      "snapshot to a file first");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ImportError(path + ": cannot open: " + std::strerror(errno));
  const uintmax_t n = fs::file_size(path, ec);
  if (ec) throw ImportError(path + ": cannot read: " + ec.message());
  // The first bytes before the rest: a multi-gigabyte file of another kind is refused at once.
  std::string data(static_cast<size_t>(std::min<uintmax_t>(n, 16)), '\0');
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  check_pickle_start(data, path);
  const size_t head = data.size();
  data.resize(static_cast<size_t>(n));
  if (n > head) {
    in.read(data.data() + head, static_cast<std::streamsize>(n - head));
    if (static_cast<uintmax_t>(in.gcount()) != n - head)
      throw ImportError(path + ": cannot read: the file changed while it was read");
  }
  return data;
}

// A snapshot file mapped read-only: parsing reads it once, front to back, and lets the pages
// behind it go every 64 MiB, so the file does not stay resident (the frames' strings are read
// from it again when the trace is written).
struct MappedFile {
  void* base = MAP_FAILED;
  size_t size = 0;
  ~MappedFile() {
    if (base != MAP_FAILED) munmap(base, size);
  }
  void drop_before(uint64_t offset) const {
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    const uint64_t n = offset / page * page;
    if (n > 0) madvise(base, n, MADV_DONTNEED);
  }
};

Input open_snapshot_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_regular_file(st)) {
    const uintmax_t n = fs::file_size(path, ec);
    const int fd = ec || n < 16 ? -1 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      auto map = std::make_shared<MappedFile>();
      map->base = mmap(nullptr, static_cast<size_t>(n), PROT_READ, MAP_PRIVATE, fd, 0);
      ::close(fd);
      if (map->base != MAP_FAILED) {
        map->size = static_cast<size_t>(n);
        madvise(map->base, map->size, MADV_SEQUENTIAL);
        Input in;
        in.bytes = std::string_view(static_cast<const char*>(map->base), map->size);
        check_pickle_start(in.bytes.substr(0, 16), path);
        in.drop_before = [m = map.get()](uint64_t offset) { m->drop_before(offset); };
        in.keep = std::move(map);
        return in;
      }
    }
  }
  // Not mappable (small, or not a regular file): read, with read_snapshot_file's checks.
  auto data = std::make_shared<const std::string>(read_snapshot_file(path));
  Input in;
  in.bytes = *data;
  in.keep = std::move(data);
  return in;
}

}  // namespace tidemark::importers::detail
