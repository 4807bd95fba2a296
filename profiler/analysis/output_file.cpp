#include "profiler/analysis/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tidemark::analysis {

namespace {
// Throws OutputError when `output` is `input` (the same file, through any link).
void check_not_input(const std::string& output, const std::string& input) {
  // Device and inode: a symlink is followed, a hard link has the same inode.
  struct stat o {
  }, i{};
  if (::stat(output.c_str(), &o) != 0 || ::stat(input.c_str(), &i) != 0) return;
  if (o.st_dev != i.st_dev || o.st_ino != i.st_ino) return;
  throw OutputError(output + ": the output is the input " +
                    (output == input ? std::string("itself") : input + " (the same file)") +
                    "; write it to another file");
}
}  // namespace

OutputFile::OutputFile(std::string path, const std::vector<std::string>& inputs)
    : path_(std::move(path)) {
  for (const std::string& in : inputs) check_not_input(path_, in);
  // A name of its own, so two writers of one output never share a temporary.
  static std::atomic<uint64_t> outputs{0};
  part_ = path_ + ".part-" + std::to_string(::getpid()) + "-" + std::to_string(++outputs);
}

OutputFile::~OutputFile() {
  if (committed_) return;
  if (opened_) stream_.close();
  std::remove(part_.c_str());
}

std::ofstream& OutputFile::stream() {
  if (!opened_) {
    stream_.open(part_, std::ios::binary | std::ios::trunc);
    if (!stream_) throw OutputError(path_ + ": cannot create the file: " + std::strerror(errno));
    opened_ = true;
  }
  return stream_;
}

void OutputFile::commit() {
  if (opened_) {
    stream_.close();
    if (!stream_) {
      std::remove(part_.c_str());
      throw OutputError(path_ + ": cannot write the file (is the disk full?)");
    }
  }
  if (std::rename(part_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    std::remove(part_.c_str());
    throw OutputError(path_ + ": cannot replace the file: " + std::strerror(err));
  }
  committed_ = true;
}

}  // namespace tidemark::analysis
