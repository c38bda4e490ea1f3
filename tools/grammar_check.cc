// //tools:grammar_check: what a JSON Schema's grammar (structured output,
// worker/grammar/json_schema.h) accepts, instance by instance, and whether
// that agrees with what the schema says.
//
//   grammar_check --schema=s.json a.json b.json       each file one JSON text, checked as written
//   grammar_check --schema=s.json --instances=i.jsonl one JSON text a line
//   grammar_check --suite=DIR_OR_FILE,...             JSON-Schema-Test-Suite files
//   grammar_check --corpus=schemas.jsonl              how many schemas compile, and how fast
//
// Each text is given to the grammar whole (Grammar::Accepts) and, with
// --tokenizer_path, forced through the token matcher as its tokens, as
// generation would write them. With --suite, every test case whose schema
// compiles is checked: a valid instance the grammar rejects or an invalid
// one it accepts is a wrong verdict, printed; instances are written as the
// grammar writes JSON (compact, keys in the schema's order:
// InGrammarOrder). A test whose valid instance lies outside what the
// grammar writes by design (json_schema.h) is listed with its reason in
// --known_rejections; the run fails (exit status 1) on any other wrong
// verdict, on a listed test the grammar now accepts, or when fewer than
// --min_compiled_tests tests were checked.
//
// With --corpus (one {"name", "schema"} object a line, as
// tools/gather_schema_corpus.py writes), each schema is compiled as the
// server compiles a response_format: JSON Schema to GBNF to grammar, and
// with --tokenizer_path the token automaton and the first mask, which is
// what a request waits for before its first token. Prints the share that
// compiles, the refusals counted by their reason, and the time to the first
// mask (p50, p99, max). The vocabulary's trie is built once, before timing,
// as the server's grammar cache holds it.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gflags/gflags.h>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "tokenizer/tokenizer.h"
#include "tools/tool_main.h"
#include "worker/grammar/json_schema.h"
#include "worker/grammar/schema_check.h"
#include "worker/grammar/token_matcher.h"

DEFINE_string(schema, "", "The JSON Schema file whose grammar checks the instances.");
DEFINE_string(instances, "", "A file of JSON instances, one a line (besides the files named as arguments).");
DEFINE_bool(in_grammar_order, false, "Check each instance rewritten as the grammar writes JSON (compact, keys in the "
                                     "schema's order) rather than as written.");
DEFINE_bool(print_gbnf, false, "Print the schema's grammar first.");
DEFINE_string(tokenizer_path, "", "A tokenizer.model: also force each instance's tokens through the matcher.");
DEFINE_string(suite, "", "JSON-Schema-Test-Suite files or folders of them, comma-separated.");
DEFINE_string(known_rejections, "", "With --suite: the tests whose valid instance the grammar rejects by design, "
                                    "one a line: file | case | test | why ('#' lines are comments).");
DEFINE_int32(min_compiled_tests, 0, "With --suite: fail when fewer tests than this were checked.");
DEFINE_string(corpus, "", "A file of JSON Schemas, one {\"name\", \"schema\"} object a line: report how many "
                          "compile, why the others do not, and the time to the first mask.");
DEFINE_bool(print_refusals, false, "With --corpus: print each refused schema's name and the refusal.");
DEFINE_double(min_compiled_share, 0, "With --corpus: fail when a smaller share of the schemas (0 to 1) compiles.");
DEFINE_double(max_first_mask_p99_ms, 0, "With --corpus and --tokenizer_path: fail when the time to the first mask "
                                        "has a p99 above this (0: no limit).");

namespace {

using ::nlohmann::ordered_json;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

absl::StatusOr<ordered_json> ReadJson(const std::string& path, const std::string& text) {
  ordered_json value = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, ": not JSON"));
  return value;
}

std::string TokensVerdict(const llama::grammar::SchemaChecker::Verdict& v) {
  if (!v.tokens_accepted.has_value()) return "";
  return *v.tokens_accepted ? ", tokens accepted" : ", tokens rejected";
}

// A verdict the grammar and the matcher disagree on is the matcher's bug.
bool Disagree(const llama::grammar::SchemaChecker::Verdict& v) {
  return v.tokens_accepted.has_value() && *v.tokens_accepted != v.accepted;
}

