// tidemark._native: what the Python module reads from a trace in-process instead of through
// the `tidemark` command (docs/python.md). A curve at full resolution is every change of it --
// millions of points on a long run -- which --json would print as text and Python parse back;
// here it is read from the trace's level-of-detail table (level 0: every change, in event
// order) into two int64 columns that numpy takes without a copy (the buffer protocol) and
// that a memoryview reads without numpy.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "profiler/analysis/memory.h"
#include "profiler/analysis/trace.h"

namespace py = pybind11;
using namespace tidemark;

namespace {

// A read-only column of int64 values, exposed through the buffer protocol (format 'q').
struct Int64Column {
  std::vector<int64_t> values;
};

std::optional<store::Curve> parse_curve(const std::string& level) {
  if (level == "allocated") return store::Curve::allocated;
  if (level == "active") return store::Curve::active;
  if (level == "reserved") return store::Curve::reserved;
  if (level == "requested") return store::Curve::requested;
  return std::nullopt;
}

struct CurveResult {
  std::string device;
  Int64Column times, values;
};

// Every change of one curve of one device: (the device's name, times in ns from the trace's
// origin, the curve's value after each change). `device` empty: the device the commands show
// by default (analysis::busiest_device).
CurveResult read_curve(const std::string& path, const std::string& level,
                       const std::string& device) {
  const std::optional<store::Curve> curve = parse_curve(level);
  if (!curve)
    throw std::invalid_argument("level '" + level + "': allocated, reserved, active or requested");
  const analysis::Trace trace = analysis::Trace::open(path);
  const analysis::DeviceRef* d =
      device.empty() ? analysis::busiest_device(trace) : &trace.device(device);
  if (d == nullptr)
    throw std::invalid_argument(path + ": the trace has no devices (no memory events)");
  CurveResult out;
  out.device = d->name;
  const uint64_t origin = trace.origin_ns();
  trace.reader().for_each_lod(d->id, 0, 0, std::numeric_limits<uint64_t>::max(),
                              [&](const store::LodRow& r) {
                                out.times.values.push_back(static_cast<int64_t>(r.t - origin));
                                out.values.values.push_back(store::curve_value(r, *curve));
                                return true;
                              });
  return out;
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "Tidemark's in-process trace reader (docs/python.md)";
  py::class_<Int64Column>(m, "Int64Column", py::buffer_protocol())
      .def_buffer([](Int64Column& c) {
        return py::buffer_info(c.values.data(), sizeof(int64_t),
                               py::format_descriptor<int64_t>::format(), 1,
                               {static_cast<py::ssize_t>(c.values.size())}, {sizeof(int64_t)},
                               /*readonly=*/true);
      })
      .def("__len__", [](const Int64Column& c) { return c.values.size(); });
  m.def(
      "curve",
      [](const std::string& path, const std::string& level, const std::string& device) {
        std::optional<CurveResult> r;
        {
          py::gil_scoped_release unlocked;
          r = read_curve(path, level, device);
        }
        return py::make_tuple(r->device, py::cast(std::move(r->times)),
                              py::cast(std::move(r->values)));
      },
      py::arg("path"), py::arg("level"), py::arg("device") = "",
      "(device, times in ns from the trace's start, bytes): every change of one curve of a trace.");
}
