// JSON Schema as a GBNF grammar (grammar.h) whose sentences are JSON texts
// the schema accepts: OpenAI's response_format json_schema, vLLM's
// guided_json, llama.cpp's json_schema.
//
// The grammar says a subset of what the schema allows wherever the whole
// would need more than a context-free grammar or would let generation run
// on: what is left out is listed here, and nothing outside the schema is
// ever let in.
//  - Whitespace and numbers as json_grammar.h writes them: bounded blanks
//    only between tokens, at most 16+16 digits.
//  - Objects: properties in the schema's order, each optional one present
//    or not. Without "additionalProperties", no others (xgrammar's strict
//    mode), unless the schema names no properties at all: then any. With
//    it (true or a schema), others follow the named ones, with keys of
//    plain characters (no escapes) that are not among them.
//  - "propertyNames" with a maxLength alone bounds the keys; "maxProperties"
//    bounds the other properties to what the named ones leave;
//    "minProperties" is met by the required ones or is 1 (not empty);
//    "dependentRequired" (draft 7's "dependencies" with lists) writes the
//    properties others depend on always. "patternProperties" of one
//    pattern matching no named property: its keys (where it matches, as
//    the regex compiles) are the other properties; keys additionalProperties
//    would take are not written.
//  - Arrays: "prefixItems" (or draft 7's "items" list) with "items" (or
//    "additionalItems") after them; "prefixItems" without "items" means no
//    further items. "uniqueItems": items of enum or const values as a set
//    (each value once, in the enum's order), other arrays one item at
//    most. "maxLength" and "maxItems" above 10,000 are written as 10,000.
//  - Strings: "pattern" as a whole-string match, read as both ECMAScript
//    and Python's re (python-jsonschema's) take it: where they differ
//    (\w \d \s . past ASCII, {,n}, [^]) what both match, or a refusal
//    (regex_parser.h); "format" date, time,
//    date-time, uuid, email, ipv4, ipv6, hostname, uri and uri-reference
//    as the subsets json_schema_scalars.cc
//    lists; the other formats JSON Schema defines are refused, and formats
//    it does not define are ignored, as validators do. A maxLength
//    holds a pattern's or format's repetitions to what keeps every match
//    within it (a subset: "^[a-z]+$" with 3 is [a-z]{1,3}); a minLength
//    goes with one only when all its matches already have such lengths.
//  - Numbers: integer bounds exactly, up to 9e18; number bounds exactly
//    (fractional ones too, where a double keeps their digits) up to 10^15,
//    written without an exponent. A bound past these on the side it opens
//    to (a minimum of -2^63) is held there: a subset.
//  - anyOf is the alternatives. oneOf too where no value can match two
//    branches: different types, objects told apart by a required key's
//    const or enum values or by keys one requires that the other never
//    writes, strings by patterns no string matches both of as any reader
//    takes them (regex_overlap.h); bare type branches give up what the others accept
//    ([number, integer] is the numbers that are not whole); any other
//    overlap is refused (json_schema_alternatives.cc); an object branch
//    never writes an optional key another branch requires. allOf (and from
//    2019-09 on a $ref with keywords beside it; drafts 4 to 7 ignore them,
//    by the document's $schema) is merged into one schema: types
//    intersect, bounds take the stricter, required unites, properties
//    merge key by key with additionalProperties, enums intersect; what
//    does not merge so (two patterns, patternProperties in two of the
//    schemas) is refused (json_schema_merge.cc). anyOf and oneOf beside
//    other keywords distribute over them. if/then/else: what "if" and
//    "then" accept; where "if" requires a key, the objects without it that
//    "else" accepts; where "if" holds a key to a const or enum, the
//    objects with another of its few values that "else" accepts. enum and const are the values written
//    compactly; $ref points into the same document (#, #/$defs/...,
//    #/definitions/...), recursion included. enum and const take "type",
//    minLength, maxLength, pattern and number bounds beside them, which
//    filter their values.
//  - A schema without "type" is the types its keywords apply to
//    ({"maxLength": 3} is a string); with none of them, any value.
// A document is read by its $schema's draft (none: 2020-12): another
// $schema inside it, or draft 4's boolean exclusive bounds in a later
// draft, is refused.
// Keywords that decide nothing about validity are ignored, as JSON Schema
// says: annotations (title, description, examples, default, $comment, ...),
// vendor (x-*), OpenAPI's (discriminator, nullable) and unknown ones. Any
// keyword of drafts 4 to 2020-12 that does decide validity and is not
// compiled, and compiled ones with siblings a grammar cannot combine, is an
// InvalidArgument error naming it and where it is; so is a $ref inside a
// schema with its own $id or id (it would resolve against that one).

#ifndef LLAMA_WORKER_GRAMMAR_JSON_SCHEMA_H_
#define LLAMA_WORKER_GRAMMAR_JSON_SCHEMA_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace llama::grammar {

// GBNF text for the JSON values `schema` accepts; an error names the
// keyword and where it is, as InvalidArgument: `"not" at /properties/a is
// not supported`. Object properties come in the order `schema` holds them:
// parse it as ordered_json to keep the order it was written in (a
// nlohmann::json sorts keys).
absl::StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema);
absl::StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::json& schema);

// The keywords of `schema`, at any depth, that JSON Schema does not define
// ("x-kubernetes-patch-strategy at /properties/spec"): ignored as it says,
// and named here for a debug log (a misspelled keyword is one). At most
// `limit`; annotations JSON Schema defines (title, examples, ...) are not.
std::vector<std::string> UnknownKeywords(const nlohmann::ordered_json& schema, size_t limit = 20);

// `value` as these grammars write JSON values (enum and const): compact,
// whole numbers without a fraction or exponent (2.0 as 2).
std::string JsonText(const nlohmann::ordered_json& value);

// Any JSON object (response_format json_object).
std::string JsonObjectGbnf();

}  // namespace llama::grammar

#endif  // LLAMA_WORKER_GRAMMAR_JSON_SCHEMA_H_