absl::Status CheckInstances(const std::vector<std::string>& files, const llama::Tokenizer* tokenizer) {
  ASSIGN_OR_RETURN(const std::string schema_text, ReadFile(FLAGS_schema));
  ASSIGN_OR_RETURN(const ordered_json schema, ReadJson(FLAGS_schema, schema_text));
  absl::StatusOr<std::unique_ptr<llama::grammar::SchemaChecker>> checker =
      llama::grammar::SchemaChecker::Create(schema, tokenizer);
  if (!checker.ok()) return absl::InvalidArgumentError(absl::StrCat(FLAGS_schema, ": ", checker.status().message()));
  if (FLAGS_print_gbnf) std::printf("%s\n", (*checker)->gbnf().c_str());
  std::vector<std::pair<std::string, std::string>> instances;  // Where each is, and its text.
  for (const std::string& file : files) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(file));
    instances.emplace_back(file, std::string(absl::StripTrailingAsciiWhitespace(text)));
  }
  if (!FLAGS_instances.empty()) {
    ASSIGN_OR_RETURN(const std::string text, ReadFile(FLAGS_instances));
    int line = 0;
    for (const absl::string_view l : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
      instances.emplace_back(absl::StrCat(FLAGS_instances, ":", ++line), std::string(l));
    }
  }
  if (instances.empty()) return absl::InvalidArgumentError("no instances: name files, or --instances");
  bool disagreement = false;
  for (auto& [where, text] : instances) {
    if (FLAGS_in_grammar_order) {
      ASSIGN_OR_RETURN(const ordered_json instance, ReadJson(where, text));
      text = llama::grammar::InGrammarOrder(schema, instance);
    }
    const llama::grammar::SchemaChecker::Verdict v = (*checker)->Check(text);
    std::printf("%s: %s%s: %s\n", where.c_str(), v.accepted ? "accepted" : "rejected", TokensVerdict(v).c_str(),
                text.c_str());
    disagreement |= Disagree(v);
  }
  if (disagreement) return absl::InternalError("the matcher's tokens and the grammar disagree (see above)");
  return absl::OkStatus();
}

// file | case | test, as the suite describes them.
using TestKey = std::tuple<std::string, std::string, std::string>;

absl::StatusOr<std::set<TestKey>> KnownRejections() {
  std::set<TestKey> known;
  if (FLAGS_known_rejections.empty()) return known;
  ASSIGN_OR_RETURN(const std::string text, ReadFile(FLAGS_known_rejections));
  for (const absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "#")) continue;
    const std::vector<std::string> fields = absl::StrSplit(line, " | ");
    if (fields.size() != 4) {
      return absl::InvalidArgumentError(absl::StrCat(FLAGS_known_rejections, ": not file | case | test | why: ", line));
    }
    known.insert({fields[0], fields[1], fields[2]});
  }
  return known;
}

struct FileCounts {
  int cases = 0, compiled_cases = 0, tests = 0, checked_tests = 0, wrong = 0, known = 0;
};

