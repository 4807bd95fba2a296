// What the reporting commands (summary, top, leaks, steps, syncs, diff) print with: JSON, shares,
// groups of allocations and folded stacks.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "profiler/analysis/memory.h"
#include "profiler/analysis/trace.h"

namespace tidemark::cli {

// A --json output: one document, then a newline.
void print_json(const nlohmann::json& j);
// "  12.5%": `part` of `whole`, or "     -" when `whole` is 0.
std::string pct(int64_t part, int64_t whole);
// One line per group (bytes, share of `total`, count, label; its stack's frames below it), then
// how many were left out of `groups_total`.
void print_groups(const std::vector<analysis::Group>& groups, int64_t total, uint64_t groups_total);
// "TITLE of DEVICE (BYTES in COUNT UNITS, T s), by site:" and the groups.
void print_breakdown(const char* title, const analysis::LiveBreakdown& b, const char* units,
                     bool synthetic_times);
// --by: site, stack, scope or category; anything else is a UsageError.
analysis::GroupBy group_by(const std::string& s);
// --device: the device's id, or none when not given (a bad one is a UsageError).
std::optional<int64_t> device_id(const analysis::Trace& t, const std::string& spec);
// One group's stack as a folded-stack line (flamegraph.pl's input), without its bytes:
// tables.cpp says how it is made.
std::string folded_stack(const analysis::Trace& t, const analysis::Group& g);
// The groups as folded stacks, one line each with its bytes (top --folded, leaks --folded).
void print_folded(const analysis::Trace& t, const std::vector<analysis::Group>& groups);

}  // namespace tidemark::cli
