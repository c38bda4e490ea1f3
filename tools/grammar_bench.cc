// //tools:grammar_bench: what structured output costs per token
// (worker/grammar/token_matcher.h): the matcher's time to give the mask of
// allowed tokens and take the chosen one, over random walks through JSON
// schemas of growing size, at a full-size vocabulary.
//
//   grammar_bench --tokenizer_path=/tmp/vocab/llama3_shape.model
//   grammar_bench --tokenizer_path=... --schemas=my_schemas.json   (a JSON array of schemas)
//   grammar_bench --tokenizer_path=... --grammar=file.gbnf
//
// tools/make_bench_vocabularies.py writes Llama 2- and Llama 3-shaped
// vocabularies (32,000 SentencePiece pieces; 128,256 byte-level BPE ids).
// A walk picks each token uniformly from those the grammar allows, so it
// spends most tokens inside strings, as generated JSON does; the walks of
// one schema share its automaton, as a server's requests do. Reported:
// microseconds per token (p50, p99, mean) over every token, and apart the
// tokens whose mask was computed rather than found (first visits).

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include <gflags/gflags.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "tokenizer/tokenizer.h"
#include "tools/tool_main.h"
#include "worker/grammar/json_schema.h"
#include "worker/grammar/token_matcher.h"

DEFINE_string(tokenizer_path, "", "The vocabulary: a tokenizer.model (SentencePiece or tiktoken ranks).");
DEFINE_string(schemas, "", "A JSON file holding an array of JSON schemas; default: built-in schemas of 1 to 64 "
                           "properties.");
DEFINE_string(grammar, "", "A GBNF file to measure instead of schemas.");
DEFINE_int32(walks, 20, "Random walks per grammar.");
DEFINE_int32(max_tokens, 300, "Tokens per walk at most.");
DEFINE_uint64(seed, 1, "Seeds the walks.");
DEFINE_double(punctuation_bias, 0, "With this probability a step draws only among the allowed tokens without letters, "
                                   "digits or spaces (quotes, commas, brackets), so strings close after a few tokens as "
                                   "a model's short values do; 0: every step draws among all allowed tokens.");

namespace {

using llama::grammar::TokenMask;

// An object of `n` properties cycling through the common kinds.
nlohmann::ordered_json SchemaOfSize(int n) {
  using json = nlohmann::ordered_json;
  const json kinds[] = {
      {{"type", "string"}, {"maxLength", 24}},
      {{"type", "integer"}, {"minimum", 0}, {"maximum", 100000}},
      {{"type", "number"}},
      {{"type", "boolean"}},
      {{"enum", {"red", "green", "blue", "a longer choice"}}},
      {{"type", "array"}, {"items", {{"type", "string"}, {"maxLength", 12}}}, {"maxItems", 4}},
      {{"type", "object"},
       {"properties", {{"id", {{"type", "integer"}}}, {"name", {{"type", "string"}, {"maxLength", 16}}}}},
       {"required", {"id", "name"}}},
      {{"type", "string"}, {"format", "date"}},
  };
  json properties = json::object(), required = json::array();
  for (int i = 0; i < n; ++i) {
    const std::string name = absl::StrFormat("field_%d", i);
    properties[name] = kinds[i % std::size(kinds)];
    if (i % 3 != 2) required.push_back(name);
  }
  return {{"type", "object"}, {"properties", properties}, {"required", required}};
}

// An object of `n` required strings without bounds: one string rule open
// in `n` places, what the per-top split of the masks serves.
nlohmann::ordered_json SchemaOfFreeStrings(int n) {
  using json = nlohmann::ordered_json;
  json properties = json::object(), required = json::array();
  for (int i = 0; i < n; ++i) {
    const std::string name = absl::StrFormat("text_%d", i);
    properties[name] = {{"type", "string"}};
    required.push_back(name);
  }
  return {{"type", "object"}, {"properties", properties}, {"required", required}};
}

struct Source {
  std::string name;
  std::string gbnf;
};

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* flag) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrFormat("--%s=%s: cannot read the file", flag, path));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

absl::StatusOr<std::vector<Source>> Sources() {
  if (!FLAGS_grammar.empty()) {
    ASSIGN_OR_RETURN(std::string gbnf, ReadFile(FLAGS_grammar, "grammar"));
    return std::vector<Source>{{FLAGS_grammar, gbnf}};
  }
  std::vector<nlohmann::ordered_json> schemas;
  std::vector<std::string> names;
  if (FLAGS_schemas.empty()) {
    for (int n : {1, 4, 16, 64}) {
      schemas.push_back(SchemaOfSize(n));
      names.push_back(absl::StrFormat("object of %d properties", n));
    }
    schemas.push_back(SchemaOfFreeStrings(16));
    names.push_back("object of 16 free strings");
  } else {
    ASSIGN_OR_RETURN(std::string text, ReadFile(FLAGS_schemas, "schemas"));
    const nlohmann::ordered_json list = nlohmann::ordered_json::parse(text, nullptr, false);
    if (!list.is_array()) return absl::InvalidArgumentError(absl::StrCat("--schemas=", FLAGS_schemas, ": expected a JSON array of schemas"));
    for (size_t i = 0; i < list.size(); ++i) {
      schemas.push_back(list[i]);
      names.push_back(absl::StrFormat("schema %d", i));
    }
  }
  std::vector<Source> sources;
  for (size_t i = 0; i < schemas.size(); ++i) {
    absl::StatusOr<std::string> gbnf = llama::grammar::JsonSchemaToGbnf(schemas[i]);
    if (!gbnf.ok()) return absl::InvalidArgumentError(absl::StrCat(names[i], ": ", gbnf.status().message()));
    sources.push_back({names[i], *gbnf});
  }
  return sources;
}

