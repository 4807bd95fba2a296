// OutputFile: how every command that writes a file (export, an image, a JUnit report, an
// imported trace, the GUI's File > Export) writes it. Note [Output files].
#pragma once

#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace tidemark::analysis {

// An output that cannot be written: it is one of the inputs, or it cannot be created or
// written. The message names the file(s) and the problem, on one line.
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Note [Output files]
// An output never destroys an input and is never left half-written:
// * an output that is one of the inputs -- the same path, or the same file through a symlink
//   or a hard link (same device and inode) -- is refused before anything is written;
// * the output is written to a temporary file of its own beside it (the same directory, so
//   the rename cannot cross file systems), `PATH.part-<pid>-<n>`, and renamed over PATH only
//   once complete; a failure (or an OutputFile destroyed without commit()) removes the
//   temporary and leaves PATH as it was;
// * only regular files are replaced: a character device or a FIFO at PATH (/dev/stdout,
//   /dev/null, a pipe) is written in place, streamed, and never removed or replaced; a
//   symlink to a regular file replaces the file it names and keeps the link; a directory or
//   any other special file is refused before anything is written;
// * a writer that needs a file it can seek in (SQLite) is given, for a device or a FIFO, a
//   temporary in a private directory of its own (mkdtemp), streamed into the device at commit:
//   the device node is never removed;
// * the temporary is created by this process alone (O_CREAT | O_EXCL | O_NOFOLLOW): a symlink
//   planted at its name is never written through;
// * a name the program chose rather than the user (a snapshot `record` keeps beside its
//   output: Name::chosen) is never followed: a symlink there is itself replaced, so a link
//   planted in a shared directory cannot direct the write elsewhere, and anything but a
//   regular file or a symlink there is refused.
class OutputFile {
 public:
  enum class Name {
    given,   // named by the user: a symlink to a regular file writes the file it names
    chosen,  // chosen by the program: a symlink at the name is replaced, never followed
  };
  // Throws OutputError when `path` is one of `inputs`.
  OutputFile(std::string path, const std::vector<std::string>& inputs, Name name = Name::given);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  const std::string& path() const { return path_; }
  // Where to write: a writer that opens files itself (libpng, SQLite) opens this path.
  const std::string& part_path() const { return part_; }
  // The temporary opened as a binary stream (created on first call). Throws OutputError.
  std::ofstream& stream();
  // Closes the stream (if opened), checks it was written, and renames the temporary over
  // path(). Throws OutputError, removing the temporary.
  void commit();

 private:
  std::string path_, part_;
  std::string private_dir_;  // a device's or a FIFO's temporary lives here (part_path())
  std::ofstream stream_;
  bool opened_ = false, committed_ = false;
  bool in_place_ = false;  // a device or a FIFO: written where it is
  void remove_temporaries();
};

}  // namespace tidemark::analysis
