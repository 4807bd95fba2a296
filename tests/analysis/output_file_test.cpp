// OutputFile (profiler/analysis/output_file.h, Note [Output files]) where a name sits in a
// directory others may write: a temporary is never written through a link planted at its
// name, and a name the program chose (Name::chosen) replaces a link there instead of writing
// the file it points to.
#include "profiler/analysis/output_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using tidemark::analysis::OutputError;
using tidemark::analysis::OutputFile;

fs::path dir() {
  static const fs::path d = [] {
    fs::path p = fs::temp_directory_path() / ("tidemark_output_file_" + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
  }();
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(OutputFile, AChosenNameReplacesALinkPlantedThereAndNeverWritesItsTarget) {
  const fs::path victim = dir() / "victim.txt", kept = dir() / "out-snapshot-pid7.pickle";
  std::ofstream(victim) << "precious\n";
  fs::create_symlink(victim, kept);
  OutputFile out(kept.string(), {}, OutputFile::Name::chosen);
  out.stream() << "the snapshot";
  out.commit();
  EXPECT_EQ(slurp(victim), "precious\n");
  EXPECT_FALSE(fs::is_symlink(kept));
  EXPECT_EQ(slurp(kept), "the snapshot");
}

TEST(OutputFile, AGivenNameWritesTheFileItsLinkNames) {
  const fs::path target = dir() / "target.csv", link = dir() / "link.csv";
  std::ofstream(target) << "old\n";
  fs::create_symlink(target, link);
  OutputFile out(link.string(), {});
  out.stream() << "new\n";
  out.commit();
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(slurp(target), "new\n");
}

TEST(OutputFile, ATemporaryIsCreatedByTheWriterAloneAndNothingIsLeftBehind) {
  const fs::path out_path = dir() / "report.svg";
  std::string part;
  {
    OutputFile out(out_path.string(), {});
    part = out.part_path();
    // Created, empty, a regular file of this process's (not a link someone placed).
    struct stat st {};
    ASSERT_EQ(::lstat(part.c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode));
    EXPECT_EQ(st.st_uid, ::geteuid());
  }
  EXPECT_FALSE(fs::exists(part)) << "an uncommitted output leaves no temporary";
  EXPECT_FALSE(fs::exists(out_path));
}

TEST(OutputFile, AChosenNameRefusesADirectory) {
  const fs::path d = dir() / "a_dir";
  fs::create_directories(d);
  EXPECT_THROW(OutputFile(d.string(), {}, OutputFile::Name::chosen), OutputError);
}

}  // namespace