bool IsPunctuation(std::string_view bytes) {
  return !bytes.empty() && std::all_of(bytes.begin(), bytes.end(), [](char c) {
    return std::ispunct(static_cast<unsigned char>(c)) != 0;
  });
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}

absl::Status Measure(const Source& source, const std::shared_ptr<const llama::grammar::TokenTrie>& trie,
                     std::mt19937_64& rng) {
  ASSIGN_OR_RETURN(std::shared_ptr<const llama::grammar::Grammar> grammar, llama::grammar::Grammar::Parse(source.gbnf));
  auto automaton = std::make_shared<llama::grammar::TokenAutomaton>(grammar, trie);
  std::vector<double> all, computed;
  int finished = 0;
  std::vector<int> allowed, punctuation;
  std::bernoulli_distribution punctuation_step(FLAGS_punctuation_bias);
  for (int walk = 0; walk < FLAGS_walks; ++walk) {
    ASSIGN_OR_RETURN(std::unique_ptr<llama::grammar::TokenMatcher> m, llama::grammar::TokenMatcher::Start(automaton));
    for (int step = 0; step < FLAGS_max_tokens && !m->complete(); ++step) {
      const int64_t masks_before = automaton->stats().masks;
      const auto start = std::chrono::steady_clock::now();
      std::shared_ptr<const TokenMask> mask = m->Allowed();
      const double mask_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      allowed.clear();
      punctuation.clear();
      for (int t = 0; t < trie->vocab_size(); ++t) {
        if (!llama::grammar::MaskHas(mask->data(), t)) continue;
        allowed.push_back(t);
        if (IsPunctuation(trie->bytes(t))) punctuation.push_back(t);
      }
      if (allowed.empty()) return absl::InternalError(absl::StrCat(source.name, ": a live state allows no token"));
      const std::vector<int>& pool = !punctuation.empty() && punctuation_step(rng) ? punctuation : allowed;
      const int token = pool[rng() % pool.size()];
      const auto accept_start = std::chrono::steady_clock::now();
      RETURN_IF_ERROR(m->Accept(token));
      const double us = mask_us + std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - accept_start).count();
      all.push_back(us);
      if (automaton->stats().masks > masks_before) computed.push_back(us);
    }
    finished += m->complete();
  }
  const llama::grammar::TokenAutomaton::Stats stats = automaton->stats();
  std::printf("%-28s %5zu tokens: per token p50 %7.1f us, p99 %8.1f us, mean %7.1f us | masks computed %4zu: p50 %7.1f us, "
              "p99 %8.1f us | %d/%d walks complete, %lld parser states, %lld bytes of GBNF\n",
              source.name.c_str(), all.size(), Percentile(all, 0.5), Percentile(all, 0.99), Mean(all), computed.size(),
              Percentile(computed, 0.5), Percentile(computed, 0.99), finished, FLAGS_walks,
              static_cast<long long>(stats.parser_states), static_cast<long long>(source.gbnf.size()));
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  return llama::ToolMain(
      argc, argv, "grammar_bench", "Measures the structured-output matcher's time per token.",
      [](const std::vector<std::string>&) -> absl::Status {
        if (FLAGS_tokenizer_path.empty()) {
          return absl::InvalidArgumentError("--tokenizer_path: required (tools/make_bench_vocabularies.py writes "
                                            "full-size ones)");
        }
        ASSIGN_OR_RETURN(std::unique_ptr<llama::Tokenizer> tokenizer, llama::Tokenizer::Load(FLAGS_tokenizer_path));
        ASSIGN_OR_RETURN(std::vector<Source> sources, Sources());
        const auto start = std::chrono::steady_clock::now();
        std::shared_ptr<const llama::grammar::TokenTrie> trie = llama::grammar::TokenTrie::ForTokenizer(*tokenizer);
        std::printf("vocabulary: %d tokens (%s), trie of %zu nodes built in %.1f ms\n", tokenizer->vocab_size(),
                    tokenizer->family() == llama::Tokenizer::Family::kTiktoken ? "byte-level BPE" : "SentencePiece",
                    trie->nodes().size(),
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
        std::mt19937_64 rng(FLAGS_seed);
        for (const Source& s : sources) RETURN_IF_ERROR(Measure(s, trie, rng));
        return absl::OkStatus();
      },
      {}, {});
}
