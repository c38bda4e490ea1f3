// Test-only access to the tokenizer fixture that //tests/fixtures:tokenizer_fixture
// builds with Python's SentencePiece, and to its golden files.

#ifndef LLAMA_TOKENIZER_TOKENIZER_FIXTURE_H_
#define LLAMA_TOKENIZER_TOKENIZER_FIXTURE_H_

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/sentencepiece_proto.h"
#include "tokenizer/tokenizer.h"

namespace llama::testing {

// Runfiles path of a file of the fixture, e.g. "tokenizer.model".
std::string TokenizerFixturePath(const std::string& name);

// The fixture's tokenizer; aborts the test binary if it cannot be loaded
// (every test in it would fail anyway), naming the file and the fix.
const Tokenizer& FixtureTokenizer();

// The fixture's vocabulary rewritten piece by piece as a SentencePiece
// model file's bytes, with `edit` applied first: another tokenizer that
// differs from the fixture only where a test says.
std::string EditedFixtureModel(const std::function<void(SentencePieceSpec&)>& edit);

// A golden JSON file of the fixture, parsed.
nlohmann::json ReadGolden(const std::string& name);

// Base64 field of a golden row, decoded to bytes.
std::string DecodeBase64Field(const nlohmann::json& row, const char* field);

}  // namespace llama::testing

#endif  // LLAMA_TOKENIZER_TOKENIZER_FIXTURE_H_
