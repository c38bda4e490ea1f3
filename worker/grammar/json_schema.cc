#include "worker/grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "worker/grammar/gbnf_writer.h"
#include "worker/grammar/json_grammar.h"
#include "worker/grammar/json_schema_converter.h"
#include "worker/grammar/json_schema_scalars.h"
#include "worker/grammar/regex_overlap.h"

namespace llama::grammar {
namespace internal_grammar {
namespace {

using ::nlohmann::ordered_json;

const char* const kTypes[] = {"null", "boolean", "integer", "number", "string", "array", "object"};

// Schemas this deep are refused before the stack is.
constexpr int kMaxDepth = 64;

// What a schema without "type" is taken to be: the types its keywords
// apply to (a value of another type is valid too; leaving it out keeps to a
// subset). None: any value.
std::vector<std::string> InferredTypes(const ordered_json& schema) {
  const std::pair<const char*, std::vector<const char*>> kByType[] = {
      {"object",
       {"properties", "required", "additionalProperties", "propertyNames", "maxProperties", "minProperties",
        "dependentRequired", "dependencies", "patternProperties"}},
      {"array", {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems"}},
      {"string", {"pattern", "format", "minLength", "maxLength"}},
      {"number", {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}},
  };
  std::vector<std::string> types;
  for (const auto& [type, keywords] : kByType) {
    if (std::any_of(keywords.begin(), keywords.end(), [&](const char* k) { return schema.contains(k); })) {
      types.push_back(type);
    }
  }
  return types;
}

}  // namespace

bool HasType(const ordered_json& value, absl::string_view type) {
  if (type == "null") return value.is_null();
  if (type == "boolean") return value.is_boolean();
  if (type == "integer") {
    return value.is_number_integer() ||
           (value.is_number_float() && std::floor(value.get<double>()) == value.get<double>());
  }
  if (type == "number") return value.is_number();
  if (type == "string") return value.is_string();
  if (type == "array") return value.is_array();
  return value.is_object();
}

absl::StatusOr<std::vector<std::string>> Types(const ordered_json& schema, const std::string& pointer) {
  if (!schema.contains("type")) return InferredTypes(schema);
  const ordered_json& type = schema["type"];
  std::vector<std::string> types;
  for (const ordered_json& t : type.is_array() ? type : ordered_json::array({type})) {
    if (!t.is_string() || std::find(std::begin(kTypes), std::end(kTypes), t.get<std::string>()) == std::end(kTypes)) {
      return Unsupported("type", pointer, absl::StrCat(JsonText(t), " is not a JSON Schema type"));
    }
    types.push_back(t.get<std::string>());
  }
  if (types.empty()) return Unsupported("type", pointer, "an empty list of types matches nothing");
  return types;
}

// The keywords compiled; every other one that Constrains is refused.
const absl::flat_hash_set<std::string>& Compiled() {
  static const auto* keywords = new absl::flat_hash_set<std::string>{"type",
                                                                     "properties",
                                                                     "required",
                                                                     "additionalProperties",
                                                                     "propertyNames",
                                                                     "maxProperties",
                                                                     "minProperties",
                                                                     "dependentRequired",
                                                                     "dependencies",
                                                                     "patternProperties",
                                                                     "items",
                                                                     "prefixItems",
                                                                     "additionalItems",
                                                                     "minItems",
                                                                     "maxItems",
                                                                     "uniqueItems",
                                                                     "enum",
                                                                     "const",
                                                                     "anyOf",
                                                                     "oneOf",
                                                                     "allOf",
                                                                     "$ref",
                                                                     "pattern",
                                                                     "format",
                                                                     "minLength",
                                                                     "maxLength",
                                                                     "minimum",
                                                                     "maximum",
                                                                     "exclusiveMinimum",
                                                                     "exclusiveMaximum"};
  return *keywords;
}

// The keywords of drafts 4, 6, 7, 2019-09 and 2020-12 that decide which
// values are valid. Every other keyword is an annotation (title, default,
// readOnly, $comment, contentMediaType, ...) or unknown (x-* vendor
// keywords, OpenAPI's discriminator and nullable, draft 4's readonly,
// misspellings), which JSON Schema says validators ignore; so do we.
// "then" and "else" count though they say nothing without "if". $id and
// draft 4's id change what references resolve against: Ref checks them.
bool Constrains(const std::string& keyword) {
  static const auto* keywords = new absl::flat_hash_set<std::string>{
      "type",          "enum",          "const",          "multipleOf",          "maximum",
      "minimum",       "exclusiveMaximum", "exclusiveMinimum", "maxLength",      "minLength",
      "pattern",       "format",        "items",          "additionalItems",     "prefixItems",
      "maxItems",      "minItems",      "uniqueItems",    "contains",            "maxContains",
      "minContains",   "unevaluatedItems", "properties",  "patternProperties",   "additionalProperties",
      "required",      "maxProperties", "minProperties",  "propertyNames",       "dependencies",
      "dependentRequired", "dependentSchemas", "unevaluatedProperties", "allOf",  "anyOf",
      "oneOf",         "not",           "if",             "then",                "else",
      "$ref",          "$dynamicRef",   "$recursiveRef"};
  return keywords->contains(keyword);
}

bool HasConstraints(const ordered_json& schema) {
  if (!schema.is_object()) return schema == false;
  return std::any_of(schema.items().begin(), schema.items().end(),
                     [](const auto& kv) { return Constrains(kv.key()); });
}

// `keyword` is compiled only alone: a grammar cannot intersect it with
// the other keywords beside it.
absl::Status Alone(const ordered_json& schema, const char* keyword, const std::string& pointer,
                   std::initializer_list<const char*> allowed) {
  for (const auto& kv : schema.items()) {
    if (kv.key() == keyword || !Constrains(kv.key())) continue;
    if (std::find(allowed.begin(), allowed.end(), kv.key()) != allowed.end()) continue;
    return Unsupported(kv.key(), pointer, absl::StrCat("next to \"", keyword, "\""));
  }
  return absl::OkStatus();
}

std::string Child(const std::string& pointer, absl::string_view key) {
  return absl::StrCat(pointer, "/", absl::StrReplaceAll(key, {{"~", "~0"}, {"/", "~1"}}));
}
std::string Child(const std::string& pointer, size_t index) { return absl::StrCat(pointer, "/", index); }


absl::StatusOr<std::string> SchemaConverter::Convert() {
  const std::string root = rules_.NewName("root");
  refs_["#"] = root;
  ASSIGN_OR_RETURN(const std::string item, Visit(document_, "", root));
  if (!rules_.Defined(root)) rules_.Define(root, item);
  return rules_.Text();
}

absl::StatusOr<std::string> SchemaConverter::Visit(const ordered_json& schema, const std::string& pointer,
                                                   const std::string& name) {
  if (depth_ >= kMaxDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("the schema at ", pointer.empty() ? "/" : pointer, " nests deeper than ", kMaxDepth, " levels"));
  }
  ++depth_;
  absl::StatusOr<std::string> item = VisitKeywords(schema, pointer, name);
  --depth_;
  return item;
}

absl::StatusOr<std::string> SchemaConverter::VisitKeywords(const ordered_json& schema, const std::string& pointer,
                                                           const std::string& name) {
  if (schema == true) return rules_.Use("value");
  const std::string where = pointer.empty() ? "/" : pointer;
  if (schema == false)
    return absl::InvalidArgumentError(absl::StrCat("the schema at ", where, " is false: no value matches it"));
  if (!schema.is_object())
    return absl::InvalidArgumentError(absl::StrCat("the schema at ", where, " is not an object"));
  // Drafts 4 to 7: a $ref stands for its target, whatever is beside it.
  if (schema.contains("$ref") && LegacyRef()) return Ref(schema["$ref"], pointer);
  // A validator reads a schema by its document's draft (none: 2020-12):
  // another draft inside it, or draft 4's boolean exclusive bounds in a
  // later one (which python-jsonschema compares with as 1 and 0), would be
  // read otherwise than compiled.
  if (schema.contains("$schema") && &schema != &document_ && schema["$schema"] != document_.value("$schema", ordered_json())) {
    return Unsupported("$schema", pointer, "another draft inside the document");
  }
  for (const char* k : {"exclusiveMinimum", "exclusiveMaximum"}) {
    if (schema.contains(k) && schema[k].is_boolean() && !Draft4()) {
      return Unsupported(k, pointer, "a boolean is draft 4's form; this document's draft (no $schema: 2020-12) takes a number");
    }
  }
  if (schema.contains("if")) return Conditional(schema, pointer, name);
  if (schema.contains("not")) return Negation(schema, pointer, name);
  for (const auto& kv : schema.items()) {
    if (Constrains(kv.key()) && !Compiled().contains(kv.key())) return Unsupported(kv.key(), pointer);
  }
  if (schema.contains("$ref")) {
    if (Alone(schema, "$ref", pointer).ok()) return Ref(schema["$ref"], pointer);
    return AllOf(schema, pointer, name);  // 2019-09 on: the target and the keywords beside it both hold.
  }
  if (schema.contains("allOf")) return AllOf(schema, pointer, name);
  for (const char* keyword : {"anyOf", "oneOf"}) {
    if (!schema.contains(keyword)) continue;
    if (!Alone(schema, keyword, pointer, {"type"}).ok()) return Distributed(schema, keyword, pointer, name);
    return keyword == std::string("anyOf") ? AnyOf(schema, pointer, name) : OneOf(schema, pointer, name);
  }
  if (schema.contains("enum") || schema.contains("const")) return Values(schema, pointer);
  ASSIGN_OR_RETURN(const std::vector<std::string> types, Types(schema, pointer));
  if (types.empty()) return rules_.Use("value");
  std::vector<std::string> alternatives;
  for (const std::string& type : types) {
    const std::string rule = types.size() == 1 ? name : rules_.NewName(absl::StrCat(name, "-", type));
    ASSIGN_OR_RETURN(std::string item, Typed(schema, pointer, rule, type));
    alternatives.push_back(std::move(item));
  }
  return GbnfAlternatives(alternatives);
}

absl::StatusOr<std::string> SchemaConverter::Typed(const ordered_json& schema, const std::string& pointer,
                                                   const std::string& name, const std::string& type) {
  if (type == "string") return internal_grammar::StringItem(schema, pointer, rules_);
  if (type == "integer") return internal_grammar::IntegerItem(schema, pointer, rules_);
  if (type == "number") return internal_grammar::NumberItem(schema, pointer, rules_);
  if (type == "array") return Array(schema, pointer, name);
  if (type == "object") return Object(schema, pointer, name);
  return rules_.Use(type);  // null, boolean
}

namespace {

// Whether `value` passes the type, string and number keywords of `schema`
// (Values lists them); an error where a pattern cannot be asked.
absl::StatusOr<bool> PassesFilters(const ordered_json& schema, const ordered_json& value,
                                   const std::vector<std::string>& types, const std::string& pointer) {
  if (!types.empty() &&
      std::none_of(types.begin(), types.end(), [&](const std::string& t) { return HasType(value, t); })) {
    return false;
  }
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    ASSIGN_OR_RETURN(const std::optional<int64_t> min_length, ReadCount(schema, "minLength", pointer));
    ASSIGN_OR_RETURN(const std::optional<int64_t> max_length, ReadCount(schema, "maxLength", pointer));
    if ((min_length && CodePoints(text) < *min_length) || (max_length && CodePoints(text) > *max_length)) return false;
    if (schema.contains("pattern")) {
      if (!schema["pattern"].is_string()) return Unsupported("pattern", pointer, "it must be a string");
      const absl::StatusOr<bool> found = SurelyFinds(schema["pattern"].get<std::string>(), text);
      if (!found.ok()) {
        return Unsupported("pattern", pointer, absl::StrCat("next to enum values: ", found.status().message()));
      }
      if (!*found) return false;
    }
  }
  if (value.is_number()) {
    const double v = value.get<double>();
    struct Bound {
      const char* keyword;
      bool lower, exclusive;
    };
    for (const Bound& b : {Bound{"minimum", true, false}, Bound{"maximum", false, false},
                           Bound{"exclusiveMinimum", true, true}, Bound{"exclusiveMaximum", false, true}}) {
      if (!schema.contains(b.keyword) || schema[b.keyword].is_boolean()) continue;
      if (!schema[b.keyword].is_number()) return Unsupported(b.keyword, pointer, "it must be a number");
      const double bound = schema[b.keyword].get<double>();
      // Draft 4 makes minimum and maximum exclusive with a boolean beside.
      const char* flag = b.lower ? "exclusiveMinimum" : "exclusiveMaximum";
      const bool exclusive = b.exclusive || (schema.contains(flag) && schema[flag] == true);
      if (b.lower ? (exclusive ? v <= bound : v < bound) : (exclusive ? v >= bound : v > bound)) return false;
    }
  }
  return true;
}

}  // namespace

// enum and const: the values, filtered by "type" and by the string and
// number keywords beside them, each written compactly.
absl::StatusOr<std::string> SchemaConverter::Values(const ordered_json& schema, const std::string& pointer) {
  const char* keyword = schema.contains("enum") ? "enum" : "const";
  // The keywords beside that say which of the values are valid; a value of
  // another kind than one applies to passes it.
  RETURN_IF_ERROR(Alone(schema, keyword, pointer,
                        {"type", "enum", "const", "minLength", "maxLength", "pattern", "minimum", "maximum",
                         "exclusiveMinimum", "exclusiveMaximum"}));
  if (schema.contains("enum") && !schema["enum"].is_array()) return Unsupported("enum", pointer, "it must be an array");
  ordered_json values = schema.contains("enum") ? schema["enum"] : ordered_json::array({schema["const"]});
  std::vector<std::string> types;
  if (schema.contains("type")) {
    ASSIGN_OR_RETURN(types, Types(schema, pointer));
  }
  std::vector<std::string> alternatives;
  for (const ordered_json& value : values) {
    if (schema.contains("const") && value != schema["const"]) continue;
    ASSIGN_OR_RETURN(const bool passes, PassesFilters(schema, value, types, pointer));
    if (passes) alternatives.push_back(GbnfLiteral(JsonText(value)));
  }
  if (alternatives.empty()) return Contradiction(keyword, pointer, "no value passes the keywords beside it");
  return GbnfAlternatives(alternatives);
}

// The nodes from the document down to `pointer` ("" or "/a/0/b"), both
// ends included; empty when it points at nothing.
std::vector<const ordered_json*> SchemaConverter::NodesAlong(absl::string_view pointer) const {
  std::vector<const ordered_json*> nodes = {&document_};
  if (pointer.empty()) return nodes;
  for (const absl::string_view raw : absl::StrSplit(pointer.substr(1), '/')) {
    const ordered_json& node = *nodes.back();
    const std::string key = absl::StrReplaceAll(raw, {{"~1", "/"}, {"~0", "~"}});
    if (node.is_object() && node.contains(key)) {
      nodes.push_back(&node[key]);
    } else if (node.is_array() && !key.empty() && std::all_of(key.begin(), key.end(), ::isdigit) &&
               std::stoul(key) < node.size()) {
      nodes.push_back(&node[std::stoul(key)]);
    } else {
      return {};
    }
  }
  return nodes;
}

// The schema a local reference (#, #/$defs/a, any JSON pointer) points at.
// A reference inside a schema with its own $id (or draft 4's id) is
// relative to that one, not to the document: refused.
absl::StatusOr<const ordered_json*> SchemaConverter::Resolve(const ordered_json& ref, const std::string& pointer) {
  if (!ref.is_string()) return Unsupported("$ref", pointer, "it must be a string");
  const std::string target = ref.get<std::string>();
  if (target.empty() || target[0] != '#' || (target.size() > 1 && target[1] != '/')) {
    return Unsupported("$ref", pointer, absl::StrCat("\"", target, "\" is not a pointer into this schema (#/...)"));
  }
  const std::vector<const ordered_json*> around = NodesAlong(pointer);
  for (size_t i = 1; i < around.size(); ++i) {
    for (const char* id : {"$id", "id"}) {
      const ordered_json& node = *around[i];
      if (node.is_object() && node.contains(id) && node[id].is_string() &&
          !absl::StartsWith(node[id].get<std::string>(), "#")) {
        return Unsupported("$ref", pointer, absl::StrCat("it is inside a schema with its own \"", id, "\""));
      }
    }
  }
  const std::vector<const ordered_json*> nodes = NodesAlong(absl::string_view(target).substr(1));
  if (nodes.empty()) return Unsupported("$ref", pointer, absl::StrCat("\"", target, "\" points at nothing"));
  return nodes.back();
}

// A reference is a rule named after what it points at, defined once, so
// recursive schemas give recursive rules.
absl::StatusOr<std::string> SchemaConverter::Ref(const ordered_json& ref, const std::string& pointer) {
  ASSIGN_OR_RETURN(const ordered_json* target, Resolve(ref, pointer));
  const std::string text = ref.get<std::string>();
  if (const auto it = refs_.find(text); it != refs_.end()) return it->second;
  const std::string name = rules_.NewName(text.substr(text.rfind('/') + 1));
  refs_[text] = name;
  ASSIGN_OR_RETURN(const std::string item, Visit(*target, text.substr(1), name));
  if (!rules_.Defined(name)) rules_.Define(name, item);
  return name;
}

namespace {

// Keywords JSON Schema defines (drafts 4 to 2020-12, and OpenAPI's) that
// decide nothing: annotations and identifiers.
bool Defined(const std::string& keyword) {
  static const auto* keywords = new absl::flat_hash_set<std::string>{
      "$schema",     "$id",      "id",          "$anchor",       "$dynamicAnchor",  "$recursiveAnchor",
      "$vocabulary", "$comment", "$defs",       "definitions",   "title",           "description",
      "default",     "examples", "deprecated",  "readOnly",      "writeOnly",       "contentMediaType",
      "contentEncoding", "contentSchema", "discriminator", "nullable", "example", "xml", "externalDocs"};
  return keywords->contains(keyword);
}

void CollectUnknown(const ordered_json& schema, const std::string& pointer, size_t limit,
                    std::vector<std::string>& unknown) {
  if (!schema.is_object()) return;
  for (const auto& kv : schema.items()) {
    if (unknown.size() >= limit) return;
    const std::string& k = kv.key();
    const ordered_json& v = kv.value();
    const std::string at = Child(pointer, k);
    if (!Constrains(k) && !Defined(k)) {
      unknown.push_back(absl::StrCat(k, " at ", pointer.empty() ? "/" : pointer));
    } else if (k == "properties" || k == "patternProperties" || k == "$defs" || k == "definitions" ||
               k == "dependentSchemas" || k == "dependencies") {  // Maps of subschemas.
      if (!v.is_object()) continue;
      for (const auto& sub : v.items()) CollectUnknown(sub.value(), Child(at, sub.key()), limit, unknown);
    } else if (k == "allOf" || k == "anyOf" || k == "oneOf" || k == "prefixItems" || (k == "items" && v.is_array())) {
      if (!v.is_array()) continue;
      for (size_t i = 0; i < v.size(); ++i) CollectUnknown(v[i], Child(at, i), limit, unknown);
    } else if (k == "items" || k == "additionalItems" || k == "additionalProperties" || k == "propertyNames" ||
               k == "contains" || k == "not" || k == "if" || k == "then" || k == "else" ||
               k == "unevaluatedProperties" || k == "unevaluatedItems" || k == "contentSchema") {
      CollectUnknown(v, at, limit, unknown);
    }
  }
}

}  // namespace

}  // namespace internal_grammar

namespace {

// Doubles keep every integer up to 2^53 exactly.
constexpr double kMaxExactWhole = 9007199254740992.0;

nlohmann::ordered_json WholeNumbersAsIntegers(const nlohmann::ordered_json& value) {
  if (value.is_number_float()) {
    const double v = value.get<double>();
    if (std::floor(v) == v && std::fabs(v) <= kMaxExactWhole) return static_cast<int64_t>(v);
    return value;
  }
  if (!value.is_structured()) return value;
  nlohmann::ordered_json out = value;
  for (auto& item : out) item = WholeNumbersAsIntegers(item);
  return out;
}

}  // namespace

std::string JsonText(const nlohmann::ordered_json& value) {
  return WholeNumbersAsIntegers(value).dump(-1, ' ', /*ensure_ascii=*/false,
                                            nlohmann::ordered_json::error_handler_t::replace);
}

std::vector<std::string> UnknownKeywords(const nlohmann::ordered_json& schema, size_t limit) {
  std::vector<std::string> unknown;
  internal_grammar::CollectUnknown(schema, "", limit, unknown);
  return unknown;
}

absl::StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema) {
  return internal_grammar::SchemaConverter(schema).Convert();
}

absl::StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::json& schema) {
  // Through text: the two json types do not convert directly.
  return JsonSchemaToGbnf(nlohmann::ordered_json::parse(
      schema.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace)));
}

std::string JsonObjectGbnf() {
  internal_grammar::GbnfRules rules;
  rules.Define(rules.NewName("root"), rules.Use("object"));
  return rules.Text();
}

}  // namespace llama::grammar
