#include "profiler/analysis/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

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

OutputFile::OutputFile(std::string path, const std::vector<std::string>& inputs, Name name)
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
  // What is there already decides how it is written (Note [Output files]). A name the program
  // chose is looked at, not through: a symlink there is replaced like a file.
  struct stat st {};
  const int found = name == Name::chosen ? ::lstat(path_.c_str(), &st) : ::stat(path_.c_str(), &st);
  if (found == 0) {
    if (name == Name::given && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
      in_place_ = true;  // /dev/stdout, /dev/null, a pipe: streamed, never replaced
      // A writer that opens the file itself writes a temporary of its own, streamed in at
      // commit: the private directory keeps its name out of reach of other users.
      std::string templ = (std::filesystem::temp_directory_path() / "tidemark-out-XXXXXX").string();
      if (::mkdtemp(templ.data()) == nullptr)
        throw OutputError(path_ + ": cannot make a temporary directory in " +
                          std::filesystem::temp_directory_path().string() + ": " +
                          std::strerror(errno));
      private_dir_ = templ;
      part_ = private_dir_ + "/output";
      return;
    }
    if (S_ISDIR(st.st_mode)) throw OutputError(path_ + ": is a directory; give a file name");
    if (!S_ISREG(st.st_mode) && !(name == Name::chosen && S_ISLNK(st.st_mode)))
      throw OutputError(path_ + ": is not a regular file (a device or a socket); give a file name");
    // A symlink to a regular file the user named: the file it names is replaced, the link kept.
    struct stat link {};
    if (name == Name::given && ::lstat(path_.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
      if (char* real = ::realpath(path_.c_str(), nullptr)) {
        path_ = real;
        std::free(real);
      }
    }
  }
  // A name of its own, so two writers of one output never share a temporary, created here by
  // this process alone: a symlink or file planted at the name is passed over, never written.
  static std::atomic<uint64_t> outputs{0};
  for (int tries = 0;; ++tries) {
    part_ = path_ + ".part-" + std::to_string(::getpid()) + "-" + std::to_string(++outputs);
    const int fd =
        ::open(part_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0) {
      ::close(fd);
      break;
    }
    if (errno != EEXIST || tries == 100)
      throw OutputError(path_ + ": cannot create the file: " + std::strerror(errno));
  }
}

void OutputFile::remove_temporaries() {
  if (!in_place_) {
    std::remove(part_.c_str());
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(private_dir_, ec);
}

OutputFile::~OutputFile() {
  if (opened_ && !committed_) stream_.close();
  if (!committed_ || in_place_) remove_temporaries();
}

std::ofstream& OutputFile::stream() {
  if (!opened_) {
    stream_.open(in_place_ ? path_ : part_,
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
      remove_temporaries();
      throw OutputError(path_ + ": cannot write the file (is the disk full?)");
    }
  }
  if (in_place_) {
    // What a writer put in the temporary (a database, an image) is streamed into the device.
    std::ifstream written(part_, std::ios::binary);
    if (written) {
      std::ofstream device(path_, std::ios::binary | std::ios::out);
      device << written.rdbuf();
      device.close();
      if (!device) {
        remove_temporaries();
        throw OutputError(path_ + ": cannot write the file: " + std::strerror(errno));
      }
    }
    remove_temporaries();
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
