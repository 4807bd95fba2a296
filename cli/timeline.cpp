// tidemark timeline: allocated and reserved memory over time, drawn in the terminal with
// Unicode blocks (allocated as eighth-blocks over a shaded reserved area, the peak marked,
// step ticks below), or written as PNG (libpng) or SVG.
#include <fmt/core.h>
#include <png.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/common.h"
#include "profiler/analysis/json.h"
#include "profiler/analysis/output_file.h"
#include "profiler/naming/units.h"

namespace tidemark::cli {

namespace an = analysis;

namespace {

constexpr int kLabelWidth = 11;  // "  12.3 MiB │"

// The column (0-based) of an absolute time, or -1 outside the timeline.
int column_of(const an::Timeline& tl, uint64_t ts) {
  if (ts < tl.from_ts || ts >= tl.to_ts) return -1;
  return static_cast<int>(std::min<uint64_t>((ts - tl.from_ts) / tl.column_ns, tl.width() - 1));
}

int64_t scale_top(const an::Timeline& tl) {
  int64_t top = 1;
  for (size_t i = 0; i < tl.width(); ++i)
    top = std::max({top, tl.allocated.max[i], tl.reserved.max[i]});
  return top;
}

void draw_terminal(const an::Trace& t, const an::Timeline& tl, size_t height) {
  static const char* const kEighths[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  const int64_t top = scale_top(tl);
  const size_t w = tl.width();
  const int peak_col = tl.peak_allocated ? column_of(tl, tl.peak_allocated->ts_ns) : -1;
  fmt::print("{} on {}: allocated █ over reserved ░, {} to {}\n", t.shown_path(), tl.device,
             t.time_text(tl.from_ts), t.time_text(tl.to_ts));
  // The peak marker row.
  std::string marker(kLabelWidth, ' ');
  for (size_t c = 0; c < w; ++c) marker += static_cast<int>(c) == peak_col ? "▼" : " ";
  if (tl.peak_allocated)
    marker += fmt::format(" peak {} at {}", an::format_bytes(tl.peak_allocated->bytes),
                          t.time_text(tl.peak_allocated->ts_ns));
  fmt::print("{}\n", marker);
  for (size_t row = height; row-- > 0;) {
    std::string line;
    if (row + 1 == height)
      line = fmt::format("{:>10}│", an::format_bytes(top));
    else if (row == height / 2)
      line = fmt::format("{:>10}│", an::format_bytes(top / 2));
    else if (row == 0)
      line = fmt::format("{:>10}│", "0");
    else
      line = fmt::format("{:>10}│", "");
    for (size_t c = 0; c < w; ++c) {
      // Eighths of this cell covered by each curve (their maxima in the column).
      auto eighths = [&](int64_t v) {
        double cells =
            static_cast<double>(v) / static_cast<double>(top) * static_cast<double>(height);
        double in_row = (cells - static_cast<double>(row)) * 8.0;
        return static_cast<int>(std::clamp(in_row + 0.5, 0.0, 8.0));
      };
      int a = eighths(tl.allocated.max[c]);
      int r = eighths(tl.reserved.max[c]);
      if (a > 0)
        line += kEighths[a];
      else if (r >= 4)
        line += "░";
      else
        line += " ";
    }
    fmt::print("{}\n", line);
  }
  // The time axis with step ticks.
  std::string axis = fmt::format("{:>10}└", "");
  std::vector<bool> tick(w, false);
  for (const auto& [n, ts] : tl.steps)
    if (int c = column_of(tl, ts); c >= 0) tick[static_cast<size_t>(c)] = true;
  for (size_t c = 0; c < w; ++c) axis += tick[c] ? "┴" : "─";
  fmt::print("{}\n", axis);
  std::string from = t.time_text(tl.from_ts), to = t.time_text(tl.to_ts);
  size_t gap = w > from.size() + to.size() ? w - from.size() - to.size() : 1;
  fmt::print("{:>11}{}{}{}\n", "", from, std::string(gap, ' '), to);
  if (!tl.steps.empty())
    fmt::print("{:>11}┴ marks the start of a step ({} steps shown)\n", "", tl.steps.size());
}

struct Rgb {
  uint8_t r, g, b;
};
constexpr Rgb kBackground{255, 255, 255}, kReserved{198, 219, 239}, kAllocated{33, 113, 181},
    kPeak{215, 48, 39}, kStep{160, 160, 160}, kAxis{60, 60, 60};

void write_png(an::OutputFile& out, const an::Timeline& tl, size_t height) {
  const std::string& path = out.path();
  const size_t w = tl.width(), h = height;
  std::vector<Rgb> px(w * h, kBackground);
  const int64_t top = scale_top(tl);
  auto y_of = [&](int64_t v) {  // pixel rows from the bottom covered by v
    return static_cast<size_t>(static_cast<double>(v) / static_cast<double>(top) *
                               static_cast<double>(h - 1));
  };
  for (const auto& [n, ts] : tl.steps)
    if (int c = column_of(tl, ts); c >= 0)
      for (size_t y = 0; y < h; y += 4) px[y * w + static_cast<size_t>(c)] = kStep;
  for (size_t c = 0; c < w; ++c) {
    for (size_t y = 0, r = y_of(tl.reserved.max[c]); y <= r && y < h; ++y)
      px[(h - 1 - y) * w + c] = kReserved;
    for (size_t y = 0, a = y_of(tl.allocated.max[c]); y <= a && y < h && tl.allocated.max[c] > 0;
         ++y)
      px[(h - 1 - y) * w + c] = kAllocated;
  }
  if (tl.peak_allocated)
    if (int c = column_of(tl, tl.peak_allocated->ts_ns); c >= 0)
      for (size_t y = 0; y < h; ++y)
        if (y % 2 == 0) px[y * w + static_cast<size_t>(c)] = kPeak;
  for (size_t c = 0; c < w; ++c) px[(h - 1) * w + c] = kAxis;

  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(out.part_path().c_str(), "wb"), &std::fclose);
  if (!f) throw UsageError("--png " + path + ": cannot create the file");
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info) throw UsageError("--png " + path + ": libpng failed to start");
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    throw UsageError("--png " + path + ": cannot write the image");
  }
  png_init_io(png, f.get());
  png_set_IHDR(png, info, static_cast<png_uint_32>(w), static_cast<png_uint_32>(h), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (size_t y = 0; y < h; ++y) png_write_row(png, reinterpret_cast<png_const_bytep>(&px[y * w]));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  if (std::fclose(f.release()) != 0) throw UsageError("--png " + path + ": cannot write the image");
  out.commit();
}

void write_svg(an::OutputFile& out, const an::Trace& t, const an::Timeline& tl, size_t height) {
  const std::string& path = out.path();
  const size_t w = tl.width();
  const double h = static_cast<double>(height);
  const int64_t top = scale_top(tl);
  const double margin = 70;  // for the axis labels
  auto y = [&](int64_t v) {
    return h - static_cast<double>(v) / static_cast<double>(top) * (h - 20);
  };
  auto area = [&](const an::CurveColumns& c) {
    std::string d = fmt::format("M{},{}", margin, h);
    for (size_t i = 0; i < w; ++i)
      d += fmt::format(" L{},{:.1f} L{},{:.1f}", margin + static_cast<double>(i), y(c.max[i]),
                       margin + static_cast<double>(i + 1), y(c.max[i]));
    d += fmt::format(" L{},{} Z", margin + static_cast<double>(w), h);
    return d;
  };
  std::ofstream& f = out.stream();
  f << fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n",
      static_cast<double>(w) + margin + 10, h + 20);
  f << fmt::format("<title>{} on {}</title>\n", t.shown_path(), tl.device);
  f << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  f << fmt::format("<path d=\"{}\" fill=\"#c6dbef\"><title>reserved</title></path>\n",
                   area(tl.reserved));
  f << fmt::format("<path d=\"{}\" fill=\"#2171b5\"><title>allocated</title></path>\n",
                   area(tl.allocated));
  for (const auto& [n, ts] : tl.steps)
    if (int c = column_of(tl, ts); c >= 0)
      f << fmt::format(
          "<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#a0a0a0\" "
          "stroke-width=\"0.5\"><title>step {3}</title></line>\n",
          margin + c, h, h + 6, n);
  if (tl.peak_allocated)
    if (int c = column_of(tl, tl.peak_allocated->ts_ns); c >= 0)
      f << fmt::format(
          "<line x1=\"{0}\" x2=\"{0}\" y1=\"0\" y2=\"{1}\" stroke=\"#d73027\" "
          "stroke-dasharray=\"3,2\"/><text x=\"{2}\" y=\"12\" fill=\"#d73027\">peak {3} at "
          "{4}</text>\n",
          margin + c, h, margin + c + 4, an::format_bytes(tl.peak_allocated->bytes),
          t.time_text(tl.peak_allocated->ts_ns));
  f << fmt::format("<text x=\"2\" y=\"{}\">{}</text>\n", y(top) + 10, an::format_bytes(top));
  f << fmt::format("<text x=\"2\" y=\"{}\">0</text>\n", h);
  f << fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", margin, h + 16, t.time_text(tl.from_ts));
  f << fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
                   margin + static_cast<double>(w), h + 16, t.time_text(tl.to_ts));
  f << "</svg>\n";
  if (!f) throw UsageError("--svg " + path + ": cannot write the file");
  out.commit();
}

}  // namespace

