// `tidemark report` (cli/html_report.cpp, Note [The HTML report]) on a recorded pitfall run:
// one file with nothing fetched from elsewhere, opened in a real headless browser (Debian's
// chromium): the page the browser built carries the same peaks as `summary --json` and the
// same finding ids as `diagnose --json`, and its screenshot shows what the report draws -- the
// category bands of the timeline in their colours and the reserved curve.
#include <gtest/gtest.h>
#include <png.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "run_program.h"

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string dir() {
  return tl_test::temp_dir("tidemark_report").string();
}

std::string recorded() {
  static std::string path;
  if (!path.empty()) return path;
  path = dir() + "/pitfall.db";
  tl_test::Result r = tl_test::run({TIDEMARK_CLI, "record", "--force", "-o", path, "--",
                                    std::string(TIDEMARK_SAMPLES_BIN) + "/pitfall_accumulated_loss",
                                    "--steps", "8"});
  EXPECT_EQ(r.rc, 0) << r.err;
  return path;
}

std::string chromium() {
  for (const char* c : {"chromium", "chromium-browser", "google-chrome"})
    if (tl_test::run({"/bin/sh", "-c", std::string("command -v ") + c}).rc == 0) return c;
  return {};
}

// RGB pixels of a PNG (libpng).
struct Image {
  unsigned w = 0, h = 0;
  std::vector<unsigned char> rgb;
  bool has(unsigned char r, unsigned char g, unsigned char b, int tolerance,
           size_t at_least) const {
    size_t n = 0;
    for (size_t i = 0; i + 2 < rgb.size(); i += 3)
      if (std::abs(rgb[i] - r) <= tolerance && std::abs(rgb[i + 1] - g) <= tolerance &&
          std::abs(rgb[i + 2] - b) <= tolerance)
        if (++n >= at_least) return true;
    return false;
  }
};

Image read_png(const std::string& path) {
  Image img;
  png_image p{};
  p.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&p, path.c_str())) return img;
  p.format = PNG_FORMAT_RGB;
  img.w = p.width;
  img.h = p.height;
  img.rgb.resize(PNG_IMAGE_SIZE(p));
  if (!png_image_finish_read(&p, nullptr, img.rgb.data(), 0, nullptr)) img.rgb.clear();
  return img;
}

TEST(ReportHtml, OneFileWithNothingFromElsewhere) {
  const std::string out = dir() + "/report.html";
  tl_test::Result r = tl_test::run({TIDEMARK_CLI, "report", recorded(), "-o", out});
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string html = tl_test::slurp(out);
  EXPECT_LT(html.size(), size_t{5} << 20);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_FALSE(std::regex_search(html, std::regex(R"((src|href)\s*=\s*["']?(https?:|//))")));
  EXPECT_FALSE(std::regex_search(html, std::regex(R"(url\(\s*["']?https?:)")));
  EXPECT_NE(html.find("<svg"), std::string::npos);
  // Bad input: exit 2, the output left as it was.
  r = tl_test::run({TIDEMARK_CLI, "report", dir() + "/missing.db", "-o", out});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(tl_test::slurp(out), html);
}

TEST(ReportHtml, TheBrowserShowsTheSameNumbersAndDrawsTheTimeline) {
  const std::string browser = chromium();
  if (browser.empty())
    GTEST_SKIP() << "no headless browser (Debian's chromium) installed: the report is not opened";
  const std::string out = dir() + "/browser.html", shot = dir() + "/browser.png";
  ASSERT_EQ(tl_test::run({TIDEMARK_CLI, "report", recorded(), "-o", out}).rc, 0);
  const std::vector<std::string> flags = {
      "--headless",        "--no-sandbox",   "--disable-gpu",
      "--hide-scrollbars", "--no-first-run", "--user-data-dir=" + dir() + "/chromium-profile"};
  std::vector<std::string> argv = {"timeout", "120", browser};
  argv.insert(argv.end(), flags.begin(), flags.end());
  std::vector<std::string> dom_argv = argv;
  dom_argv.insert(dom_argv.end(), {"--dump-dom", "file://" + out});
  tl_test::Result dom = tl_test::run(dom_argv);
  ASSERT_EQ(dom.rc, 0) << dom.err;
  // The page as the browser parsed it: each device's peaks are summary --json's.
  tl_test::Result s = tl_test::run({TIDEMARK_CLI, "summary", recorded(), "--json"});
  ASSERT_EQ(s.rc, 0);
  const json summary = json::parse(s.out);
  ASSERT_FALSE(summary["devices"].empty());
  for (const json& d : summary["devices"]) {
    if (d["alloc_count"].get<uint64_t>() == 0) continue;
    const std::string device = d["device"];
    const size_t at = dom.out.find("data-device=\"" + device + "\"");
    ASSERT_NE(at, std::string::npos) << device;
    for (const char* key :
         {"peak_allocated_bytes", "peak_reserved_bytes", "peak_requested_bytes", "alloc_count"}) {
      std::smatch m;
      const std::string rest = dom.out.substr(at);
      ASSERT_TRUE(std::regex_search(
          rest, m, std::regex(std::string("data-key=\"") + key + "\" data-value=\"(-?\\d+)\"")))
          << key;
      EXPECT_EQ(std::stoll(m[1]), d[key].get<int64_t>()) << device << " " << key;
    }
  }
  // The findings are diagnose --json's.
  tl_test::Result dx = tl_test::run({TIDEMARK_CLI, "diagnose", recorded(), "--json"});
  ASSERT_EQ(dx.rc, 0);
  std::multiset<std::string> want, got;
  const json findings = json::parse(dx.out)["findings"];
  for (const json& f : findings) want.insert(f["id"].get<std::string>());
  std::regex id(R"re(class="finding [a-z]+" data-id="([a-z-]+)")re");
  for (auto it = std::sregex_iterator(dom.out.begin(), dom.out.end(), id);
       it != std::sregex_iterator(); ++it)
    got.insert((*it)[1]);
  EXPECT_EQ(got, want);
  EXPECT_FALSE(want.empty()) << "the accumulated-loss pitfall has a finding";
  // What is drawn: the screenshot holds the activation and parameter bands in their colours,
  // and the reserved curve.
  std::vector<std::string> shot_argv = argv;
  shot_argv.insert(shot_argv.end(),
                   {"--window-size=1100,1400", "--screenshot=" + shot, "file://" + out});
  fs::remove(shot);
  tl_test::Result sc = tl_test::run(shot_argv);
  ASSERT_EQ(sc.rc, 0) << sc.err;
  const Image img = read_png(shot);
  ASSERT_EQ(img.w, 1100u);
  ASSERT_FALSE(img.rgb.empty());
  EXPECT_TRUE(img.has(0x76, 0xb7, 0xb2, 6, 2000)) << "no activation band (#76b7b2)";
  EXPECT_TRUE(img.has(0x4e, 0x79, 0xa7, 6, 200)) << "no parameter band (#4e79a7)";
  EXPECT_TRUE(img.has(0x1f, 0x1f, 0x1f, 12, 300)) << "no reserved curve";
}

}  // namespace
