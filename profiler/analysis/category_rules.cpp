#include "profiler/analysis/category_rules.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "profiler/store/trace_format.h"

#ifdef TIDEMARK_HAVE_YAML
#include <yaml.h>
#endif

namespace tidemark::analysis {

namespace {

std::unique_ptr<std::regex> compile(const std::string& pattern, const std::string& where) {
  try {
    return std::make_unique<std::regex>(pattern, std::regex::ECMAScript | std::regex::optimize);
  } catch (const std::regex_error& e) {
    throw CategoryRulesError(where + ": '" + pattern + "' is not a regular expression (" +
                             e.what() + ")");
  }
}

bool yaml_name(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".yaml" || ext == ".yml";
}

#ifdef TIDEMARK_HAVE_YAML
// A YAML document as the JSON the rules are parsed from: mappings in their order, sequences,
// and every scalar a string (the rules' values are names and patterns). Aliases point at nodes
// already read, so a hostile file could name one node 2^40 times: the nodes converted are
// counted and a document past kMaxYamlNodes refused.
constexpr size_t kMaxYamlNodes = 100000;
nlohmann::ordered_json json_of(yaml_document_t* doc, yaml_node_t* node, size_t& budget,
                               const std::string& path) {
  if (node == nullptr) return nullptr;
  if (budget-- == 0)
    throw CategoryRulesError(path + ": more than " + std::to_string(kMaxYamlNodes) +
                             " YAML nodes (aliases expanded): not a rules file");
  switch (node->type) {
    case YAML_SCALAR_NODE:
      return std::string(reinterpret_cast<const char*>(node->data.scalar.value),
                         node->data.scalar.length);
    case YAML_SEQUENCE_NODE: {
      nlohmann::ordered_json j = nlohmann::ordered_json::array();
      for (yaml_node_item_t* i = node->data.sequence.items.start; i < node->data.sequence.items.top;
           ++i)
        j.push_back(json_of(doc, yaml_document_get_node(doc, *i), budget, path));
      return j;
    }
    case YAML_MAPPING_NODE: {
      nlohmann::ordered_json j = nlohmann::ordered_json::object();
      for (yaml_node_pair_t* p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
           ++p) {
        yaml_node_t* key = yaml_document_get_node(doc, p->key);
        if (key == nullptr || key->type != YAML_SCALAR_NODE)
          throw CategoryRulesError(path + ": a mapping's key is not a plain name");
        j[std::string(reinterpret_cast<const char*>(key->data.scalar.value),
                      key->data.scalar.length)] =
            json_of(doc, yaml_document_get_node(doc, p->value), budget, path);
      }
      return j;
    }
    default:
      return nullptr;
  }
}

// The rules file's YAML as JSON (libyaml's document loader; its errors name the line).
nlohmann::ordered_json yaml_to_json(const std::string& text, const std::string& path) {
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser))
    throw CategoryRulesError(path + ": cannot read YAML (out of memory)");
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()),
                               text.size());
  yaml_document_t doc;
  if (!yaml_parser_load(&parser, &doc)) {
    const std::string problem = parser.problem ? parser.problem : "unreadable";
    const size_t line = parser.problem_mark.line + 1;
    yaml_parser_delete(&parser);
    throw CategoryRulesError(path + ": not YAML (line " + std::to_string(line) + ": " + problem +
                             ")");
  }
  yaml_parser_delete(&parser);
  size_t budget = kMaxYamlNodes;
  nlohmann::ordered_json j;
  try {
    j = json_of(&doc, yaml_document_get_root_node(&doc), budget, path);
  } catch (...) {
    yaml_document_delete(&doc);
    throw;
  }
  yaml_document_delete(&doc);
  return j;
}
#endif

}  // namespace

bool CategoryRules::reads_yaml() {
#ifdef TIDEMARK_HAVE_YAML
  return true;
#else
  return false;
#endif
}

std::shared_ptr<CategoryRules> CategoryRules::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CategoryRulesError(path + ": cannot read the category rules");
  std::stringstream ss;
  ss << in.rdbuf();
  if (!yaml_name(path)) return parse(ss.str(), path);
#ifdef TIDEMARK_HAVE_YAML
  const nlohmann::ordered_json doc = yaml_to_json(ss.str(), path);
  if (!doc.is_object())
    throw CategoryRulesError(
        path + ": the rules are a mapping of names to patterns, or {rules: [...], rest: NAME}");
  return parse(doc.dump(), path);
#else
  throw CategoryRulesError(
      path + ": this build reads no YAML (built without libyaml): give the rules as JSON");
#endif
}

