// The string, integer and number parts of the JSON Schema converter
// (json_schema.h): the keywords that constrain one scalar value. Internal
// to //worker/grammar.

#ifndef LLAMA_WORKER_GRAMMAR_JSON_SCHEMA_SCALARS_H_
#define LLAMA_WORKER_GRAMMAR_JSON_SCHEMA_SCALARS_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/grammar/gbnf_writer.h"
#include "worker/grammar/json_grammar.h"

namespace llama::grammar::internal_grammar {

// The error for a keyword we cannot compile: `"not" at /properties/a is not
// supported`, then `: why` when given. `pointer` is a JSON pointer ("" is
// the whole schema, written "/").
absl::Status Unsupported(absl::string_view keyword, const std::string& pointer, absl::string_view why = "");

// The code points of UTF-8 `text`: what minLength and maxLength count.
int64_t CodePoints(absl::string_view text);

// A count keyword (minLength, maxItems, ...): absent, or a non-negative
// integer; anything else is an error naming it.
absl::StatusOr<std::optional<int64_t>> ReadCount(const nlohmann::ordered_json& schema, const char* keyword,
                                                 const std::string& pointer);

// The GBNF compiler expands a counted repetition into rules, up to 10,000
// (gbnf_compiler.cc). An upper count above that (maxLength, maxItems) is
// written as 10,000: the grammar keeps to a subset, shorter strings and
// fewer items, still longer than an answer writes within a token limit.
inline constexpr int64_t kMaxWrittenCount = 10000;
inline int64_t WrittenMax(int64_t max) { return max == kNoLimit ? max : std::min(max, kMaxWrittenCount); }

// One GBNF item matching the JSON strings that `schema`'s pattern, format,
// minLength and maxLength allow.
absl::StatusOr<std::string> StringItem(const nlohmann::ordered_json& schema, const std::string& pointer,
                                       GbnfRules& rules);

// ... the integers that minimum, maximum, exclusiveMinimum and
// exclusiveMaximum allow, exactly, as digit ranges (bounds up to 9e18; a
// bound past that on the side it opens to is held at 9e18, a subset).
absl::StatusOr<std::string> IntegerItem(const nlohmann::ordered_json& schema, const std::string& pointer,
                                        GbnfRules& rules);

// ... the numbers those bounds allow, written without an exponent, with
// bounds up to 10^15 (held there like the integers') and with no more
// digits than a double keeps (others are refused, naming the keyword).
absl::StatusOr<std::string> NumberItem(const nlohmann::ordered_json& schema, const std::string& pointer,
                                       GbnfRules& rules);

}  // namespace llama::grammar::internal_grammar

#endif  // LLAMA_WORKER_GRAMMAR_JSON_SCHEMA_SCALARS_H_
