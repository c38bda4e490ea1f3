// Reading a request body's fields (internal to :openai_api): each read
// checks the type and range, and the first bad field becomes the request's
// error, naming it. The body's fields that hold schemas and tool
// definitions come parsed a second time, in the order the client wrote
// their keys, since that order is part of what they mean (a schema's
// property order is the answer's; tools are shown to the model as written).

#ifndef LLAMA_WORKER_SERVE_REQUEST_FIELDS_H_
#define LLAMA_WORKER_SERVE_REQUEST_FIELDS_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "worker/sampling/sampling_params.h"
#include "worker/serve/openai_api.h"

namespace llama::internal_openai {

using nlohmann::json;
using nlohmann::ordered_json;

// The top-level fields a body's ordered_json keeps (ParseOrderedJson's
// `top_level`).
inline constexpr const char* kOrderedFields[] = {"response_format", "guided_json", "json_schema", "tools"};

// `text` as an ordered_json: of a top-level object, only the members
// `top_level` names (all when null). An ordered object finds a key by a
// linear search, so text with more than 8192 keys in what is kept is an
// error (returns false, `error` set) rather than parsed in quadratic time;
// so is text that is not JSON.
bool ParseOrderedJson(absl::string_view text, absl::Span<const char* const> top_level, ordered_json* out,
                      std::string* error);

// Reads the fields of a request body, stopping at the first bad one.
class Fields {
 public:
  Fields(const json& body, const ordered_json& ordered, ApiError* error)
      : body_(body), ordered_(ordered), error_(error) {}

  bool ok() const { return ok_; }
  bool Has(const char* name) {
    seen_.insert(name);
    return body_.contains(name) && !body_[name].is_null();
  }
  // The body's fields that no parser looked at, in the body's order.
  std::vector<std::string> Unread() const {
    std::vector<std::string> unread;
    for (const auto& [name, value] : body_.items()) {
      if (!seen_.contains(name)) unread.push_back(name);
    }
    return unread;
  }
  const json& Get(const char* name) const { return body_[name]; }
  // One of kOrderedFields, with its keys in the body's order.
  const ordered_json& GetOrdered(const char* name) const { return ordered_[name]; }

  bool Fail(const std::string& param, const std::string& message) {
    if (ok_) *error_ = {400, absl::StrCat(param, ": ", message), "invalid_request_error", param, ""};
    ok_ = false;
    return false;
  }

  void String(const char* name, std::string* out, bool required) {
    if (!ok_) return;
    if (!Has(name)) {
      if (required) Fail(name, "required");
      return;
    }
    if (!Get(name).is_string()) return void(Fail(name, "expected a string"));
    *out = Get(name).get<std::string>();
  }
  void Bool(const char* name, bool* out) {
    if (!ok_ || !Has(name)) return;
    if (!Get(name).is_boolean()) return void(Fail(name, "expected true or false"));
    *out = Get(name).get<bool>();
  }
  // An integer in [lo, hi].
  template <typename T>
  void Integer(const char* name, T* out, int64_t lo, int64_t hi) {
    if (!ok_ || !Has(name)) return;
    const json& v = Get(name);
    if (!v.is_number_integer()) return void(Fail(name, "expected an integer"));
    const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX ? INT64_MAX : v.get<int64_t>();
    if (x < lo || x > hi) return void(Fail(name, absl::StrFormat("%d is out of range [%d, %d]", x, lo, hi)));
    *out = static_cast<T>(x);
  }
  // A number in `range` (a sampling parameter's, worker/sampling/sampling_params.h).
  void Number(const SamplingRange& range, float* out) {
    if (!ok_ || !Has(range.name)) return;
    const json& v = Get(range.name);
    if (!v.is_number()) return void(Fail(range.name, "expected a number"));
    const double x = v.get<double>();
    if (!range.Contains(x)) return void(Fail(range.name, absl::StrFormat("%g is out of range %s", x, range.Interval())));
    *out = static_cast<float>(x);
  }

 private:
  const json& body_;
  const ordered_json& ordered_;
  ApiError* error_;
  bool ok_ = true;
  absl::flat_hash_set<std::string> seen_;
};

// Reads the structured-output fields (structured_output.cc):
// response_format, vLLM's guided_json/regex/choice/grammar, llama.cpp's
// grammar and json_schema, into p->grammar; at most one of them. Returns
// the field that set it, or null.
const char* ParseStructuredOutput(Fields& f, GenerationParams* p);

// Reads chat's tools and tool_choice (tool_calls.cc) into p->tools, and
// for a forced call (required, or a named function) p->grammar, which
// `constrained_by` (ParseStructuredOutput's field) may not have set too.
void ParseTools(Fields& f, const char* constrained_by, GenerationParams* p);

// Reads chat's messages (chat_messages.cc): roles, text content (a string
// or text parts), an assistant's tool_calls and a tool's result.
void ParseMessages(Fields& f, const json& body, Dialog* out);

}  // namespace llama::internal_openai

#endif  // LLAMA_WORKER_SERVE_REQUEST_FIELDS_H_
