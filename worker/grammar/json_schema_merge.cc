// allOf for SchemaConverter (json_schema_converter.h): its schemas merged
// into one that accepts exactly the values all of them accept, which the
// converter then writes as any other schema. Keywords merge by what they
// mean: "type" intersects, bounds take the stricter, "required" unites,
// properties merge key by key (a key one schema names and another leaves
// to its additionalProperties meets both), and anyOf/oneOf distribute over
// the rest. A keyword that two schemas give different values and that
// does not merge so (two patterns, two formats, two "not") is refused,
// naming it: never dropped.

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "worker/grammar/json_schema_converter.h"
#include "worker/grammar/json_schema_scalars.h"
#include "worker/grammar/regex_overlap.h"

namespace llama::grammar::internal_grammar {
namespace {

using ::nlohmann::ordered_json;

// Products of anyOf/oneOf branches larger than this are refused.
constexpr size_t kMaxDistributed = 64;

// if/then/else in one allOf beyond these many are refused: those whose
// "else" is written double the branches written, and each nests.
constexpr int kMaxDoublingConditionals = 6;
constexpr int kMaxConditionals = 12;

bool ConditionalKeyword(const std::string& k) { return k == "if" || k == "then" || k == "else"; }

// The keywords of `negated` that constrain are all among `keywords`.
bool Only(const ordered_json& negated, std::initializer_list<const char*> keywords) {
  return negated.is_object() && std::all_of(negated.items().begin(), negated.items().end(), [&](const auto& kv) {
           return !Constrains(kv.key()) || std::find_if(keywords.begin(), keywords.end(), [&](const char* k) {
                                             return kv.key() == k;
                                           }) != keywords.end();
         });
}

// The forms of "not" Negation compiles (a $ref is looked into there).
bool NegatedType(const ordered_json& negated) { return negated.contains("type") && Only(negated, {"type"}); }
bool NegatedKeys(const ordered_json& negated) {
  return negated.contains("required") && negated["required"].is_array() &&
         Only(negated, {"required", "properties", "type"}) &&
         negated.value("type", ordered_json("object")) == "object";
}

// The key whose absence makes "if" fail, where the objects without it that
// "else" accepts are written: the first that "if" requires.
std::optional<std::string> KeyIfRequires(const ordered_json& condition) {
  if (!condition.is_object() || !condition.contains("required") || !condition["required"].is_array() ||
      condition["required"].empty() || !condition["required"][0].is_string()) {
    return std::nullopt;
  }
  return condition["required"][0].get<std::string>();
}


constexpr char kNegatedForms[] = "only {\"type\": ...} or {\"required\": [...]} is compiled";

// Keywords whose stricter value is the larger, and the smaller.
bool TakesLarger(const std::string& k) {
  return k == "minimum" || k == "minLength" || k == "minItems" || k == "minProperties" || k == "minContains";
}
bool TakesSmaller(const std::string& k) {
  return k == "maximum" || k == "maxLength" || k == "maxItems" || k == "maxProperties" || k == "maxContains";
}

// Keywords that mean something only together with others of the same
// schema: additionalProperties applies to the keys its own properties and
// patternProperties leave, items to the elements after its own prefixItems.
bool ObjectKeyword(const std::string& k) {
  return k == "properties" || k == "additionalProperties" || k == "patternProperties";
}
bool ArrayKeyword(const std::string& k) { return k == "items" || k == "prefixItems" || k == "additionalItems"; }

ordered_json AllOfSchemas(std::vector<ordered_json> schemas) {
  if (schemas.size() == 1) return std::move(schemas[0]);
  return ordered_json{{"allOf", std::move(schemas)}};
}

// Draft 4 writes exclusive bounds as booleans beside minimum/maximum.
bool BooleanExclusive(const ordered_json& schema) {
  return (schema.contains("exclusiveMinimum") && schema["exclusiveMinimum"].is_boolean()) ||
         (schema.contains("exclusiveMaximum") && schema["exclusiveMaximum"].is_boolean());
}

}  // namespace

// The payload of refusals of schemas no value matches.
constexpr char kContradiction[] = "llama.grammar/no-value-matches";

absl::Status Contradiction(absl::string_view keyword, const std::string& pointer, absl::string_view why) {
  absl::Status status = Unsupported(keyword, pointer, why);
  status.SetPayload(kContradiction, absl::Cord("1"));
  return status;
}

bool IsContradiction(const absl::Status& status) { return status.GetPayload(kContradiction).has_value(); }

bool SchemaConverter::Draft4() const {
  if (!document_.is_object() || !document_.contains("$schema") || !document_["$schema"].is_string()) return false;
  const std::string draft = document_["$schema"].get<std::string>();
  return draft.find("draft-03") != std::string::npos || draft.find("draft-04") != std::string::npos;
}

bool SchemaConverter::LegacyRef() const {
  if (!document_.is_object() || !document_.contains("$schema") || !document_["$schema"].is_string()) return false;
  const std::string draft = document_["$schema"].get<std::string>();
  return draft.find("draft-03") != std::string::npos || draft.find("draft-04") != std::string::npos ||
         draft.find("draft-06") != std::string::npos || draft.find("draft-07") != std::string::npos;
}

absl::Status SchemaConverter::AllOfParts(const ordered_json& schema, const std::string& pointer, int depth,
                                         std::vector<std::pair<const ordered_json*, std::string>>& parts) {
  if (depth > 16) return Unsupported("allOf", pointer, "its schemas nest or refer to each other too deeply");
  if (!schema.is_object()) {
    if (schema == false) return absl::InvalidArgumentError(absl::StrCat("the schema at ", pointer, " is false"));
    return absl::OkStatus();  // true.
  }
  if (schema.contains("$ref")) {
    ASSIGN_OR_RETURN(const ordered_json* target, Resolve(schema["$ref"], pointer));
    RETURN_IF_ERROR(AllOfParts(*target, schema["$ref"].get<std::string>().substr(1), depth + 1, parts));
    if (LegacyRef()) return absl::OkStatus();  // Drafts 4 to 7 ignore the keywords beside $ref.
  }
  const ordered_json* all = schema.contains("allOf") ? &schema["allOf"] : nullptr;
  if (all != nullptr) {
    if (!all->is_array() || all->empty()) return Unsupported("allOf", pointer, "it must be a non-empty array");
    for (size_t i = 0; i < all->size(); ++i) {
      RETURN_IF_ERROR(AllOfParts((*all)[i], Child(Child(pointer, "allOf"), i), depth + 1, parts));
    }
  }
  ordered_json& rest = owned_.emplace_back(ordered_json::object());
  for (const auto& kv : schema.items()) {
    if (kv.key() != "$ref" && kv.key() != "allOf" && Constrains(kv.key())) rest[kv.key()] = kv.value();
  }
  if (!rest.empty()) parts.emplace_back(&rest, pointer);
  return absl::OkStatus();
}

absl::StatusOr<ordered_json> SchemaConverter::Merge(
    const std::vector<std::pair<const ordered_json*, std::string>>& parts, const std::string& pointer) {
  const std::string where = absl::StrCat("allOf at ", pointer.empty() ? "/" : pointer);
  ordered_json merged = ordered_json::object();
  // Object keywords, merged together below.
  std::vector<const ordered_json*> objects, arrays;
  for (const auto& [part, part_pointer] : parts) {
    if (std::any_of(part->items().begin(), part->items().end(), [](const auto& kv) { return ObjectKeyword(kv.key()); })) {
      objects.push_back(part);
    }
    if (std::any_of(part->items().begin(), part->items().end(), [](const auto& kv) { return ArrayKeyword(kv.key()); })) {
      arrays.push_back(part);
    }
    if (BooleanExclusive(*part) && parts.size() > 1) {
      return Unsupported(part->contains("exclusiveMinimum") ? "exclusiveMinimum" : "exclusiveMaximum", part_pointer,
                         absl::StrCat(where, " merges draft 4's boolean exclusive bounds only alone"));
    }
    for (const auto& kv : part->items()) {
      const std::string& k = kv.key();
      const ordered_json& v = kv.value();
      if (ConditionalKeyword(k)) continue;
      if (!Compiled().contains(k) && k != "not") return Unsupported(k, part_pointer);  // Named where it is.
      if (k == "not" && v.is_object() && !v.contains("$ref") && !NegatedType(v) && !NegatedKeys(v)) {
        return Unsupported(k, part_pointer, kNegatedForms);
      }
      if (ObjectKeyword(k) || ArrayKeyword(k)) continue;
      if (!merged.contains(k)) {
        merged[k] = v;
        continue;
      }
      ordered_json& m = merged[k];
      if (m == v) continue;
      if (k == "type") {
        ASSIGN_OR_RETURN(const std::vector<std::string> a, Types(ordered_json{{"type", m}}, part_pointer));
        ASSIGN_OR_RETURN(const std::vector<std::string> b, Types(ordered_json{{"type", v}}, part_pointer));
        const std::vector<std::string> common = CommonTypes(a, b);
        if (common.empty()) return Contradiction("type", part_pointer, absl::StrCat(where, ": no type is in all of its schemas"));
        m = common;
      } else if ((TakesLarger(k) || TakesSmaller(k) || k == "exclusiveMinimum" || k == "exclusiveMaximum") &&
                 m.is_number() && v.is_number()) {
        const bool larger = TakesLarger(k) || k == "exclusiveMinimum";
        if (larger ? v > m : v < m) m = v;
      } else if (k == "enum" && m.is_array() && v.is_array()) {
        ordered_json both = ordered_json::array();
        for (const ordered_json& x : m) {
          if (std::find(v.begin(), v.end(), x) != v.end()) both.push_back(x);
        }
        if (both.empty()) return Contradiction("enum", part_pointer, absl::StrCat(where, ": no value is in every enum"));
        m = both;
      } else if (k == "required" && m.is_array() && v.is_array()) {
        for (const ordered_json& key : v) {
          if (std::find(m.begin(), m.end(), key) == m.end()) m.push_back(key);
        }
      } else if (k == "propertyNames" || k == "contains") {
        m = AllOfSchemas({m, v});
      } else if ((k == "anyOf" || k == "oneOf") && m.is_array() && v.is_array()) {
        // Both hold: the branches' products, one of which (oneOf: exactly
        // one) holds exactly when one of each list does.
        if (m.size() * v.size() > kMaxDistributed) {
          return Unsupported(k, part_pointer, absl::StrCat(where, ": the product of two ", k, " lists is too large"));
        }
        ordered_json product = ordered_json::array();
        for (const ordered_json& x : m) {
          for (const ordered_json& y : v) product.push_back(AllOfSchemas({x, y}));
        }
        m = product;
      } else {
        const std::string why = absl::StrCat(where, ": two of its schemas give it different values");
        return k == "const" ? Contradiction(k, part_pointer, why) : Unsupported(k, part_pointer, why);
      }
    }
  }
  // The first if/then/else stays beside the merged keywords (Conditional
  // writes it), the others under allOf, written in their turn.
  int conditionals = 0, doubling = 0;
  for (const auto& [part, part_pointer] : parts) {
    if (!part->contains("if")) continue;
    ordered_json conditional = ordered_json::object();
    for (const char* k : {"if", "then", "else"}) {
      if (part->contains(k)) conditional[k] = (*part)[k];
    }
    doubling += KeyIfRequires(conditional["if"]).has_value();
    if (++conditionals > kMaxConditionals || doubling > kMaxDoublingConditionals) {
      return Unsupported("if", part_pointer,
                         absl::StrCat(where, ": more than ", kMaxConditionals, " if/then/else, or ",
                                      kMaxDoublingConditionals, " whose \"if\" requires a key"));
    }
    if (conditionals == 1) {
      for (const auto& kv : conditional.items()) merged[kv.key()] = kv.value();
    } else {
      merged["allOf"].push_back(std::move(conditional));
    }
  }
  if (merged.contains("anyOf") && merged.contains("oneOf")) {
    return Unsupported("oneOf", pointer, absl::StrCat(where, ": merges anyOf and oneOf only apart"));
  }
  if (merged.contains("const") && merged.contains("enum")) {
    const ordered_json& e = merged["enum"];
    if (!e.is_array() || std::find(e.begin(), e.end(), merged["const"]) == e.end()) {
      return Contradiction("const", pointer, absl::StrCat(where, ": the const is not in the enum"));
    }
    merged.erase("enum");
  }
  // Elements: one schema's items, prefixItems and additionalItems, or the
  // items schemas of several (all of them apply to every element).
  for (const ordered_json* array : arrays) {
    for (const auto& kv : array->items()) {
      if (!ArrayKeyword(kv.key())) continue;
      if (arrays.size() == 1) {
        merged[kv.key()] = kv.value();
      } else if (kv.key() != "items" || kv.value().is_array()) {
        return Unsupported(kv.key(), pointer, absl::StrCat(where, ": merged with another array schema"));
      } else {
        merged["items"] = merged.contains("items") ? AllOfSchemas({merged["items"], kv.value()}) : kv.value();
      }
    }
  }
  if (objects.size() == 1) {
    for (const auto& kv : objects[0]->items()) {
      if (ObjectKeyword(kv.key())) merged[kv.key()] = kv.value();
    }
  } else if (objects.size() > 1) {
    RETURN_IF_ERROR(MergeProperties(objects, pointer, merged));
  }
  return merged;
}

// Each key's schemas: the one each object names it with and those of its
// patternProperties that match the key, or that object's
// additionalProperties where neither does; false where one forbids it.
// patternProperties in one of the objects: its keys take its schema and
// the others' additionalProperties.
absl::Status SchemaConverter::MergeProperties(const std::vector<const ordered_json*>& objects,
                                              const std::string& pointer, ordered_json& merged) {
  const std::string where = absl::StrCat("allOf at ", pointer.empty() ? "/" : pointer);
  std::vector<std::string> keys;
  const ordered_json* patterned = nullptr;
  for (const ordered_json* object : objects) {
    if (object->contains("patternProperties")) {
      if (patterned != nullptr || !(*object)["patternProperties"].is_object()) {
        return Unsupported("patternProperties", pointer, absl::StrCat(where, ": in more than one of its schemas"));
      }
      patterned = object;
    }
    const ordered_json& properties = object->value("properties", ordered_json::object());
    if (!properties.is_object()) return Unsupported("properties", pointer, "it must be an object");
    for (const auto& kv : properties.items()) {
      if (std::find(keys.begin(), keys.end(), kv.key()) == keys.end()) keys.push_back(kv.key());
    }
  }
  // Schemas that all hold, each once; true and {} say nothing.
  const auto add = [](std::vector<ordered_json>& schemas, const ordered_json& schema) {
    if (schema == true || schema == ordered_json::object()) return;
    if (std::find(schemas.begin(), schemas.end(), schema) == schemas.end()) schemas.push_back(schema);
  };
  ordered_json properties = ordered_json::object();
  for (const std::string& key : keys) {
    std::vector<ordered_json> schemas;
    bool forbidden = false;
    for (const ordered_json* object : objects) {
      const ordered_json& named = object->value("properties", ordered_json::object());
      std::vector<ordered_json> applied;
      if (named.contains(key)) applied.push_back(named[key]);
      if (object == patterned) {
        for (const auto& pattern : (*object)["patternProperties"].items()) {
          // Where some reader may take the key, the pattern's schema holds too (a subset).
          const absl::StatusOr<bool> found = MayFind(pattern.key(), key);
          if (!found.ok()) {
            return Unsupported("patternProperties", pointer,
                               absl::StrCat(where, ": its pattern and the property ", JsonText(key), ": ",
                                            found.status().message()));
          }
          if (*found) applied.push_back(pattern.value());
        }
      }
      if (applied.empty()) applied.push_back(object->value("additionalProperties", ordered_json(true)));
      for (const ordered_json& schema : applied) {
        if (schema == false) forbidden = true;
        add(schemas, schema);
      }
    }
    properties[key] = forbidden ? ordered_json(false) : schemas.empty() ? ordered_json::object() : AllOfSchemas(schemas);
  }
  std::vector<ordered_json> others;
  bool closed = false;
  for (const ordered_json* object : objects) {
    if (!object->contains("additionalProperties")) continue;
    const ordered_json& extra = (*object)["additionalProperties"];
    if (extra == false) closed = true;
    add(others, extra);
  }
  merged["properties"] = std::move(properties);
  if (patterned != nullptr) {
    ordered_json patterns = ordered_json::object();
    for (const auto& pattern : (*patterned)["patternProperties"].items()) {
      std::vector<ordered_json> schemas;
      bool forbidden = pattern.value() == false;
      add(schemas, pattern.value());
      for (const ordered_json* object : objects) {
        if (object == patterned || !object->contains("additionalProperties")) continue;
        if ((*object)["additionalProperties"] == false) forbidden = true;
        add(schemas, (*object)["additionalProperties"]);
      }
      patterns[pattern.key()] = forbidden ? ordered_json(false) : schemas.empty() ? ordered_json::object() : AllOfSchemas(schemas);
    }
    merged["patternProperties"] = std::move(patterns);
  }
  if (closed) {
    merged["additionalProperties"] = false;
  } else if (!others.empty()) {
    merged["additionalProperties"] = AllOfSchemas(others);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SchemaConverter::AllOf(const ordered_json& schema, const std::string& pointer,
                                                   const std::string& name) {
  std::vector<std::pair<const ordered_json*, std::string>> parts;
  RETURN_IF_ERROR(AllOfParts(schema, pointer, 0, parts));
  if (parts.empty()) return rules_.Use("value");
  if (parts.size() == 1) return Visit(*parts[0].first, parts[0].second, name);
  ASSIGN_OR_RETURN(ordered_json merged, Merge(parts, pointer));
  return Visit(owned_.emplace_back(std::move(merged)), pointer, name);
}

std::optional<std::pair<std::string, std::vector<ordered_json>>> SchemaConverter::KeyIfHolds(
    const ordered_json& condition) {
  if (!Only(condition, {"properties", "required", "type"}) || !condition.contains("properties") ||
      !condition["properties"].is_object() || condition["properties"].size() != 1 ||
      condition.value("type", ordered_json("object")) != "object") {
    return std::nullopt;
  }
  const ordered_json& held = condition["properties"].begin().value();
  std::optional<std::vector<ordered_json>> values = ValuesOf(held);
  if (!values || !Only(held, {"const", "enum", "type"})) return std::nullopt;
  return std::make_pair(condition["properties"].begin().key(), *std::move(values));
}

std::optional<std::vector<ordered_json>> SchemaConverter::ValuesOfKey(const ordered_json& rest, const std::string& key) {
  if (!rest.contains("properties") || !rest["properties"].is_object() || !rest["properties"].contains(key)) {
    return std::nullopt;
  }
  const ordered_json& schema = rest["properties"][key];
  if (schema.is_object() && schema.value("type", ordered_json()) == "boolean" && Only(schema, {"type"})) {
    return std::vector<ordered_json>{false, true};
  }
  return ValuesOf(schema);
}

std::optional<std::pair<std::string, ordered_json>> SchemaConverter::ValuesIfRefuses(const ordered_json& condition,
                                                                                   const ordered_json& rest) {
  const auto held = KeyIfHolds(condition);
  if (!held) return std::nullopt;
  const std::optional<std::vector<ordered_json>> allowed = ValuesOfKey(rest, held->first);
  if (!allowed) return std::nullopt;
  ordered_json others = ordered_json::array();
  for (const ordered_json& v : *allowed) {
    if (std::find(held->second.begin(), held->second.end(), v) == held->second.end()) others.push_back(v);
  }
  if (others.empty()) return std::nullopt;
  return std::make_pair(held->first, std::move(others));
}

bool SchemaConverter::IfContradicts(const ordered_json& condition, const ordered_json& rest) {
  const auto held = KeyIfHolds(condition);
  if (!held) return false;
  const ordered_json required = rest.value("required", ordered_json::array());
  if (!required.is_array() || std::find(required.begin(), required.end(), held->first) == required.end()) return false;
  const std::optional<std::vector<ordered_json>> allowed = ValuesOfKey(rest, held->first);
  return allowed && std::none_of(allowed->begin(), allowed->end(), [&](const ordered_json& v) {
           return std::find(held->second.begin(), held->second.end(), v) != held->second.end();
         });
}

absl::StatusOr<std::string> SchemaConverter::Conditional(const ordered_json& schema, const std::string& pointer,
                                                         const std::string& name) {
  ordered_json rest = ordered_json::object();
  for (const auto& kv : schema.items()) {
    if (!ConditionalKeyword(kv.key()) && Constrains(kv.key())) rest[kv.key()] = kv.value();
  }
  const ordered_json& condition = schema["if"];
  const ordered_json otherwise = AllOfSchemas({rest, schema.value("else", ordered_json(true))});
  // Where no value can meet both the rest and "if", "else" applies alone.
  std::vector<std::pair<const ordered_json*, std::string>> parts;
  const ordered_json& holds = owned_.emplace_back(AllOfSchemas({rest, condition}));
  if (AllOfParts(holds, pointer, 0, parts).ok() && parts.size() > 1) {
    const absl::StatusOr<ordered_json> merged = Merge(parts, pointer);
    if (!merged.ok() && IsContradiction(merged.status())) {
      return Visit(owned_.emplace_back(otherwise), pointer, name);
    }
  }
  // So too where "if" holds a key the rest requires to values it does not allow.
  if (IfContradicts(condition, rest)) return Visit(owned_.emplace_back(otherwise), pointer, name);
  std::vector<std::string> alternatives;
  const ordered_json& then = owned_.emplace_back(AllOfSchemas({rest, condition, schema.value("then", ordered_json(true))}));
  absl::StatusOr<std::string> if_then = Visit(then, pointer, rules_.NewName(absl::StrCat(name, "-then")));
  // "then" may contradict the rest where "if" holds: only values where it fails are valid.
  if (!if_then.ok() && !IsContradiction(if_then.status())) return if_then.status();
  if (if_then.ok()) alternatives.push_back(*if_then);
  // "if" fails for the objects without a key it requires.
  if (const std::optional<std::string> key = KeyIfRequires(condition)) {
    const ordered_json absent = {{"type", "object"}, {"properties", {{*key, false}}}};
    ASSIGN_OR_RETURN(std::string item, Visit(owned_.emplace_back(AllOfSchemas({absent, otherwise})), pointer,
                                             rules_.NewName(absl::StrCat(name, "-else"))));
    alternatives.push_back(std::move(item));
  }
  // And for the objects whose key it holds to a const or enum has another
  // of the few values the rest allows it.
  if (std::optional<std::pair<std::string, ordered_json>> others = ValuesIfRefuses(condition, rest)) {
    const ordered_json differs = {{"type", "object"},
                                  {"required", {others->first}},
                                  {"properties", {{others->first, {{"enum", others->second}}}}}};
    absl::StatusOr<std::string> item = Visit(owned_.emplace_back(AllOfSchemas({differs, otherwise})), pointer,
                                             rules_.NewName(absl::StrCat(name, "-else")));
    if (!item.ok() && !IsContradiction(item.status())) return item.status();
    if (item.ok()) alternatives.push_back(*std::move(item));
  }
  if (alternatives.empty()) return if_then.status();
  return GbnfAlternatives(alternatives);
}

// not, in the two forms written most: {"type": T} leaves T out of the
// types; {"required": [k, ...]} (with "properties" of those keys beside
// it) holds for the objects that lack one of the keys, written as objects
// without the first key the schema itself does not require (a subset).
absl::StatusOr<std::string> SchemaConverter::Negation(const ordered_json& schema, const std::string& pointer,
                                                      const std::string& name) {
  const std::string at = Child(pointer, "not");
  std::vector<std::pair<const ordered_json*, std::string>> parts;
  RETURN_IF_ERROR(AllOfParts(schema["not"], at, 0, parts));
  if (parts.size() != 1) return Unsupported("not", pointer, kNegatedForms);
  const ordered_json& negated = *parts[0].first;
  ordered_json rest = ordered_json::object();
  for (const auto& kv : schema.items()) {
    if (kv.key() != "not" && Constrains(kv.key())) rest[kv.key()] = kv.value();
  }
  if (NegatedType(negated)) {
    ASSIGN_OR_RETURN(const std::vector<std::string> excluded, Types(negated, at));
    std::vector<std::string> types = {"null", "boolean", "integer", "number", "string", "array", "object"};
    if (rest.contains("type")) {
      ASSIGN_OR_RETURN(types, Types(rest, pointer));
    }
    std::vector<std::string> left;
    for (const std::string& t : types) {
      const bool out = std::find(excluded.begin(), excluded.end(), t) != excluded.end() ||
                       (t == "integer" && std::find(excluded.begin(), excluded.end(), "number") != excluded.end());
      if (out) continue;
      if (t == "number" && std::find(excluded.begin(), excluded.end(), "integer") != excluded.end()) {
        return Unsupported("not", pointer, "numbers that are not integers beside other types");
      }
      left.push_back(t);
    }
    if (left.empty()) return Unsupported("not", pointer, "it excludes every type the schema allows");
    rest["type"] = left;
    return Visit(owned_.emplace_back(std::move(rest)), pointer, name);
  }
  if (NegatedKeys(negated)) {
    const ordered_json own = rest.value("required", ordered_json::array());
    for (const ordered_json& key : negated["required"]) {
      if (!key.is_string() || std::find(own.begin(), own.end(), key) != own.end()) continue;
      const ordered_json absent = {{"type", "object"}, {"properties", {{key.get<std::string>(), false}}}};
      return Visit(owned_.emplace_back(ordered_json{{"allOf", {rest, absent}}}), pointer, name);
    }
    return Unsupported("not", pointer, "every key it requires is required beside it");
  }
  return Unsupported("not", pointer, kNegatedForms);
}

// anyOf or oneOf beside other keywords: each branch with them (allOf), as
// A and (B or C) is (A and B) or (A and C), and exactly one of those holds
// exactly when A and exactly one of B and C do.
absl::StatusOr<std::string> SchemaConverter::Distributed(const ordered_json& schema, const char* keyword,
                                                         const std::string& pointer, const std::string& name) {
  const ordered_json& branches = schema[keyword];
  if (!branches.is_array() || branches.empty()) return Unsupported(keyword, pointer, "it must be a non-empty array");
  ordered_json rest = ordered_json::object();
  for (const auto& kv : schema.items()) {
    if (kv.key() != keyword && Constrains(kv.key())) rest[kv.key()] = kv.value();
  }
  ordered_json distributed = {{keyword, ordered_json::array()}};
  for (const ordered_json& branch : branches) distributed[keyword].push_back(AllOfSchemas({rest, branch}));
  return Visit(owned_.emplace_back(std::move(distributed)), pointer, name);
}

}  // namespace llama::grammar::internal_grammar
