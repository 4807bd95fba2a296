// TL_ALLOC_CONF parsing: PyTorch's key:value syntax and errors that name key, value and range.
#include <gtest/gtest.h>

#include <string>

#include "tensorlib/base/error.h"
#include "tensorlib/memory/alloc_config.h"

namespace tl::memory {
namespace {

constexpr size_t MiB = size_t{1} << 20;

std::string error_of(const char* conf) {
  try {
    AllocatorConfig::parse(conf);
  } catch (const tl::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(AllocConfig, DefaultsMatchPyTorch) {
  AllocatorConfig c = AllocatorConfig::parse("");
  EXPECT_EQ(c.max_split_size, SIZE_MAX);
  EXPECT_EQ(c.max_non_split_rounding, 20 * MiB);
  EXPECT_EQ(c.garbage_collection_threshold, 0.0);
  EXPECT_FALSE(c.expandable_segments);
  EXPECT_EQ(c.divisions_for(100 * MiB), 0u);
  EXPECT_EQ(c.to_string(), "");
}

TEST(AllocConfig, ParsesEveryKey) {
  AllocatorConfig c = AllocatorConfig::parse(
      "max_split_size_mb:128, garbage_collection_threshold:0.75,expandable_segments:True,"
      "max_non_split_rounding_mb:64,roundup_power2_divisions:4");
  EXPECT_EQ(c.max_split_size, 128 * MiB);
  EXPECT_EQ(c.max_non_split_rounding, 64 * MiB);
  EXPECT_DOUBLE_EQ(c.garbage_collection_threshold, 0.75);
  EXPECT_TRUE(c.expandable_segments);
  EXPECT_EQ(c.divisions_for(512), 4u);
  EXPECT_EQ(c.divisions_for(size_t{64} << 30), 4u);
  EXPECT_EQ(AllocatorConfig::parse("expandable_segments:False").expandable_segments, false);
  EXPECT_EQ(AllocatorConfig::parse("max_split_size_mb:20").max_split_size, 20 * MiB);
}

TEST(AllocConfig, RoundupBucketsCoverTheirIntervalAndEverythingBelow) {
  AllocatorConfig c = AllocatorConfig::parse("roundup_power2_divisions:[64:8,256:2,>:1]");
  EXPECT_EQ(c.divisions_for(4096), 8u);       // below the first key
  EXPECT_EQ(c.divisions_for(100 * MiB), 8u);  // [64, 128) MiB
  EXPECT_EQ(c.divisions_for(200 * MiB), 2u);  // [128, 256): not covered before 256
  EXPECT_EQ(c.divisions_for(300 * MiB), 2u);  // [256, 512)
  EXPECT_EQ(c.divisions_for(600 * MiB), 1u);  // >
  EXPECT_EQ(c.divisions_for(size_t{1} << 40), 1u);
  AllocatorConfig d = AllocatorConfig::parse("roundup_power2_divisions:[1:4]");
  EXPECT_EQ(d.divisions_for(MiB + 1), 4u);
  EXPECT_EQ(d.divisions_for(2 * MiB), 0u);  // not covered
}

TEST(AllocConfig, UnknownKeyNamesTheKeys) {
  EXPECT_EQ(error_of("foo:1"),
            "TL_ALLOC_CONF: unknown key 'foo' (expected one of max_split_size_mb, "
            "max_non_split_rounding_mb, roundup_power2_divisions, garbage_collection_threshold, "
            "expandable_segments)");
}

TEST(AllocConfig, BadValuesSayWhatIsAllowed) {
  EXPECT_EQ(error_of("max_split_size_mb:5"),
            "TL_ALLOC_CONF: max_split_size_mb must be >= 20, got 5");
  EXPECT_EQ(error_of("max_split_size_mb:lots"),
            "TL_ALLOC_CONF: max_split_size_mb must be a whole number of MiB, got 'lots'");
  EXPECT_EQ(error_of("garbage_collection_threshold:1.0"),
            "TL_ALLOC_CONF: garbage_collection_threshold must be > 0 and < 1, got '1.0'");
  EXPECT_EQ(error_of("garbage_collection_threshold:0"),
            "TL_ALLOC_CONF: garbage_collection_threshold must be > 0 and < 1, got '0'");
  EXPECT_EQ(error_of("expandable_segments:yes"),
            "TL_ALLOC_CONF: expandable_segments must be True or False, got 'yes'");
  EXPECT_EQ(error_of("roundup_power2_divisions:3"),
            "TL_ALLOC_CONF: roundup_power2_divisions divisions must be 0 or a power of two up "
            "to 1024, got '3'");
  EXPECT_EQ(error_of("roundup_power2_divisions:[100:2]"),
            "TL_ALLOC_CONF: roundup_power2_divisions interval sizes must be powers of two (in "
            "MiB) or '>', got '100'");
  EXPECT_EQ(error_of("roundup_power2_divisions:[512:2,256:4]"),
            "TL_ALLOC_CONF: roundup_power2_divisions interval sizes must increase, got '256' "
            "after a larger one in '[512:2,256:4]'");
  EXPECT_EQ(error_of("max_split_size_mb"),
            "TL_ALLOC_CONF: expected key:value, got 'max_split_size_mb'");
}

TEST(AllocConfig, FromEnvironment) {
  setenv("TL_ALLOC_CONF", "max_split_size_mb:64", 1);
  EXPECT_EQ(AllocatorConfig::from_env().max_split_size, 64 * MiB);
  setenv("TL_ALLOC_CONF", "bogus:1", 1);
  EXPECT_THROW(AllocatorConfig::from_env(), tl::Error);
  unsetenv("TL_ALLOC_CONF");
  EXPECT_EQ(AllocatorConfig::from_env().max_split_size, SIZE_MAX);
}

TEST(AllocConfig, ToStringRoundTrips) {
  AllocatorConfig c = AllocatorConfig::parse(
      "max_split_size_mb:64,expandable_segments:True,roundup_power2_divisions:[256:2,>:4]");
  AllocatorConfig d = AllocatorConfig::parse(c.to_string());
  EXPECT_EQ(d.max_split_size, c.max_split_size);
  EXPECT_EQ(d.expandable_segments, c.expandable_segments);
  EXPECT_EQ(d.roundup_power2_divisions, c.roundup_power2_divisions);
}

}  // namespace
}  // namespace tl::memory