int run_timeline(const TimelineArgs& a) {
  // Refused before anything is read when it is the trace (Note [Output files]).
  std::optional<an::OutputFile> image_file;
  if (!a.png.empty() || !a.svg.empty())
    image_file.emplace(a.png.empty() ? a.svg : a.png, std::vector<std::string>{a.file});
  an::Trace t = open_trace(a.file);
  an::DeviceRef d = primary_device(t, a.device);
  an::TimelineRequest req;
  if (!a.from.empty()) req.from_ts = parse_time(t, "--from", a.from);
  if (!a.to.empty()) req.to_ts = parse_time(t, "--to", a.to);
  if (req.from_ts && req.to_ts && *req.to_ts <= *req.from_ts)
    throw UsageError("--from " + a.from + " --to " + a.to + ": the end must be after the start");
  const bool image = !a.png.empty() || !a.svg.empty();
  if (a.width)
    req.width = a.width;
  else if (image)
    req.width = 1200;
  else
    req.width = static_cast<size_t>(std::max(20, terminal_columns() - kLabelWidth - 1));
  an::Timeline tl;
  {
    Progress p("drawing the timeline");
    tl = an::timeline(t, d.id, req);
  }
  if (a.json) {
    std::cout << json_text(nlohmann::json(tl), -1) << '\n';
    return kExitOk;
  }
  if (!a.png.empty()) {
    write_png(*image_file, tl, a.height ? a.height : 360);
    fmt::print("{}: wrote {}\n", a.file, a.png);
  } else if (!a.svg.empty()) {
    write_svg(*image_file, t, tl, a.height ? a.height : 360);
    fmt::print("{}: wrote {}\n", a.file, a.svg);
  } else {
    draw_terminal(t, tl, a.height ? a.height : 12);
  }
  return kExitOk;
}

}  // namespace tidemark::cli
