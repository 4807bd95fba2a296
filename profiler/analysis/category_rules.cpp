#include "profiler/analysis/category_rules.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "profiler/store/trace_format.h"

#ifdef TIDEMARK_HAVE_YAML
#include <yaml-cpp/yaml.h>
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
// and every scalar a string (the rules' values are names and patterns).
nlohmann::ordered_json json_of(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::ordered_json j = nlohmann::ordered_json::object();
      for (const auto& kv : n) j[kv.first.as<std::string>()] = json_of(kv.second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::ordered_json j = nlohmann::ordered_json::array();
      for (const auto& v : n) j.push_back(json_of(v));
      return j;
    }
    case YAML::NodeType::Scalar:
      return n.as<std::string>();
    default:
      return nullptr;
  }
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
  YAML::Node doc;
  try {
    doc = YAML::Load(ss.str());
  } catch (const YAML::Exception& e) {
    throw CategoryRulesError(path + ": not YAML (" + e.what() + ")");
  }
  if (!doc.IsMap())
    throw CategoryRulesError(
        path + ": the rules are a mapping of names to patterns, or {rules: [...], rest: NAME}");
  return parse(json_of(doc).dump(), path);
#else
  throw CategoryRulesError(
      path + ": this build reads no YAML (built without yaml-cpp): give the rules as JSON");
#endif
}

std::shared_ptr<CategoryRules> CategoryRules::find(const std::string& trace_path,
                                                   const std::string& file) {
  if (!file.empty()) return load(file);
  const std::filesystem::path beside = std::filesystem::path(trace_path).parent_path() / kRulesFile;
  std::error_code ec;
  if (std::filesystem::is_regular_file(beside, ec)) return load(beside.string());
  const std::filesystem::path beside_yaml =
      std::filesystem::path(trace_path).parent_path() / kYamlRulesFile;
  if (std::filesystem::is_regular_file(beside_yaml, ec)) return load(beside_yaml.string());
  if (std::filesystem::is_regular_file(kRulesFile, ec)) return load(kRulesFile);
  if (std::filesystem::is_regular_file(kYamlRulesFile, ec)) return load(kYamlRulesFile);
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
