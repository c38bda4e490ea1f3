// The JSON Schema converter behind JsonSchemaToGbnf (json_schema.h), split
// over json_schema.cc (keywords, references, alternatives, values),
// json_schema_alternatives.cc (anyOf, oneOf), json_schema_merge.cc (allOf,
// and combinators beside other keywords) and json_schema_containers.cc
// (objects, arrays). Internal to //worker/grammar.

#ifndef LLAMA_WORKER_GRAMMAR_JSON_SCHEMA_CONVERTER_H_
#define LLAMA_WORKER_GRAMMAR_JSON_SCHEMA_CONVERTER_H_

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/grammar/json_grammar.h"
#include "worker/grammar/json_schema.h"

namespace llama::grammar::internal_grammar {

// The keywords compiled; others that constrain are refused.
const absl::flat_hash_set<std::string>& Compiled();
// `keyword` is one of JSON Schema's keywords that decide which values are
// valid (drafts 4 to 2020-12); all others are ignored.
bool Constrains(const std::string& keyword);
// `schema` has a keyword that constrains, or is false.
bool HasConstraints(const nlohmann::ordered_json& schema);

// `keyword` is compiled only alone: a grammar cannot intersect it with the
// keywords beside it that constrain, except `allowed`.
absl::Status Alone(const nlohmann::ordered_json& schema, const char* keyword, const std::string& pointer,
                   std::initializer_list<const char*> allowed = {});

// The types "type" names, or without it those the keywords apply to
// ({"maxLength": 3} is a string); empty: any value.
absl::StatusOr<std::vector<std::string>> Types(const nlohmann::ordered_json& schema, const std::string& pointer);
// The types both lists allow ("number" and "integer": "integer").
std::vector<std::string> CommonTypes(const std::vector<std::string>& a, const std::vector<std::string>& b);
// `value` is of the JSON Schema type `type` (2.0 is an "integer").
bool HasType(const nlohmann::ordered_json& value, absl::string_view type);

// The refusal of a schema no value matches (two consts, enums or types
// that share nothing, json_schema_merge.cc), and whether a status is one:
// an optional property of such a schema is never there, and an if/then
// branch of one is left out.
absl::Status Contradiction(absl::string_view keyword, const std::string& pointer, absl::string_view why);
bool IsContradiction(const absl::Status& status);

// A JSON pointer one step down.
std::string Child(const std::string& pointer, absl::string_view key);
std::string Child(const std::string& pointer, size_t index);

// A property of an object schema and where its schema is.
struct Member {
  std::string key;
  const nlohmann::ordered_json* schema;
  std::string pointer;
  bool required = false;
};

// One conversion of one schema document; not reusable.
class SchemaConverter {
 public:
  explicit SchemaConverter(const nlohmann::ordered_json& document) : document_(document) {}

  // The grammar, its start rule `root` the document's values.
  absl::StatusOr<std::string> Convert();

 private:
  using json = nlohmann::ordered_json;

  // One GBNF item for the values `schema` (at `pointer`) accepts. It may
  // define the rule `name` (fresh from NewName) and rules named after it.
  absl::StatusOr<std::string> Visit(const json& schema, const std::string& pointer, const std::string& name);
  absl::StatusOr<std::string> VisitKeywords(const json& schema, const std::string& pointer, const std::string& name);
  absl::StatusOr<std::string> Typed(const json& schema, const std::string& pointer, const std::string& name,
                                    const std::string& type);
  // anyOf and oneOf, with "type" beside them (json_schema_alternatives.cc).
  // oneOf's alternatives are such that no value matches two branches, or
  // it is an error naming two branches that may overlap.
  absl::StatusOr<std::string> AnyOf(const json& schema, const std::string& pointer, const std::string& name);
  absl::StatusOr<std::string> OneOf(const json& schema, const std::string& pointer, const std::string& name);
  struct Facts;
  Facts FactsOf(const json& schema, int depth);
  static bool Disjoint(const Facts& written, const Facts& valid);
  // A schema that, with a branch whose grammar writes `written`, keeps it
  // from values `other` accepts: a key `other` requires left out, or with
  // `require` a key `other` forbids or whose values it does not share
  // always written. nullopt when there is none.
  static std::optional<json> ExclusiveNarrowing(const Facts& written, const Facts& other, bool require);
  // The values of an enum or const schema (through $ref and allOf), of its type.
  std::optional<std::vector<json>> ValuesOf(const json& schema);
  std::string KindsItem(uint8_t kinds);
  // Branch `index` of `keyword` held to the types "type" beside it names:
  // the branch itself, a copy with "type" narrowed, or nullopt when it
  // writes none of them.
  absl::StatusOr<std::optional<json>> OfTypes(const json& schema, const char* keyword, size_t index,
                                              const std::string& pointer);
  absl::StatusOr<std::string> Values(const json& schema, const std::string& pointer);
  std::vector<const json*> NodesAlong(absl::string_view pointer) const;
  absl::StatusOr<const json*> Resolve(const json& ref, const std::string& pointer);
  absl::StatusOr<std::string> Ref(const json& ref, const std::string& pointer);