absl::Status RunSuite(const llama::Tokenizer* tokenizer) {
  std::vector<std::string> files;
  for (const std::string& entry : std::vector<std::string>(absl::StrSplit(FLAGS_suite, ',', absl::SkipEmpty()))) {
    if (std::filesystem::is_directory(entry)) {
      for (const auto& f : std::filesystem::directory_iterator(entry)) {
        if (f.path().extension() == ".json") files.push_back(f.path().string());
      }
    } else {
      files.push_back(entry);
    }
  }
  std::sort(files.begin(), files.end());
  ASSIGN_OR_RETURN(std::set<TestKey> known, KnownRejections());
  std::map<std::string, FileCounts> counts;
  FileCounts total;
  int failures = 0;
  for (const std::string& path : files) {
    // Named by its draft's folder and its name: draft7/oneOf.json.
    const std::filesystem::path p(path);
    const std::string name = (p.parent_path().filename() / p.filename()).string();
    ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
    ASSIGN_OR_RETURN(const ordered_json cases, ReadJson(path, text));
    FileCounts& c = counts[name];
    for (const ordered_json& test_case : cases) {
      const std::string description = test_case.value("description", "");
      ++c.cases;
      c.tests += static_cast<int>(test_case["tests"].size());
      // The suite's schemas leave $schema out: its folder names the draft,
      // which decides what a $ref's sibling keywords mean.
      ordered_json schema = test_case["schema"];
      const std::string draft = p.parent_path().filename().string();
      if (schema.is_object() && !schema.contains("$schema") && absl::StartsWith(draft, "draft") &&
          draft.size() == 6) {
        schema["$schema"] = absl::StrCat("http://json-schema.org/draft-0", draft.substr(5), "/schema#");
      }
      absl::StatusOr<std::unique_ptr<llama::grammar::SchemaChecker>> checker =
          llama::grammar::SchemaChecker::Create(schema, tokenizer);
      if (!checker.ok()) continue;
      ++c.compiled_cases;
      for (const ordered_json& test : test_case["tests"]) {
        ++c.checked_tests;
        const std::string instance = llama::grammar::InGrammarOrder(test_case["schema"], test["data"]);
        const llama::grammar::SchemaChecker::Verdict v = (*checker)->Check(instance);
        const bool valid = test["valid"].get<bool>();
        const TestKey key = {name, description, test.value("description", "")};
        const bool listed = known.erase(key) > 0;
        if (Disagree(v)) {
          ++failures;
          std::printf("MATCHER %s | %s | %s: the grammar %s %s, its tokens not\n", name.c_str(), description.c_str(),
                      std::get<2>(key).c_str(), v.accepted ? "accepts" : "rejects", instance.c_str());
        }
        if (v.accepted == valid) {
          if (listed) {
            ++failures;
            std::printf("STALE %s | %s | %s: listed in --known_rejections, now accepted\n", name.c_str(),
                        description.c_str(), std::get<2>(key).c_str());
          }
          continue;
        }
        if (listed && valid) {
          ++c.known;
          continue;
        }
        ++c.wrong;
        ++failures;
        std::printf("WRONG %s | %s | %s: %s %s\n", name.c_str(), description.c_str(), std::get<2>(key).c_str(),
                    valid ? "valid, rejected:" : "INVALID, ACCEPTED:", instance.c_str());
      }
    }
  }
  for (const TestKey& k : known) {
    ++failures;
    std::printf("STALE %s | %s | %s: listed in --known_rejections, not met\n", std::get<0>(k).c_str(),
                std::get<1>(k).c_str(), std::get<2>(k).c_str());
  }
  std::printf("%-42s %14s %14s %6s %6s\n", "file", "cases compiled", "tests checked", "wrong", "known");
  for (const auto& [name, c] : counts) {
    std::printf("%-42s %6d / %-5d %6d / %-5d %6d %6d\n", name.c_str(), c.compiled_cases, c.cases, c.checked_tests,
                c.tests, c.wrong, c.known);
    total.cases += c.cases;
    total.compiled_cases += c.compiled_cases;
    total.tests += c.tests;
    total.checked_tests += c.checked_tests;
    total.wrong += c.wrong;
    total.known += c.known;
  }
  std::printf("%-42s %6d / %-5d %6d / %-5d %6d %6d\n", "total", total.compiled_cases, total.cases,
              total.checked_tests, total.tests, total.wrong, total.known);
  if (total.checked_tests < FLAGS_min_compiled_tests) {
    return absl::InternalError(
        absl::StrCat(total.checked_tests, " tests checked, fewer than --min_compiled_tests=", FLAGS_min_compiled_tests));
  }
  if (failures > 0) return absl::InternalError(absl::StrCat(failures, " wrong verdicts or stale entries (see above)"));
  return absl::OkStatus();
}

// A refusal's reason without where in the schema or the grammar it arose,
// so that refusals of one kind count together: "\"not\" at
// /properties/a/allOf/1 is not supported" becomes "\"not\" is not
// supported".
std::string RefusalKind(absl::string_view message) {
  std::string kind;
  if (absl::ConsumePrefix(&message, "grammar line ")) {
    const size_t colon = message.find(": ");
    if (colon != absl::string_view::npos) message.remove_prefix(colon + 2);
  }
  while (!message.empty()) {
    const size_t at = message.find(" at ");
    if (at == absl::string_view::npos || at + 4 >= message.size() ||
        (message[at + 4] != '/' && message[at + 4] != '#')) {
      absl::StrAppend(&kind, message);
      break;
    }
    absl::StrAppend(&kind, message.substr(0, at));
    message.remove_prefix(at + 4);
    message.remove_prefix(std::min(message.size(), message.find_first_of(" :")));
  }
  return kind.size() > 100 ? kind.substr(0, 100) + "..." : kind;
}

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(q * values.size()))];
}

