#include "profiler/analysis/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
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
  // The directory it goes in must be one: otherwise the temporary's name would be the error's.
  {
    const size_t slash = path_.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "."
                            : slash == 0               ? "/"
                                                       : path_.substr(0, slash);
    struct stat d {};
    if (::stat(dir.c_str(), &d) != 0) throw OutputError(path_ + ": no such directory " + dir);
    if (!S_ISDIR(d.st_mode)) throw OutputError(path_ + ": " + dir + " is not a directory");
  }
  // What is there already decides how it is written (Note [Output files]).
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) {
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
      in_place_ = true;  // /dev/stdout, /dev/null, a pipe: streamed, never replaced
      part_ = path_;
      return;
    }
    if (S_ISDIR(st.st_mode)) throw OutputError(path_ + ": is a directory; give a file name");
    if (!S_ISREG(st.st_mode))
      throw OutputError(path_ + ": is not a regular file (a device or a socket); give a file name");
    // A symlink to a regular file: the file it names is replaced, the link kept.
    struct stat link {};
    if (::lstat(path_.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
      if (char* real = ::realpath(path_.c_str(), nullptr)) {
        path_ = real;
        std::free(real);
      }
    }
  }
  // A name of its own, so two writers of one output never share a temporary.
  static std::atomic<uint64_t> outputs{0};
  part_ = path_ + ".part-" + std::to_string(::getpid()) + "-" + std::to_string(++outputs);
}

OutputFile::~OutputFile() {
  if (committed_) return;
  if (opened_) stream_.close();
  if (!in_place_) std::remove(part_.c_str());
}

std::ofstream& OutputFile::stream() {
  if (!opened_) {
    stream_.open(part_,
                 in_place_ ? std::ios::binary | std::ios::out : std::ios::binary | std::ios::trunc);
    if (!stream_) throw OutputError(path_ + ": cannot create the file: " + std::strerror(errno));
    opened_ = true;
  }
  return stream_;
}

void OutputFile::commit() {
  if (opened_) {
    stream_.close();
    if (!stream_) {
      if (!in_place_) std::remove(part_.c_str());
      throw OutputError(path_ + ": cannot write the file (is the disk full?)");
    }
  }
  if (in_place_) {
    committed_ = true;
    return;
  }
  if (std::rename(part_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    std::remove(part_.c_str());
    throw OutputError(path_ + ": cannot replace the file: " + std::strerror(err));
  }
  committed_ = true;
}

}  // namespace tidemark::analysis
