// A pickle::AppendHook that puts the first flat dict of each content in the place of every later
// equal one going into a list, releasing nothing: the parser then drops the replaced dicts from
// its tables (Note [Dropping replaced dicts] in pickle.cpp), which must never change what a
// pickle reads. For the pickle tests and the fuzz target (tests/importers/pickle_fuzz.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "profiler/pickle/pickle.h"

namespace tidemark::importers::pickle::testing {

struct FirstOfEachContent : AppendHook {
  std::map<std::string, Val> first;  // by the dict's rendering
  size_t dropped_dicts = 0;          // containers the parser said it dropped
  size_t empty_drops = 0;            // dropped() calls naming no container (never expected)
  Val dict_appended(Document& doc, Val dict) override {
    const Ref d(&doc, dict);
    for (size_t k = 0; k < d.size(); ++k)
      if (d.value(k).identity() != UINT32_MAX) return dict;  // not flat
    return first.try_emplace(d.repr(1 << 20), dict).first->second;
  }
  void dropped(size_t from, size_t end, size_t) override {
    if (from >= end) ++empty_drops;
    dropped_dicts += end > from ? end - from : 0;
  }
};

}  // namespace tidemark::importers::pickle::testing
