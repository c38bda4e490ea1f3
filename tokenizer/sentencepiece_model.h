// A thin, Abseil-free view of a SentencePiece model.
//
// Why this file exists: Debian's sentencepiece_processor.h declares
// `namespace absl { using std::string_view; }`, which breaks every
// translation unit that also includes Abseil (whose absl::string_view is a
// class). So SentencePiece is included by sentencepiece_model.cc alone,
// which includes no Abseil header; the rest of the project sees this plain
// C++ interface, and Tokenizer turns its errors into absl::Status.

#ifndef LLAMA_TOKENIZER_SENTENCEPIECE_MODEL_H_
#define LLAMA_TOKENIZER_SENTENCEPIECE_MODEL_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace llama::internal_tokenizer {

// Thread-safe: all methods are const and may be called concurrently.
class SentencePieceModel {
 public:
  // Parses a serialized ModelProto. Returns null and sets `error` on failure.
  static std::unique_ptr<SentencePieceModel> FromSerialized(std::string_view serialized,
                                                            std::string* error);
  ~SentencePieceModel();
  SentencePieceModel(const SentencePieceModel&) = delete;
  SentencePieceModel& operator=(const SentencePieceModel&) = delete;

  int piece_size() const;
  int bos_id() const;
  int eos_id() const;
  int pad_id() const;
  int unk_id() const;
  std::string IdToPiece(int id) const;
  float Score(int id) const;
  bool IsByte(int id) const;
  bool IsControl(int id) const;
  bool IsUnknown(int id) const;
  bool IsUnused(int id) const;

  // Both return false and set `error` on failure. Ids must be in range.
  bool Encode(std::string_view text, std::vector<int>* ids, std::string* error) const;
  bool Decode(const std::vector<int>& ids, std::string* text, std::string* error) const;

 private:
  class Impl;
  explicit SentencePieceModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace llama::internal_tokenizer

#endif  // LLAMA_TOKENIZER_SENTENCEPIECE_MODEL_H_
