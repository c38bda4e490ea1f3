// Objects, arrays and allOf for SchemaConverter (json_schema_converter.h).

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "worker/grammar/gbnf_writer.h"
#include "worker/grammar/json_schema_converter.h"
#include "worker/grammar/json_schema_scalars.h"
#include "worker/grammar/regex_overlap.h"
#include "worker/grammar/regex_to_gbnf.h"
#include "worker/grammar/utf8_ranges.h"

namespace llama::grammar::internal_grammar {
namespace {

using ::nlohmann::ordered_json;

const std::string kComma = R"("," space )";

absl::Status NotNames(const char* keyword, const std::string& pointer) {
  return Unsupported(keyword, pointer, "it must be an array of strings");
}

// The keys every object must have: "required", and the properties that
// dependentRequired (draft 7's dependencies with lists) makes any
// property depend on, which are written always (a subset: the property
// they depend on may be absent), in the order the schema names them.
absl::StatusOr<std::vector<std::string>> RequiredKeys(const ordered_json& schema, const std::string& pointer) {
  std::vector<std::string> keys;
  auto add = [&](const ordered_json& names, const char* keyword) -> absl::Status {
    if (!names.is_array()) return NotNames(keyword, pointer);
    for (const ordered_json& key : names) {
      if (!key.is_string()) return NotNames(keyword, pointer);
      if (std::find(keys.begin(), keys.end(), key.get<std::string>()) == keys.end()) {
        keys.push_back(key.get<std::string>());
      }
    }
    return absl::OkStatus();
  };
  if (schema.contains("required")) RETURN_IF_ERROR(add(schema["required"], "required"));
  for (const char* keyword : {"dependentRequired", "dependencies"}) {
    if (!schema.contains(keyword)) continue;
    if (!schema[keyword].is_object()) return Unsupported(keyword, pointer, "it must be an object");
    for (const auto& kv : schema[keyword].items()) {
      if (!kv.value().is_array()) {
        return Unsupported(keyword, Child(pointer, keyword),
                           absl::StrCat(JsonText(kv.key()), ": only lists of property names are compiled"));
      }
      RETURN_IF_ERROR(add(kv.value(), keyword));
    }
  }
  return keys;
}

// Whether every reader of `pattern` finds it in `key` (surely) or some
// reader may (regex_overlap.h), named as patternProperties' when it cannot
// be told.
absl::StatusOr<bool> PatternFinds(const std::string& pattern, const std::string& key, bool surely,
                                  const std::string& pointer) {
  absl::StatusOr<bool> found = surely ? SurelyFinds(pattern, key) : MayFind(pattern, key);
  if (!found.ok()) {
    return Unsupported("patternProperties", pointer,
                       absl::StrCat("its pattern and the property ", JsonText(key), ": ", found.status().message()));
  }
  return found;
}

// JSON strings in which `pattern` matches: those it matches whole, with
// anything before and after it where it is not anchored (^, $).
absl::StatusOr<std::string> KeyMatching(const std::string& pattern, const std::string& pointer) {
  absl::string_view core = pattern;
  const bool from_start = absl::ConsumePrefix(&core, "^");
  const bool to_end = absl::EndsWith(core, "$") && !absl::EndsWith(core, "\\$");
  if (to_end) core.remove_suffix(1);
  const std::string whole = absl::StrCat(from_start ? "" : ".*", "(?:", core, ")", to_end ? "" : ".*");
  absl::StatusOr<RegexExpression> expression = RegexToGbnfExpression(whole, RegexTarget::kJsonString);
  if (!expression.ok()) return Unsupported("patternProperties", pointer, expression.status().message());
  return GbnfSequence({R"("\"")", expression->gbnf, R"("\"")"});
}

// A JSON string's characters that need no escape.
bool IsPlain(uint32_t c) { return c >= 0x20 && c != '"' && c != '\\'; }

}  // namespace

absl::StatusOr<std::string> SchemaConverter::Object(const ordered_json& schema, const std::string& pointer,
                                                    const std::string& name) {
  std::vector<Member> members;
  if (schema.contains("properties")) {
    const ordered_json& properties = schema["properties"];
    if (!properties.is_object()) return Unsupported("properties", pointer, "it must be an object");
    for (const auto& kv : properties.items()) {
      members.push_back({kv.key(), &kv.value(), Child(Child(pointer, "properties"), kv.key())});
    }
  }
  return ObjectRule(std::move(members), schema, pointer, name);
}

// propertyNames as far as it is compiled: {"maxLength": N} (beside
// "type": "string" and annotations), the keys' length in code points;
// nullopt without it.
absl::StatusOr<std::optional<int64_t>> MaxKeyLength(const ordered_json& schema, const std::string& pointer) {
  if (!schema.contains("propertyNames")) return std::nullopt;
  const ordered_json& names = schema["propertyNames"];
  const std::string at = Child(pointer, "propertyNames");
  // Keys are strings: {"type": "string"} (or true) says nothing of them.
  if (names == true || (names.is_object() && std::none_of(names.items().begin(), names.items().end(), [](const auto& kv) {
                          return Constrains(kv.key()) && !(kv.key() == "type" && kv.value() == "string");
                        }))) {
    return std::nullopt;
  }
  if (!names.is_object() || !names.contains("maxLength") || !names["maxLength"].is_number_unsigned()) {
    return Unsupported("propertyNames", pointer, "only {\"maxLength\": N} is compiled");
  }
  for (const auto& kv : names.items()) {
    static const auto* const kFine =
        new absl::flat_hash_set<std::string>{"maxLength", "title", "description", "$comment", "examples"};
    if (kFine->contains(kv.key()) || (kv.key() == "type" && kv.value() == "string")) continue;
    return Unsupported(kv.key(), at, "propertyNames compiles maxLength only");
  }
  return names["maxLength"].get<int64_t>();
}

// How many properties beyond the `named` ones maxProperties leaves (kNoLimit
// without it): a subset, as no more are written when fewer named ones are
// there. A bound below the named count would have to choose among them,
// which is not compiled.
absl::StatusOr<int64_t> MaxExtraProperties(const ordered_json& schema, const std::string& pointer, size_t named) {
  if (!schema.contains("maxProperties")) return kNoLimit;
  const ordered_json& max = schema["maxProperties"];
  if (!max.is_number_unsigned()) return Unsupported("maxProperties", pointer, "it must be a whole number");
  if (max.get<uint64_t>() < named) {
    return Unsupported("maxProperties", pointer,
                       absl::StrCat("it is below the ", named, " properties named: choosing among them is not compiled"));
  }
  return static_cast<int64_t>(max.get<uint64_t>() - named);
}

// `members` in order, then (with additionalProperties) any others.
absl::StatusOr<std::string> SchemaConverter::ObjectRule(std::vector<Member> members, const ordered_json& schema,
                                                        const std::string& pointer, const std::string& name) {
  static const auto* const kAnything = new ordered_json(true);
  rules_.Use("space");
  const ordered_json* extra = nullptr;  // The schema of other properties.
  std::string extra_pointer = Child(pointer, "additionalProperties");
  std::optional<std::string> key_pattern;  // patternProperties': the other keys match it.
  if (schema.contains("patternProperties")) {
    const ordered_json& patterns = schema["patternProperties"];
    if (!patterns.is_object() || patterns.size() != 1) {
      return Unsupported("patternProperties", pointer, "only one pattern is compiled");
    }
    // The keys written are the pattern's: keys that additionalProperties
    // would take are left out (a subset).
    if (schema.contains("propertyNames")) {
      return Unsupported("patternProperties", pointer, "only without propertyNames beside it");
    }
    key_pattern = patterns.items().begin().key();
    extra = &patterns.items().begin().value();
    extra_pointer = Child(Child(pointer, "patternProperties"), *key_pattern);
  } else if (schema.contains("additionalProperties")) {
    if (schema["additionalProperties"] != false) extra = &schema["additionalProperties"];
  } else if (members.empty() && !schema.contains("required")) {
    extra = kAnything;  // {"type": "object"} alone: any object.
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> required, RequiredKeys(schema, pointer));
  std::vector<std::string> keys;
  for (Member& m : members) {
    m.required = std::find(required.begin(), required.end(), m.key) != required.end();
    keys.push_back(m.key);
    if (!key_pattern) continue;
    // Its value would have to match both schemas, and the pattern's keys
    // could write it again.
    ASSIGN_OR_RETURN(const bool matches, PatternFinds(*key_pattern, m.key, /*surely=*/false, pointer));
    if (matches) {
      return Unsupported("patternProperties", pointer,
                         absl::StrCat("its pattern matches the named property ", JsonText(m.key)));
    }
  }
  ASSIGN_OR_RETURN(const std::optional<int64_t> max_key_length, MaxKeyLength(schema, pointer));
  for (const std::string& key : required) {
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
    bool written = extra != nullptr;
    if (written && key_pattern) {
      ASSIGN_OR_RETURN(written, PatternFinds(*key_pattern, key, /*surely=*/true, pointer));
    }
    if (!written) {
      // No object has it only where additionalProperties is false and no
      // pattern may take it; elsewhere the grammar just does not write it.
      bool possible = schema.value("additionalProperties", ordered_json(true)) != false;
      if (!possible && key_pattern) {
        ASSIGN_OR_RETURN(possible, PatternFinds(*key_pattern, key, /*surely=*/false, pointer));
      }
      const std::string why = absl::StrCat(JsonText(key), " is not in properties and no other property is allowed");
      if (!possible) return Contradiction("required", pointer, why);
      return Unsupported("required", pointer,
                         absl::StrCat(JsonText(key), " is not in properties and the grammar writes no other key"));
    }
    members.push_back({key, extra, extra_pointer, true});
    keys.push_back(key);
  }
  std::vector<std::pair<std::string, bool>> kvs;
  for (const Member& m : members) {
    if (max_key_length.has_value() && CodePoints(m.key) > *max_key_length) {
      if (m.required) {
        return Unsupported("propertyNames", pointer,
                           absl::StrCat("the required property ", JsonText(m.key), " is longer than its maxLength"));
      }
      continue;  // It can never be there.
    }
    if (*m.schema == false) {  // A property that must be absent.
      if (m.required) return Contradiction("required", pointer, absl::StrCat(JsonText(m.key), " has the schema false"));
      continue;
    }
    const std::string kv = rules_.NewName(absl::StrCat(name, "-", m.key, "-kv"));
    absl::StatusOr<std::string> value = Visit(*m.schema, m.pointer, rules_.NewName(absl::StrCat(name, "-", m.key)));
    if (!value.ok() && IsContradiction(value.status()) && !m.required) continue;  // No value: never there.
    RETURN_IF_ERROR(value.status());
    rules_.Define(kv, absl::StrCat(GbnfLiteral(JsonText(m.key)), R"( space ":" space )", *value));
    kvs.emplace_back(kv, m.required);
  }
  ASSIGN_OR_RETURN(const int64_t max_extra, MaxExtraProperties(schema, pointer, kvs.size()));
  // minProperties: met by the required properties, or 1 (an object not empty).
  ASSIGN_OR_RETURN(const std::optional<int64_t> min_properties, ReadCount(schema, "minProperties", pointer));
  const int64_t required_count = std::count_if(kvs.begin(), kvs.end(), [](const auto& kv) { return kv.second; });
  const bool non_empty = min_properties.value_or(0) > required_count;
  if (non_empty && *min_properties > 1) {
    return Unsupported("minProperties", pointer,
                       absl::StrCat("it is over the ", required_count, " required properties and over 1"));
  }
  std::string extra_kv;
  if (extra != nullptr && max_extra != 0) {
    extra_kv = rules_.NewName(absl::StrCat(name, "-additional-kv"));
    std::string key;
    if (key_pattern) {
      ASSIGN_OR_RETURN(key, KeyMatching(*key_pattern, pointer));
    } else {
      key = KeyNotIn(keys, absl::StrCat(name, "-additional-key"), max_key_length);
    }
    if (key.empty()) return Unsupported("propertyNames", pointer, "no key is left for additionalProperties");
    ASSIGN_OR_RETURN(const std::string value,
                     Visit(*extra, extra_pointer, rules_.NewName(absl::StrCat(name, "-additional"))));
    rules_.Define(extra_kv, absl::StrCat(key, R"( space ":" space )", value));
  }
  if (non_empty && kvs.empty() && extra_kv.empty()) {
    return Unsupported("minProperties", pointer, "no property can be written");
  }
  rules_.Define(name, ObjectBody(kvs, extra_kv, max_extra, non_empty));
  return name;
}

// Members in order, each required one present, with commas between: the
// alternatives are which member comes first (an optional one, or the first
// required one); after it each later member is there or not.
std::string SchemaConverter::ObjectBody(const std::vector<std::pair<std::string, bool>>& members,
                                        const std::string& extra, int64_t max_extra, bool non_empty) {
  const int64_t more = max_extra == kNoLimit ? kNoLimit : max_extra - 1;
  auto then = [&](const std::string& kv) { return absl::StrCat(kComma, kv, " space"); };
  auto rest = [&](size_t from) {
    std::vector<std::string> items;
    for (size_t j = from; j < members.size(); ++j) {
      const std::string item = then(members[j].first);
      items.push_back(members[j].second ? item : GbnfRepeat(item, 0, 1));
    }
    if (!extra.empty()) items.push_back(GbnfRepeat(then(extra), 0, max_extra));
    return items;
  };
  std::vector<std::string> alternatives;
  bool any_required = false;
  for (size_t i = 0; i < members.size() && !any_required; ++i) {
    std::vector<std::string> items = {absl::StrCat(members[i].first, " space")};
    for (std::string& item : rest(i + 1)) items.push_back(std::move(item));
    alternatives.push_back(absl::StrJoin(items, " "));
    any_required = members[i].second;
  }
  if (!any_required && !extra.empty()) {
    alternatives.push_back(absl::StrCat(extra, " space ", GbnfRepeat(then(extra), 0, more)));
  }
  std::string inside;
  if (!alternatives.empty()) {
    inside = GbnfAlternatives(alternatives);
    if (!any_required && !non_empty) inside = GbnfRepeat(inside, 0, 1);
    inside += " ";
  }
  return absl::StrCat(R"("{" space )", inside, R"("}")");
}

// A key that is none of `keys`, so that additional properties cannot
// repeat a named one. Keys are plain characters without escapes (an escape
// could spell a named key another way); named keys with other characters
// cannot be spelled so and need no exclusion.
std::string SchemaConverter::KeyNotIn(const std::vector<std::string>& keys, const std::string& name,
                                      std::optional<int64_t> max_length) {
  if (keys.empty()) {
    if (!max_length.has_value()) return rules_.Use("string");
    return absl::StrCat(R"("\"" )", GbnfRepeat(rules_.Use("char"), 0, *max_length), R"( "\"")");
  }
  std::vector<std::vector<uint32_t>> plain_keys;
  for (absl::string_view key : keys) {
    std::vector<uint32_t> code_points;
    bool plain = true;
    while (!key.empty() && plain) {
      uint32_t c = 0;
      const int n = DecodeUtf8(key, c);
      plain = n > 0 && IsPlain(c);
      code_points.push_back(c);
      key.remove_prefix(std::max(n, 1));
    }
    // Too long for propertyNames: it cannot be written, so needs no exclusion.
    const bool fits = !max_length.has_value() || static_cast<int64_t>(code_points.size()) <= *max_length;
    if (plain && fits) plain_keys.push_back(std::move(code_points));
  }
  const std::string rest = KeyRest(plain_keys, 0, name, max_length);
  return rest.empty() ? rest : absl::StrCat(R"("\"" )", rest);
}

// The rest of a key whose first `depth` characters `keys` share: a trie,
// one rule per node, and a way out at each node to any other character;
// empty when no key can go on from there.
std::string SchemaConverter::KeyRest(const std::vector<std::vector<uint32_t>>& keys, size_t depth,
                                     const std::string& name, std::optional<int64_t> max_length) {
  std::map<uint32_t, std::vector<std::vector<uint32_t>>> next;
  bool ends_here = false;
  for (const std::vector<uint32_t>& key : keys) {
    if (key.size() == depth)
      ends_here = true;
    else
      next[key[depth]].push_back(key);
  }
  const std::string rule = rules_.NewName(name);
  std::vector<std::string> alternatives;
  std::vector<CodePointRange> excluded = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
  for (const auto& [c, group] : next) {
    const std::string after = KeyRest(group, depth + 1, name, max_length);
    if (!after.empty()) alternatives.push_back(absl::StrCat(GbnfCodePointLiteral(c), " ", after));
    excluded.push_back({c, c});
  }
  // Or another character, then any (up to maxLength in all).
  const int64_t room = max_length.has_value() ? *max_length - static_cast<int64_t>(depth) : 1;
  if (room >= 1) {
    const std::string others = max_length.has_value() ? GbnfRepeat(rules_.Use("plain-char"), 0, room - 1)
                                                      : absl::StrCat(rules_.Use("plain-char"), "*");
    alternatives.push_back(absl::StrCat(GbnfClass(NormalizeRanges(excluded, /*negated=*/true)), " ", others, R"( "\"")"));
  }
  if (!ends_here) alternatives.push_back(R"("\"")");
  if (alternatives.empty()) return "";  // Every key that starts so is taken or too long.
  rules_.Define(rule, absl::StrJoin(alternatives, " | "));
  return rule;
}

// uniqueItems: items of enum or const values are written as a set, each
// value at most once and in the enum's order (every set has one such
// spelling), when minItems is at most 1 and maxItems at least the number
// of values: the rule. Otherwise nullopt: the array is held to one item
// (a subset; one item is always unique), or an error when minItems asks for
// more or there are prefix items.
absl::StatusOr<std::optional<std::string>> SchemaConverter::UniqueItems(const ordered_json& schema,
                                                                        const std::string& pointer,
                                                                        const std::string& name, int64_t prefix,
                                                                        int64_t min, int64_t max) {
  if (prefix > 0) return Unsupported("uniqueItems", pointer, "together with prefix items");
  const std::optional<std::vector<ordered_json>> values = ValuesOf(schema.value("items", ordered_json(true)));
  const size_t n = values ? values->size() : 0;
  if (n > 0 && min <= 1 && (max == kNoLimit || max >= static_cast<int64_t>(n))) {
    // rest_i: the values from i on, each there or not, each after a comma.
    std::string rest;
    std::vector<std::string> rests(n + 1);
    for (size_t i = n; i-- > 0;) {
      const std::string value = GbnfLiteral(JsonText((*values)[i]));
      rests[i] = rules_.NewName(absl::StrCat(name, "-rest", i));
      rules_.Define(rests[i], absl::StrCat("(", kComma, value, " space)?",
                                           i + 1 < n ? absl::StrCat(" ", rests[i + 1]) : std::string()));
    }
    std::vector<std::string> first;
    for (size_t i = 0; i < n; ++i) {
      first.push_back(absl::StrCat(GbnfLiteral(JsonText((*values)[i])), " space",
                                   i + 1 < n ? absl::StrCat(" ", rests[i + 1]) : std::string()));
    }
    const std::string items = GbnfAlternatives(first);
    rules_.Define(name, absl::StrCat(R"("[" space )", min == 1 ? items : GbnfRepeat(items, 0, 1), R"( "]")"));
    return name;
  }
  if (min > 1) {
    return Unsupported("uniqueItems", pointer,
                       "with minItems over 1, only for items of enum or const values (each written once)");
  }
  return std::nullopt;
}

// Elements in order, with commas between: the prefix items, then the
// repeated item, each present once minItems is met.
absl::StatusOr<std::string> SchemaConverter::Array(const ordered_json& schema, const std::string& pointer,
                                                   const std::string& name) {
  rules_.Use("space");
  std::vector<std::string> prefix;
  // Draft 7 wrote prefixItems as an "items" list and items as "additionalItems".
  const bool draft7_tuple = !schema.contains("prefixItems") && schema.contains("items") && schema["items"].is_array();
  const char* tuple = schema.contains("prefixItems") ? "prefixItems" : draft7_tuple ? "items" : nullptr;
  const char* further = draft7_tuple ? "additionalItems" : "items";
  if (tuple != nullptr) {
    if (!schema[tuple].is_array()) return Unsupported(tuple, pointer, "it must be an array");
    for (size_t i = 0; i < schema[tuple].size(); ++i) {
      ASSIGN_OR_RETURN(std::string item, Visit(schema[tuple][i], Child(Child(pointer, tuple), i),
                                               rules_.NewName(absl::StrCat(name, "-item", i))));
      prefix.push_back(std::move(item));
    }
  }
  // Without the keyword, items after a prefix are left out (strict), and
  // without a prefix any are allowed.
  std::string item;
  const bool more = schema.contains(further) ? schema[further] != false : tuple == nullptr;
  if (more) {
    ASSIGN_OR_RETURN(item, Visit(schema.value(further, ordered_json(true)), Child(pointer, further),
                                 rules_.NewName(absl::StrCat(name, "-item"))));
  }
  ASSIGN_OR_RETURN(const std::optional<int64_t> min_items, ReadCount(schema, "minItems", pointer));
  ASSIGN_OR_RETURN(const std::optional<int64_t> max_items, ReadCount(schema, "maxItems", pointer));
  const int64_t k = static_cast<int64_t>(prefix.size()), min = min_items.value_or(0);
  int64_t max = WrittenMax(max_items.value_or(kNoLimit));
  if (!more) max = max == kNoLimit ? k : std::min(max, k);
  if (max != kNoLimit && min > max) return Unsupported("minItems", pointer, "it is over the most items allowed");
  auto element = [](const std::string& e, bool first) { return absl::StrCat(first ? "" : kComma, e, " space"); };
  if (schema.value("uniqueItems", false) == true) {
    ASSIGN_OR_RETURN(std::optional<std::string> unique, UniqueItems(schema, pointer, name, k, min, max));
    if (unique.has_value()) return *unique;
    max = std::min<int64_t>(max == kNoLimit ? 1 : max, 1);  // One item is always unique.
  }
  std::string tail;  // What may follow the prefix.
  if (more && (max == kNoLimit || max > k)) {
    const int64_t lo = std::max<int64_t>(min - k, 0), hi = max == kNoLimit ? kNoLimit : max - k;
    if (k > 0) {
      tail = GbnfRepeat(element(item, false), lo, hi);
    } else {
      std::string items = element(item, true);
      if (hi != 1)
        absl::StrAppend(
            &items, " ",
            GbnfRepeat(element(item, false), std::max<int64_t>(lo - 1, 0), hi == kNoLimit ? kNoLimit : hi - 1));
      tail = lo >= 1 ? items : GbnfRepeat(items, 0, 1);
    }
  }
  for (int64_t i = k - 1; i >= 0; --i) {
    std::string here = element(prefix[i], i == 0);
    if (!tail.empty()) absl::StrAppend(&here, " ", tail);
    tail = i < min ? here : GbnfRepeat(here, 0, 1);
  }
  rules_.Define(name, absl::StrCat(R"("[" space )", tail, tail.empty() ? "" : " ", R"("]")"));
  return name;
}

}  // namespace llama::grammar::internal_grammar
