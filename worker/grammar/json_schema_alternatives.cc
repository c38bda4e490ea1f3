// anyOf and oneOf for SchemaConverter (json_schema_converter.h), and the
// "type" beside them, which each branch is held to.
//
// A grammar cannot say "exactly one of": it writes the alternation of the
// branches' grammars, which is sound only when no value one branch's
// grammar writes is valid under another branch's schema. That is decided
// from what each branch is known to admit (Facts): kinds of values,
// enum/const values, and for objects the required keys, the keys' const or
// enum values and the keys allowed at all. Branches that are a bare
// "type" give up what other bare-type branches accept ({"oneOf":
// [{"type": "number"}, {"type": "integer"}]} is the numbers that are not
// whole); any other overlap not ruled out is refused.

#include <algorithm>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "worker/grammar/gbnf_writer.h"
#include "worker/grammar/json_schema_converter.h"
#include "worker/grammar/json_schema_scalars.h"
#include "worker/grammar/regex_overlap.h"

namespace llama::grammar::internal_grammar {
namespace {

using ::nlohmann::ordered_json;

// Kinds of JSON values, as bits: whole numbers apart from the others, as
// "integer" is a kind of "number" (2.0 is an integer too).
enum Kind : uint8_t {
  kNull = 1,
  kBoolean = 2,
  kWhole = 4,
  kFraction = 8,
  kString = 16,
  kArray = 32,
  kObject = 64,
  kAnyKind = 127,
};

uint8_t KindsOfType(const std::string& type) {
  if (type == "null") return kNull;
  if (type == "boolean") return kBoolean;
  if (type == "integer") return kWhole;
  if (type == "number") return kWhole | kFraction;
  if (type == "string") return kString;
  if (type == "array") return kArray;
  return kObject;
}

uint8_t KindOfValue(const ordered_json& value) {
  if (value.is_number()) return HasType(value, "integer") ? kWhole : kFraction;
  if (value.is_null()) return kNull;
  if (value.is_boolean()) return kBoolean;
  if (value.is_string()) return kString;
  return value.is_array() ? kArray : kObject;
}

// Recursion through $ref stops here, knowing nothing more.
constexpr int kMaxFactsDepth = 16;

// nlohmann compares 1 and 1.0 as equal numbers, as JSON Schema does.
bool Contains(const std::vector<ordered_json>& values, const ordered_json& value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

bool ShareAValue(const std::vector<ordered_json>& a, const std::vector<ordered_json>& b) {
  return std::any_of(a.begin(), a.end(), [&](const ordered_json& x) { return Contains(b, x); });
}

}  // namespace

// What is known of the values a schema accepts (valid_*) and of those its
// grammar writes (written_*, a subset); by default, nothing: any value.
struct SchemaConverter::Facts {
  uint8_t valid_kinds = kAnyKind;
  uint8_t written_kinds = kAnyKind;
  // The schema accepts exactly the values of valid_kinds ("type" alone).
  bool bare_type = false;
  // enum or const: it accepts no other values.
  std::optional<std::vector<ordered_json>> values;
  // Keys every object it accepts has.
  absl::flat_hash_set<std::string> required;
  // Where an object it accepts has the key, its value is one of these
  // (none: the key's schema is false).
  std::map<std::string, std::vector<ordered_json>> key_values;
  // Objects it accepts have no other keys; objects its grammar writes too.
  std::optional<absl::flat_hash_set<std::string>> valid_keys, written_keys;
  // Strings it accepts (and so those it writes) match this "pattern".
  std::optional<std::string> pattern;
};

SchemaConverter::Facts SchemaConverter::FactsOf(const ordered_json& schema, int depth) {
  Facts facts;
  if (schema == true) facts.bare_type = true;
  if (!schema.is_object() || depth > kMaxFactsDepth) return facts;
  const bool ref_alone = schema.contains("$ref") && (LegacyRef() || Alone(schema, "$ref", "").ok());
  if (ref_alone) {
    const absl::StatusOr<const ordered_json*> target = Resolve(schema["$ref"], "");
    return target.ok() ? FactsOf(**target, depth + 1) : facts;
  }
  if (schema.contains("allOf") || schema.contains("$ref")) {
    // The grammar writes the merged schema (AllOf), whose facts are exact.
    std::vector<std::pair<const ordered_json*, std::string>> parts;
    if (!AllOfParts(schema, "", 0, parts).ok()) return facts;
    if (parts.empty()) return FactsOf(ordered_json(true), depth + 1);
    if (parts.size() == 1) return FactsOf(*parts[0].first, depth + 1);
    absl::StatusOr<ordered_json> merged = Merge(parts, "");
    if (merged.ok()) return FactsOf(owned_.emplace_back(*std::move(merged)), depth + 1);
    if (IsContradiction(merged.status())) facts.valid_kinds = facts.written_kinds = 0;  // No value at all.
    return facts;
  }
  for (const char* keyword : {"anyOf", "oneOf"}) {
    if (!schema.contains(keyword) || !schema[keyword].is_array() || schema[keyword].empty()) continue;
    // A value it accepts is one a branch accepts, and the grammar writes a
    // branch's values: what holds of every branch holds. Other keywords
    // beside it than "type" are distributed over the branches (Distributed).
    ordered_json rest = ordered_json::object();
    for (const auto& kv : schema.items()) {
      if (kv.key() != keyword && kv.key() != "type" && Constrains(kv.key())) rest[kv.key()] = kv.value();
    }
    bool first = true;
    for (const ordered_json& branch : schema[keyword]) {
      const ordered_json* with_rest = &branch;
      if (!rest.empty()) with_rest = &owned_.emplace_back(ordered_json{{"allOf", {rest, branch}}});
      Facts f = FactsOf(*with_rest, depth + 1);
      if (first) {
        facts = std::move(f);
        facts.bare_type = false;
        first = false;
        continue;
      }
      facts.valid_kinds |= f.valid_kinds;
      facts.written_kinds |= f.written_kinds;
      if (facts.values && f.values) {
        facts.values->insert(facts.values->end(), f.values->begin(), f.values->end());
      } else {
        facts.values.reset();
      }
      absl::erase_if(facts.required, [&](const std::string& key) { return !f.required.contains(key); });
      for (auto it = facts.key_values.begin(); it != facts.key_values.end();) {
        const auto other = f.key_values.find(it->first);
        if (other == f.key_values.end()) {
          it = facts.key_values.erase(it);
          continue;
        }
        it->second.insert(it->second.end(), other->second.begin(), other->second.end());
        ++it;
      }
      if (facts.pattern != f.pattern) facts.pattern.reset();
      for (auto* keys : {&facts.valid_keys, &facts.written_keys}) {
        const auto& other = keys == &facts.valid_keys ? f.valid_keys : f.written_keys;
        if (keys->has_value() && other.has_value()) {
          (*keys)->insert(other->begin(), other->end());
        } else {
          keys->reset();
        }
      }
    }
    if (schema.contains("type")) {  // Beside them, it holds every branch to its types.
      const Facts typed = FactsOf(ordered_json{{"type", schema["type"]}}, depth + 1);
      facts.valid_kinds &= typed.valid_kinds;
      facts.written_kinds &= typed.valid_kinds;
    }
    return facts;
  }
  absl::StatusOr<std::vector<std::string>> types = Types(schema, "");
  if (!types.ok()) return facts;
  if (schema.contains("enum") || schema.contains("const")) {
    if (schema.contains("enum") && !schema["enum"].is_array()) return facts;
    facts.values.emplace();
    facts.valid_kinds = 0;
    for (const ordered_json& value : schema.contains("enum") ? schema["enum"] : ordered_json::array({schema["const"]})) {
      if (schema.contains("const") && value != schema["const"]) continue;
      if (!types->empty() && std::none_of(types->begin(), types->end(),
                                          [&](const std::string& t) { return HasType(value, t); })) {
        continue;
      }
      facts.values->push_back(value);
      facts.valid_kinds |= KindOfValue(value);
    }
    facts.written_kinds = facts.valid_kinds;
    return facts;
  }
  // The grammar writes the inferred types; the schema accepts the named ones.
  if (!types->empty()) {
    facts.written_kinds = 0;
    for (const std::string& type : *types) facts.written_kinds |= KindsOfType(type);
  }
  if (schema.contains("type")) facts.valid_kinds = facts.written_kinds;
  if (schema.contains("pattern") && schema["pattern"].is_string()) facts.pattern = schema["pattern"];
  facts.bare_type = std::none_of(schema.items().begin(), schema.items().end(), [](const auto& kv) {
    return kv.key() != "type" && Constrains(kv.key());
  });
  if (schema.contains("required") && schema["required"].is_array()) {
    for (const ordered_json& key : schema["required"]) {
      if (key.is_string()) facts.required.insert(key.get<std::string>());
    }
  }
  absl::flat_hash_set<std::string> named;
  if (schema.contains("properties") && schema["properties"].is_object()) {
    for (const auto& kv : schema["properties"].items()) {
      if (kv.value() == false) {  // Never there: neither valid nor written.
        facts.key_values[kv.key()] = {};
        continue;
      }
      named.insert(kv.key());
      Facts property = FactsOf(kv.value(), depth + 1);
      if (property.values) facts.key_values[kv.key()] = std::move(*property.values);
    }
  }
  const bool closed = schema.contains("additionalProperties") && schema["additionalProperties"] == false;
  if (closed && !schema.contains("patternProperties")) facts.valid_keys = named;
  // As ObjectRule writes objects: without additionalProperties or
  // patternProperties, only the named and the required properties unless
  // it names none.
  const bool others = schema.contains("patternProperties") ||
                      (!closed && schema.contains("additionalProperties")) ||
                      (named.empty() && !schema.contains("required"));
  if (!others) {
    facts.written_keys = named;
    facts.written_keys->insert(facts.required.begin(), facts.required.end());
  }
  return facts;
}

std::optional<std::vector<ordered_json>> SchemaConverter::ValuesOf(const ordered_json& schema) {
  return FactsOf(schema, 0).values;
}

namespace {

// A string no reader of `pattern` finds it in (regex_overlap.h).
bool Unmatched(const std::optional<std::string>& pattern, const ordered_json& value) {
  if (!pattern || !value.is_string()) return false;
  const absl::StatusOr<bool> found = MayFind(*pattern, value.get<std::string>());
  return found.ok() && !*found;
}

}  // namespace

// No value that `written`'s grammar writes is accepted by `valid`'s schema.
bool SchemaConverter::Disjoint(const Facts& written, const Facts& valid) {
  const uint8_t common = written.written_kinds & valid.valid_kinds;
  if (common == 0) return true;
  if (written.values) {
    bool any_valid = false;
    for (const ordered_json& value : *written.values) {
      const bool valid_kind = KindOfValue(value) & valid.valid_kinds;
      if (valid_kind && (!valid.values || Contains(*valid.values, value)) && !Unmatched(valid.pattern, value)) {
        any_valid = true;
      }
    }
    if (!any_valid) return true;
  }
  // Strings of a pattern, and values none of which are such strings or
  // strings in which no match of the other pattern is found.
  if (common == kString && written.pattern) {
    if (valid.values &&
        std::all_of(valid.values->begin(), valid.values->end(),
                    [&](const ordered_json& value) { return !value.is_string() || Unmatched(written.pattern, value); })) {
      return true;
    }
    if (valid.pattern) {
      const absl::StatusOr<bool> meet = WholeMatchMeetsSearch(*written.pattern, *valid.pattern);
      if (meet.ok() && !*meet) return true;
    }
  }
  if (common != kObject) return false;
  // Objects: a key one always has that the other excludes, or whose values differ.
  for (const std::string& key : written.required) {
    if (valid.valid_keys && !valid.valid_keys->contains(key)) return true;
    const auto valid_values = valid.key_values.find(key);
    if (valid_values == valid.key_values.end()) continue;
    if (valid_values->second.empty()) return true;
    const auto written_values = written.key_values.find(key);
    if (written_values != written.key_values.end() && !ShareAValue(written_values->second, valid_values->second)) {
      return true;
    }
  }
  for (const std::string& key : valid.required) {
    if (written.written_keys && !written.written_keys->contains(key)) return true;
  }
  return false;
}

std::optional<ordered_json> SchemaConverter::ExclusiveNarrowing(const Facts& written, const Facts& other,
                                                                bool require) {
  if (!written.written_keys || written.written_kinds != kObject) return std::nullopt;
  std::optional<std::string> key;
  const auto take = [&](const std::string& k) {
    if (!key || k < *key) key = k;
  };
  if (!require) {
    for (const std::string& k : other.required) {
      if (!written.required.contains(k) && written.written_keys->contains(k)) take(k);
    }
    if (!key) return std::nullopt;
    return ordered_json{{"properties", {{*key, false}}}};
  }
  for (const std::string& k : *written.written_keys) {
    if (written.required.contains(k)) continue;
    if (other.valid_keys && !other.valid_keys->contains(k)) take(k);
    const auto mine = written.key_values.find(k);
    const auto theirs = other.key_values.find(k);
    if (mine != written.key_values.end() && theirs != other.key_values.end() && !mine->second.empty() &&
        !ShareAValue(mine->second, theirs->second)) {
      take(k);
    }
  }
  if (!key) return std::nullopt;
  return ordered_json{{"required", {*key}}};
}

// The values of `kinds`, for a bare type branch that gave some up.
std::string SchemaConverter::KindsItem(uint8_t kinds) {
  std::vector<std::string> alternatives;
  const std::pair<uint8_t, const char*> kPrimitives[] = {
      {kNull, "null"}, {kBoolean, "boolean"}, {kString, "string"}, {kArray, "array"}, {kObject, "object"}};
  for (const auto& [kind, primitive] : kPrimitives) {
    if (kinds & kind) alternatives.push_back(rules_.Use(primitive));
  }
  const uint8_t numbers = kinds & (kWhole | kFraction);
  if (numbers == kWhole) alternatives.push_back(rules_.Use("integer"));
  if (numbers == kFraction) alternatives.push_back(rules_.Use("non-integer"));
  if (numbers == (kWhole | kFraction)) alternatives.push_back(rules_.Use("number"));
  return GbnfAlternatives(alternatives);
}

// The types both lists allow ("number" and "integer": "integer").
std::vector<std::string> CommonTypes(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> common;
  for (const std::string& x : a) {
    for (const std::string& y : b) {
      const std::string both = x == y ? x : (KindsOfType(x) & KindsOfType(y)) == kWhole ? "integer" : "";
      if (!both.empty() && std::find(common.begin(), common.end(), both) == common.end()) common.push_back(both);
    }
  }
  return common;
}

absl::StatusOr<std::optional<ordered_json>> SchemaConverter::OfTypes(const ordered_json& schema, const char* keyword,
                                                                     size_t index, const std::string& pointer) {
  const ordered_json& branch = schema[keyword][index];
  if (!schema.contains("type")) return branch;
  ASSIGN_OR_RETURN(const std::vector<std::string> types, Types(schema, pointer));
  uint8_t kinds = 0;
  for (const std::string& type : types) kinds |= KindsOfType(type);
  const uint8_t written = FactsOf(branch, 0).written_kinds;
  if ((written & kinds) == 0) return std::nullopt;
  if ((written & ~kinds) == 0) return branch;
  // Narrowed by its own "type": schemas of keywords that "type" selects.
  const bool typed_keywords = branch == true || (branch.is_object() && !branch.contains("$ref") &&
                                                 !branch.contains("allOf") && !branch.contains("anyOf") &&
                                                 !branch.contains("oneOf"));
  if (!typed_keywords) {
    return Unsupported("type", pointer,
                       absl::StrCat("next to \"", keyword, "\": branch ", index, " is not narrowed to its types"));
  }
  ordered_json narrowed = branch == true ? ordered_json::object() : branch;
  std::vector<std::string> own = {"null", "boolean", "integer", "number", "string", "array", "object"};
  if (narrowed.contains("type")) {
    ASSIGN_OR_RETURN(own, Types(narrowed, Child(Child(pointer, keyword), index)));
  }
  narrowed["type"] = CommonTypes(own, types);
  return narrowed;
}

absl::StatusOr<std::string> SchemaConverter::AnyOf(const ordered_json& schema, const std::string& pointer,
                                                   const std::string& name) {
  const ordered_json& branches = schema["anyOf"];
  if (!branches.is_array() || branches.empty()) return Unsupported("anyOf", pointer, "it must be a non-empty array");
  std::vector<std::string> alternatives;
  absl::Status contradiction;
  for (size_t i = 0; i < branches.size(); ++i) {
    ASSIGN_OR_RETURN(const std::optional<ordered_json> branch, OfTypes(schema, "anyOf", i, pointer));
    if (!branch) continue;
    absl::StatusOr<std::string> item =
        Visit(*branch, Child(Child(pointer, "anyOf"), i), rules_.NewName(absl::StrCat(name, "-alt", i)));
    if (!item.ok() && IsContradiction(item.status())) {
      contradiction = item.status();  // A branch no value matches adds nothing.
      continue;
    }
    RETURN_IF_ERROR(item.status());
    alternatives.push_back(*std::move(item));
  }
  if (alternatives.empty() && !contradiction.ok()) return contradiction;
  if (alternatives.empty()) return Unsupported("anyOf", pointer, "no branch is of the types beside it");
  return GbnfAlternatives(alternatives);
}

absl::StatusOr<std::string> SchemaConverter::OneOf(const ordered_json& schema, const std::string& pointer,
                                                   const std::string& name) {
  const ordered_json& branches = schema["oneOf"];
  if (!branches.is_array() || branches.empty()) return Unsupported("oneOf", pointer, "it must be a non-empty array");
  // What each branch accepts, whatever the types beside them: a value of
  // one branch must match no other.
  std::vector<Facts> facts;
  for (const ordered_json& branch : branches) facts.push_back(FactsOf(branch, 0));
  // A bare type branch gives up what another bare type branch accepts.
  for (size_t i = 0; i < facts.size(); ++i) {
    if (!facts[i].bare_type) continue;
    for (size_t j = 0; j < facts.size(); ++j) {
      if (j != i && facts[j].bare_type) facts[i].written_kinds &= ~facts[j].valid_kinds;
    }
  }
  std::vector<std::string> alternatives;
  for (size_t i = 0; i < facts.size(); ++i) {
    ASSIGN_OR_RETURN(std::optional<ordered_json> branch, OfTypes(schema, "oneOf", i, pointer));
    if (!branch) continue;
    Facts written = facts[i];
    written.written_kinds &= FactsOf(*branch, 0).written_kinds;
    if (written.written_kinds == 0) continue;  // Every value it writes another branch accepts too.
    bool narrowed = false;
    for (size_t j = 0; j < facts.size(); ++j) {
      if (j == i || Disjoint(written, facts[j])) continue;
      // Made exclusive where it can be (a subset of the branch): a key
      // branch j requires that this branch may leave out is never written
      // here, or a key this branch may write that branch j forbids, or
      // whose values branch j does not share, is always written.
      for (const bool require : {false, true}) {
        if (Disjoint(written, facts[j])) break;
        std::optional<ordered_json> narrowing = ExclusiveNarrowing(written, facts[j], require);
        if (!narrowing) continue;
        branch = ordered_json{{"allOf", {*branch, *narrowing}}};
        const uint8_t kinds = written.written_kinds;
        written = FactsOf(owned_.emplace_back(*branch), 0);
        written.written_kinds &= kinds;
        narrowed = true;
      }
      if (Disjoint(written, facts[j])) continue;
      return Unsupported("oneOf", pointer,
                         absl::StrCat("a value may match both branch ", i, " and branch ", j,
                                      ": only branches of different types, or objects told apart by a required "
                                      "property's const or enum values or by the properties they allow, are compiled"));
    }
    if (written.bare_type && !narrowed && written.written_kinds != FactsOf(*branch, 0).written_kinds) {
      alternatives.push_back(KindsItem(written.written_kinds));
      continue;
    }
    absl::StatusOr<std::string> item = Visit(owned_.emplace_back(*std::move(branch)), Child(Child(pointer, "oneOf"), i),
                                             rules_.NewName(absl::StrCat(name, "-alt", i)));
    if (!item.ok() && IsContradiction(item.status())) continue;  // A branch no value matches adds nothing.
    RETURN_IF_ERROR(item.status());
    alternatives.push_back(*std::move(item));
  }
  if (alternatives.empty()) return Unsupported("oneOf", pointer, "every value matches two branches or none");
  return GbnfAlternatives(alternatives);
}

}  // namespace llama::grammar::internal_grammar