namespace {
// Note [Found rules files]: a rules file found by itself is applied only when the user could
// have put it there: owned by the user running the command (or root), and not writable by
// others. A file another user planted in a shared directory (/tmp) is refused, naming it,
// never applied: it could relabel the report the user sends, or make the command read a huge
// file or run a costly pattern.
void check_found_file(const std::filesystem::path& file) {
  struct stat st {};
  struct stat link {};
  if (::stat(file.c_str(), &st) != 0 || ::lstat(file.c_str(), &link) != 0) return;
  const uid_t me = ::geteuid();
  for (const struct stat* s : {&st, &link}) {
    if (s->st_uid != me && s->st_uid != 0)
      throw CategoryRulesError(file.string() + ": found beside the trace but owned by user " +
                               std::to_string(s->st_uid) +
                               ", not by you: not applied; give rules with --categories FILE");
  }
  if (st.st_mode & S_IWOTH)
    throw CategoryRulesError(file.string() +
                             ": found beside the trace but anyone may write it: not applied; "
                             "chmod o-w it, or give rules with --categories FILE");
}
}  // namespace

std::shared_ptr<CategoryRules> CategoryRules::find(const std::string& trace_path,
                                                   const std::string& file) {
  if (!file.empty()) return load(file);
  const std::filesystem::path dir = std::filesystem::path(trace_path).parent_path();
  for (const char* name : {kRulesFile, kYamlRulesFile}) {
    std::error_code ec;
    const std::filesystem::path beside = dir / name;
    if (!std::filesystem::is_regular_file(beside, ec)) continue;
    check_found_file(beside);
    return load(beside.string());
  }
  return nullptr;
}

std::shared_ptr<CategoryRules> CategoryRules::parse(const std::string& text,
                                                    const std::string& source) {
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw CategoryRulesError(
        source +
        ": category rules are a JSON object ({\"name\": \"regex\", ...} or {\"rules\": [...]})");
  auto rules = std::make_shared<CategoryRules>();
  rules->source_ = source;
  auto string_of = [&](const nlohmann::ordered_json& v, const std::string& where) -> std::string {
    if (!v.is_string() || v.get<std::string>().empty())
      throw CategoryRulesError(source + ": " + where + ": expected a non-empty string");
    return v.get<std::string>();
  };
  if (j.contains("rules")) {
    if (!j["rules"].is_array()) throw CategoryRulesError(source + ": \"rules\" is a list of rules");
    size_t n = 0;
    for (const auto& r : j["rules"]) {
      ++n;
      const std::string where = "rule " + std::to_string(n);
      if (!r.is_object() || !r.contains("name"))
        throw CategoryRulesError(source + ": " + where + ": needs a \"name\"");
      Rule rule;
      rule.name = string_of(r["name"], where + " name");
      for (const char* key : {"function", "file", "module"})
        if (r.contains(key)) {
          auto re = compile(string_of(r[key], where + " " + key),
                            source + ": " + where + " (" + rule.name + ")");
          (std::string(key) == "function" ? rule.function
           : std::string(key) == "file"   ? rule.file
                                          : rule.module) = std::move(re);
        }
      if (!rule.function && !rule.file && !rule.module)
        throw CategoryRulesError(source + ": " + where + " (" + rule.name +
                                 "): needs a \"function\", \"file\" or \"module\" pattern");
      rules->rules_.push_back(std::move(rule));
    }
    if (j.contains("rest")) rules->rest_ = string_of(j["rest"], "rest");
  } else {
    for (const auto& [name, pattern] : j.items()) {
      if (name == "rest") {
        rules->rest_ = string_of(pattern, "rest");
        continue;
      }
      Rule rule;
      rule.name = name;
      rule.any = compile(string_of(pattern, "\"" + name + "\""), source + ": \"" + name + "\"");
      rules->rules_.push_back(std::move(rule));
    }
  }
  if (rules->rules_.empty()) throw CategoryRulesError(source + ": no category rules in it");
  if (rules->names().size() > 200) throw CategoryRulesError(source + ": more than 200 categories");
  return rules;
}

std::vector<std::string> CategoryRules::names() const {
  std::vector<std::string> out;
  for (const Rule& r : rules_)
    if (std::find(out.begin(), out.end(), r.name) == out.end()) out.push_back(r.name);
  if (std::find(out.begin(), out.end(), rest_) == out.end()) out.push_back(rest_);
  return out;
}

const std::string& CategoryRules::category_of(
    const std::vector<store::ResolvedFrame>& frames) const {
  for (const Rule& r : rules_)
    for (const store::ResolvedFrame& f : frames) {
      if (r.any) {
        if (std::regex_search(f.function, *r.any) || std::regex_search(f.file, *r.any))
          return r.name;
        continue;
      }
      if (r.function && !std::regex_search(f.function, *r.function)) continue;
      if (r.file && !std::regex_search(f.file, *r.file)) continue;
      if (r.module && !std::regex_search(f.module.empty() ? f.file : f.module, *r.module)) continue;
      return r.name;
    }
  return rest_;
}

}  // namespace tidemark::analysis