  // json_schema_merge.cc. Drafts 4 to 7 ignore the keywords beside a $ref
  // (the document's $schema says which draft; none: 2020-12).
  bool LegacyRef() const;
  // Drafts 3 and 4, whose exclusiveMinimum/exclusiveMaximum are booleans.
  bool Draft4() const;
  // allOf, and $ref with keywords beside it: one merged schema.
  absl::StatusOr<std::string> AllOf(const json& schema, const std::string& pointer, const std::string& name);
  // Where "if" is {"properties": {key: {const or enum}}}: the key and the
  // values it holds the key to.
  std::optional<std::pair<std::string, std::vector<json>>> KeyIfHolds(const json& condition);
  // The few values (an enum, booleans) `rest` allows `key`, if so.
  std::optional<std::vector<json>> ValuesOfKey(const json& rest, const std::string& key);
  // Where "if" holds one key and `rest` allows that key a few values, the
  // key and the others: objects with one of them fail "if".
  std::optional<std::pair<std::string, json>> ValuesIfRefuses(const json& condition, const json& rest);
  // "if" holds a key that `rest` requires to values `rest` does not allow it.
  bool IfContradicts(const json& condition, const json& rest);
  // The schemas all of which hold, allOf's and $ref's flattened: each
  // without allOf and $ref, and where it is.
  absl::Status AllOfParts(const json& schema, const std::string& pointer, int depth,
                          std::vector<std::pair<const json*, std::string>>& parts);
  absl::StatusOr<json> Merge(const std::vector<std::pair<const json*, std::string>>& parts,
                             const std::string& pointer);
  absl::Status MergeProperties(const std::vector<const json*>& objects, const std::string& pointer, json& merged);
  // if/then/else: the values "if" and "then" accept, and where "if" requires
  // a key, those without it that "else" accepts (a subset where "if" fails
  // otherwise).
  absl::StatusOr<std::string> Conditional(const json& schema, const std::string& pointer, const std::string& name);
  // not: {"type": ...} and {"required": [...]} (json_schema_merge.cc).
  absl::StatusOr<std::string> Negation(const json& schema, const std::string& pointer, const std::string& name);
  // anyOf or oneOf with other keywords beside it than "type".
  absl::StatusOr<std::string> Distributed(const json& schema, const char* keyword, const std::string& pointer,
                                          const std::string& name);
  absl::StatusOr<std::string> Object(const json& schema, const std::string& pointer, const std::string& name);
  absl::StatusOr<std::string> ObjectRule(std::vector<Member> members, const json& schema, const std::string& pointer,
                                         const std::string& name);
  // `extra`: the rule of other properties, up to max_extra of them (kNoLimit:
  // any); `non_empty`: at least one property.
  std::string ObjectBody(const std::vector<std::pair<std::string, bool>>& members, const std::string& extra,
                         int64_t max_extra, bool non_empty);
  // Keys of additional properties, up to `max_length` code points (propertyNames).
  std::string KeyNotIn(const std::vector<std::string>& keys, const std::string& name, std::optional<int64_t> max_length);
  std::string KeyRest(const std::vector<std::vector<uint32_t>>& keys, size_t depth, const std::string& name,
                      std::optional<int64_t> max_length);
  absl::StatusOr<std::string> Array(const json& schema, const std::string& pointer, const std::string& name);
  absl::StatusOr<std::optional<std::string>> UniqueItems(const json& schema, const std::string& pointer,
                                                         const std::string& name, int64_t prefix, int64_t min,
                                                         int64_t max);

  const json& document_;
  GbnfRules rules_;
  absl::flat_hash_map<std::string, std::string> refs_;  // $ref text to rule name.
  // Schemas made while converting (merged, distributed): rules are written
  // while they are visited, and Members point into them meanwhile.
  std::deque<json> owned_;
  int depth_ = 0;
};

}  // namespace llama::grammar::internal_grammar

#endif  // LLAMA_WORKER_GRAMMAR_JSON_SCHEMA_CONVERTER_H_
