// Writes a SentencePiece model file (a serialized sentencepiece.ModelProto)
// from a vocabulary, for vocabularies that arrive in another container
// (GGUF's tokenizer.ggml.* arrays). Protocol Buffers' wire format is written
// directly: the few fields are fixed, Debian installs neither
// SentencePiece's .proto nor its generated header, and libsentencepiece
// carries its own protobuf runtime (third_party/system_libs.bzl), which a
// generated message of ours would sit beside. Tokenizer::FromSerialized
// (SentencePiece's own parser) is the check that the bytes are right.

#ifndef LLAMA_TOKENIZER_SENTENCEPIECE_PROTO_H_
#define LLAMA_TOKENIZER_SENTENCEPIECE_PROTO_H_

#include <string>
#include <vector>

namespace llama {

// ModelProto.SentencePiece.Type; GGUF's token_type uses the same numbers.
enum class SentencePieceType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// A BPE model with identity normalisation: what Llama 2 trained.
struct SentencePieceSpec {
  struct Piece {
    std::string text;  // With the whitespace marker U+2581; "<0x41>" for byte pieces.
    float score = 0;   // BPE merges the pair whose result scores highest.
    SentencePieceType type = SentencePieceType::kNormal;
  };
  std::vector<Piece> pieces;
  // SentencePiece finds these by their pieces' text; -1: none (pad only).
  int unk_id = 0;
  int bos_id = 1;
  int eos_id = 2;
  int pad_id = -1;
  bool byte_fallback = true;              // Unknown characters become byte pieces.
  bool add_dummy_prefix = true;           // A space before the text.
  bool remove_extra_whitespaces = false;  // Llama 2 keeps whitespace runs.
};

// The serialized ModelProto. Ids must index `spec.pieces` (or be -1).
std::string SerializeSentencePieceModel(const SentencePieceSpec& spec);

}  // namespace llama

#endif  // LLAMA_TOKENIZER_SENTENCEPIECE_PROTO_H_
