#include "tokenizer/tokenizer_fixture.h"

#include <fstream>

#include <glog/logging.h>

#include "absl/strings/escaping.h"

namespace llama::testing {

std::string TokenizerFixturePath(const std::string& name) {
  return "tests/fixtures/tokenizer_fixture/" + name;
}

const Tokenizer& FixtureTokenizer() {
  static const Tokenizer* tokenizer = [] {
    absl::StatusOr<std::unique_ptr<Tokenizer>> loaded =
        Tokenizer::Load(TokenizerFixturePath("tokenizer.model"));
    CHECK(loaded.ok()) << loaded.status()
                       << "\nHINT: //tests/fixtures:tokenizer_fixture builds it with /usr/bin/python3 "
                          "and python3-sentencepiece (third_party/setup.sh installs them).";
    return loaded->release();
  }();
  return *tokenizer;
}

std::string EditedFixtureModel(const std::function<void(SentencePieceSpec&)>& edit) {
  const Tokenizer& fixture = FixtureTokenizer();
  // Indexed by Tokenizer::PieceKind.
  static constexpr SentencePieceType kTypes[] = {SentencePieceType::kNormal, SentencePieceType::kUnknown,
                                                 SentencePieceType::kControl, SentencePieceType::kByte,
                                                 SentencePieceType::kUnused};
  SentencePieceSpec spec;
  for (int id = 0; id < fixture.vocab_size(); ++id) {
    const Tokenizer::Piece piece = fixture.GetPiece(id);
    spec.pieces.push_back({piece.text, piece.score, kTypes[static_cast<int>(piece.kind)]});
  }
  spec.unk_id = fixture.unk_id();
  spec.bos_id = fixture.bos_id();
  spec.eos_id = fixture.eos_id();
  edit(spec);
  return SerializeSentencePieceModel(spec);
}

nlohmann::json ReadGolden(const std::string& name) {
  const std::string path = TokenizerFixturePath(name);
  std::ifstream file(path);
  CHECK(file) << "cannot open golden file " << path;
  return nlohmann::json::parse(file);
}

std::string DecodeBase64Field(const nlohmann::json& row, const char* field) {
  std::string bytes;
  CHECK(absl::Base64Unescape(row.at(field).get<std::string>(), &bytes)) << field;
  return bytes;
}

}  // namespace llama::testing
