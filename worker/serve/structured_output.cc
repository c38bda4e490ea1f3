// The request fields that constrain an answer to a grammar, each turned
// into GBNF (worker/grammar) here, so that what cannot be compiled is the
// request's 400 (naming the field, with the converter's reason: the JSON
// Schema keyword and where it is), never a failure once generation runs.

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "worker/grammar/grammar.h"
#include "worker/grammar/json_schema.h"
#include "worker/grammar/regex_to_gbnf.h"
#include "worker/serve/request_fields.h"

namespace llama::internal_openai {
namespace {

// Each reader leaves `gbnf` empty when the field asks for no constraint
// (response_format "text", llama.cpp's grammar "").

bool FromConverter(Fields& f, const std::string& param, absl::StatusOr<std::string> converted, std::string* gbnf) {
  if (!converted.ok()) return f.Fail(param, std::string(converted.status().message()));
  *gbnf = *std::move(converted);
  return true;
}

bool SchemaGbnf(Fields& f, const std::string& param, const ordered_json& schema, std::string* gbnf) {
  if (!schema.is_object() && !schema.is_boolean()) return f.Fail(param, "expected a JSON Schema (an object)");
  if (VLOG_IS_ON(1)) {
    // Ignored as JSON Schema says, never refused: a misspelled keyword shows here.
    const std::vector<std::string> unknown = grammar::UnknownKeywords(schema);
    if (!unknown.empty()) VLOG(1) << param << ": keywords ignored: " << absl::StrJoin(unknown, ", ");
  }
  return FromConverter(f, param, grammar::JsonSchemaToGbnf(schema), gbnf);
}

// GBNF that the client wrote: checked here, as the engine will parse it.
bool ClientGbnf(Fields& f, const char* name, std::string* gbnf) {
  if (!f.Get(name).is_string()) return f.Fail(name, "expected a string of GBNF");
  const std::string text = f.Get(name).get<std::string>();
  if (text.empty()) return true;
  absl::StatusOr<std::shared_ptr<const grammar::Grammar>> parsed = grammar::Grammar::Parse(text);
  if (!parsed.ok()) return f.Fail(name, absl::StrCat("not a grammar: ", parsed.status().message()));
  *gbnf = text;
  return true;
}

// OpenAI's {"type": "text"}, {"type": "json_object"} or {"type":
// "json_schema", "json_schema": {"name", "schema", "strict"}} ("strict" is
// always so here: the grammar holds the answer to the schema).
bool ResponseFormat(Fields& f, std::string* gbnf) {
  const ordered_json& format = f.GetOrdered("response_format");
  const ordered_json type = format.is_object() ? format.value("type", ordered_json()) : ordered_json();
  if (type == "text") return true;
  if (type == "json_object") {
    *gbnf = grammar::JsonObjectGbnf();
    return true;
  }
  if (type != "json_schema") {
    return f.Fail("response_format.type", "expected \"text\", \"json_object\" or \"json_schema\"");
  }
  const ordered_json json_schema = format.value("json_schema", ordered_json());
  if (!json_schema.is_object()) {
    return f.Fail("response_format.json_schema", "expected {\"name\", \"schema\", \"strict\"}");
  }
  if (json_schema.contains("name") && !json_schema["name"].is_string()) {
    return f.Fail("response_format.json_schema.name", "expected a string");
  }
  if (json_schema.contains("strict") && !json_schema["strict"].is_boolean()) {
    return f.Fail("response_format.json_schema.strict", "expected true or false");
  }
  if (!json_schema.contains("schema")) return f.Fail("response_format.json_schema.schema", "required");
  return SchemaGbnf(f, "response_format.json_schema.schema", json_schema["schema"], gbnf);
}

// vLLM's guided_json: the schema, or its JSON text.
bool GuidedJson(Fields& f, std::string* gbnf) {
  const ordered_json& value = f.GetOrdered("guided_json");
  if (!value.is_string()) return SchemaGbnf(f, "guided_json", value, gbnf);
  ordered_json schema;
  std::string why;
  if (!ParseOrderedJson(value.get<std::string>(), {}, &schema, &why)) return f.Fail("guided_json", why);
  return SchemaGbnf(f, "guided_json", schema, gbnf);
}

bool GuidedRegex(Fields& f, std::string* gbnf) {
  if (!f.Get("guided_regex").is_string()) return f.Fail("guided_regex", "expected a string");
  return FromConverter(f, "guided_regex", grammar::RegexToGbnf(f.Get("guided_regex").get<std::string>()), gbnf);
}

bool GuidedChoice(Fields& f, std::string* gbnf) {
  const json& choices = f.Get("guided_choice");
  if (!choices.is_array() || choices.empty() ||
      !std::all_of(choices.begin(), choices.end(), [](const json& c) { return c.is_string(); })) {
    return f.Fail("guided_choice", "expected a non-empty array of strings");
  }
  *gbnf = grammar::ChoiceGbnf(choices.get<std::vector<std::string>>());
  return true;
}

}  // namespace

const char* ParseStructuredOutput(Fields& f, GenerationParams* p) {
  constexpr std::pair<const char*, bool (*)(Fields&, std::string*)> kReaders[] = {
      {"response_format", ResponseFormat},
      {"guided_json", GuidedJson},
      {"guided_regex", GuidedRegex},
      {"guided_choice", GuidedChoice},
      {"guided_grammar", [](Fields& f, std::string* gbnf) { return ClientGbnf(f, "guided_grammar", gbnf); }},
      {"grammar", [](Fields& f, std::string* gbnf) { return ClientGbnf(f, "grammar", gbnf); }},
      {"json_schema",
       [](Fields& f, std::string* gbnf) { return SchemaGbnf(f, "json_schema", f.GetOrdered("json_schema"), gbnf); }},
  };
  const char* used = nullptr;
  for (const auto& [name, read] : kReaders) {
    std::string gbnf;
    if (!f.ok() || !f.Has(name) || !read(f, &gbnf) || gbnf.empty()) continue;
    if (used != nullptr) {
      f.Fail(name, absl::StrFormat("%s and %s both constrain the answer: give one of them", used, name));
      return nullptr;
    }
    used = name;
    p->grammar = std::move(gbnf);
  }
  return used;
}

}  // namespace llama::internal_openai