absl::Status RunCorpus(const llama::Tokenizer* tokenizer) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(FLAGS_corpus));
  std::shared_ptr<const llama::grammar::TokenTrie> trie;
  if (tokenizer != nullptr) trie = llama::grammar::TokenTrie::ForTokenizer(*tokenizer);
  std::map<std::string, int> refusals;
  std::vector<double> first_mask_ms;
  std::vector<std::pair<double, std::string>> slowest;  // The 5 slowest first masks, and their schemas.
  int schemas = 0, compiled = 0, line_number = 0;
  for (const absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const std::string where = absl::StrCat(FLAGS_corpus, ":", ++line_number);
    ASSIGN_OR_RETURN(const ordered_json entry, ReadJson(where, std::string(line)));
    if (!entry.is_object() || !entry.contains("schema")) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": expected an object with \"schema\""));
    }
    ++schemas;
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::string> gbnf = llama::grammar::JsonSchemaToGbnf(entry["schema"]);
    absl::StatusOr<std::shared_ptr<const llama::grammar::Grammar>> grammar =
        gbnf.ok() ? llama::grammar::Grammar::Parse(*gbnf) : gbnf.status();
    if (!grammar.ok()) {
      ++refusals[RefusalKind(grammar.status().message())];
      if (FLAGS_print_refusals) {
        std::printf("refused %s: %s\n", entry.value("source", entry.value("name", where)).c_str(),
                    std::string(grammar.status().message()).c_str());
      }
      continue;
    }
    ++compiled;
    if (trie == nullptr) continue;
    auto automaton = std::make_shared<llama::grammar::TokenAutomaton>(*grammar, trie);
    ASSIGN_OR_RETURN(std::unique_ptr<llama::grammar::TokenMatcher> matcher,
                     llama::grammar::TokenMatcher::Start(automaton));
    matcher->Allowed();
    first_mask_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    slowest.emplace_back(first_mask_ms.back(), entry.value("source", entry.value("name", where)));
    std::sort(slowest.rbegin(), slowest.rend());
    if (slowest.size() > 5) slowest.pop_back();
  }
  std::vector<std::pair<int, std::string>> by_count;
  for (const auto& [kind, n] : refusals) by_count.emplace_back(-n, kind);
  std::sort(by_count.begin(), by_count.end());
  std::printf("refusals by reason (%zu reasons):\n", by_count.size());
  for (const auto& [minus_n, kind] : by_count) std::printf("%6d  %s\n", -minus_n, kind.c_str());
  const double share = schemas == 0 ? 0 : static_cast<double>(compiled) / schemas;
  std::printf("%d of %d schemas compile (%.1f%%)\n", compiled, schemas, 100 * share);
  if (!first_mask_ms.empty()) {
    std::printf("time to the first mask (compile + automaton + mask, %zu-token vocabulary): p50 %.2f ms, p99 %.2f ms, "
                "max %.2f ms\n",
                static_cast<size_t>(trie->vocab_size()), Percentile(first_mask_ms, 0.5), Percentile(first_mask_ms, 0.99),
                Percentile(first_mask_ms, 1));
    for (const auto& [ms, source] : slowest) std::printf("  %9.2f ms  %s\n", ms, source.c_str());
  }
  if (share < FLAGS_min_compiled_share) {
    return absl::InternalError(absl::StrCat("a share of ", share, " compiles, below --min_compiled_share=",
                                            FLAGS_min_compiled_share));
  }
  if (FLAGS_max_first_mask_p99_ms > 0 && Percentile(first_mask_ms, 0.99) > FLAGS_max_first_mask_p99_ms) {
    return absl::InternalError(absl::StrCat("time to the first mask p99 over --max_first_mask_p99_ms=",
                                            FLAGS_max_first_mask_p99_ms));
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  return llama::ToolMain(
      argc, argv, "grammar_check",
      "Says which JSON instances a JSON Schema's grammar accepts, or runs JSON-Schema-Test-Suite files.",
      [](const std::vector<std::string>& args) -> absl::Status {
        std::unique_ptr<llama::Tokenizer> tokenizer;
        if (!FLAGS_tokenizer_path.empty()) {
          ASSIGN_OR_RETURN(tokenizer, llama::Tokenizer::Load(FLAGS_tokenizer_path));
        }
        if (!FLAGS_suite.empty()) return RunSuite(tokenizer.get());
        if (!FLAGS_corpus.empty()) return RunCorpus(tokenizer.get());
        if (FLAGS_schema.empty()) return absl::InvalidArgumentError("--schema, --suite or --corpus: required");
        return CheckInstances(args, tokenizer.get());
      });
}
