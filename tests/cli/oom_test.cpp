// Note [OOM post-mortem] on a tensorlib program that dies of an uncaught OutOfMemoryError: the
// recorder commits its events before the abort (Note [Recording up to a crash]), so the trace
// holds the `oom` event, and the finding's numbers agree with the allocator's own message.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include "profiler/diagnose/diagnose.h"
#include "profiler/naming/units.h"
#include "run_program.h"

namespace {

namespace an = tidemark::analysis;
namespace diag = tidemark::diagnose;

TEST(Oom, AnUncaughtOutOfMemoryErrorIsRecordedAndExplained) {
  const std::string trace = (tl_test::temp_dir("tidemark_oom") / "oom.db").string();
  // A 32 MiB "device" (TL_HOST_CAPACITY) and an accumulated loss that outgrows it.
  // Deep stacks, so the site reaches main() in the sanitizer build too (no inlining there).
  tl_test::Result r = tl_test::run({TIDEMARK_CLI, "record", "-o", trace, "--stacks", "64", "--",
                                    "/usr/bin/env", "TL_HOST_CAPACITY=33554432",
                                    std::string(TIDEMARK_SAMPLES_BIN) + "/pitfall_accumulated_loss",
                                    "--steps", "200"});
  // The allocator's own report, on the program's stderr (PyTorch's wording and rounding).
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.err, m,
      std::regex("total capacity of ([0-9.]+ [KMG]iB) of which ([0-9.]+ [KMGi]*B|0 bytes) "
                 "is free\\. Of the allocated memory ([0-9.]+ [KMG]iB) is allocated by "
                 "tensorlib, and ([0-9.]+ [KMG]iB) is reserved")))
      << r.err;
  const std::string total = m[1], allocated = m[3], unallocated = m[4];

  diag::Diagnosis d = diag::diagnose(an::Trace::open(trace), {"oom"});
  ASSERT_EQ(d.findings.size(), 1u) << "the oom event was lost with the process";
  const diag::Finding& f = d.findings[0];
  EXPECT_EQ(f.device, "cpu");
  std::map<std::string, std::string> ev(f.evidence.begin(), f.evidence.end());
  auto shown = [&](const std::string& key) { return ev[key].substr(0, ev[key].find(" (")); };
  EXPECT_EQ(shown("device total"), total);
  EXPECT_EQ(ev["device total"], "32.00 MiB (33,554,432 bytes)");
  EXPECT_EQ(shown("allocated at the OOM"), allocated);
  EXPECT_EQ(shown("cached free at the OOM"), unallocated);
  EXPECT_EQ(shown("reserved at the OOM"), total);  // the whole device was reserved
  EXPECT_EQ(shown("device free (outside the cache)"), "0 B");
  // The request was small (the small pool), the cache large but in the other pool's blocks.
  EXPECT_NE(f.title.find("fragmentation"), std::string::npos) << f.title;
  EXPECT_EQ(f.site.rfind("main (accumulated_loss.cpp:", 0), 0u) << f.site;
}

}  // namespace
