// Custom categories (docs/cli.md, "Custom categories"): a project's own names for what fills
// memory ("attention", "ffn", "kv cache"), given as ordered rules on the frames of each
// allocation's stack, used wherever allocations are grouped by category (summary, top, diff,
// timeline bands, report) in place of the recorded or inferred roles.
//
// Note [Category rules]
// ~~~~~~~~~~~~~~~~~~~~~
// A rules file is JSON, in one of two forms:
//   {"attention": "attention|softmax", "ffn": "swiglu|linear"}
//   {"rules": [{"name": "attention", "function": "attn|softmax", "file": "model\\.py"},
//              {"name": "data", "module": "dataloader"}],
//    "rest": "other"}
// In the first, each value is an ECMAScript regex searched in every frame's function and file;
// in the second, `function`, `file` and `module` (the binary or Python module path) each narrow
// a rule, all of those given matching one frame. Rules are tried in the file's order and the
// first whose pattern matches any frame of the stack names the allocation; the rest take
// `rest` (default "other"). Frames are the resolved ones (Trace::resolved_frames), library
// frames included, so a rule may name torch's own functions. A bad file (not JSON, a rule
// without a name or a pattern, a regex that does not compile) is refused naming the file and
// the rule. A file named `.yaml` or `.yml` holds the same in YAML (a mapping's keys in their
// order), read with libyaml where the build has it:
//   attention: attention|softmax
//   rest: other
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <regex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace tidemark::store {
struct ResolvedFrame;
}

namespace tidemark::analysis {

class Trace;

class CategoryRulesError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CategoryRules {
 public:
  // Throws CategoryRulesError naming `path` and the problem. YAML by the file's extension.
  static std::shared_ptr<CategoryRules> load(const std::string& path);
  // Whether this build reads YAML rules (libyaml was found).
  static bool reads_yaml();
  static std::shared_ptr<CategoryRules> parse(const std::string& text, const std::string& source);
  // The rules a trace is read with when its reader asks for custom categories: `file` when
  // given, else kRulesFile (or its YAML twin, kYamlRulesFile) beside the trace; null when there
  // is none. The working directory is never searched, and a file found beside the trace that
  // another user owns or anyone may write is refused (Note [Found rules files]). The CLI
  // (--categories) and the GUI find them by this one rule.
  static constexpr const char* kRulesFile = "tidemark-categories.json";
  static constexpr const char* kYamlRulesFile = "tidemark-categories.yaml";
  static std::shared_ptr<CategoryRules> find(const std::string& trace_path,
                                             const std::string& file);

  const std::string& source() const { return source_; }
  // The names in rule order, then the rest's: the order bands stack in.
  std::vector<std::string> names() const;
  // The category of an allocation with these frames (innermost first).
  const std::string& category_of(const std::vector<store::ResolvedFrame>& frames) const;

 private:
  struct Rule {
    std::string name;
    std::unique_ptr<std::regex> any, function, file, module;
  };
  std::string source_, rest_ = "other";
  std::vector<Rule> rules_;
};

}  // namespace tidemark::analysis
