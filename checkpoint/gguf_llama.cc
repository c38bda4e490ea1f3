#include "checkpoint/gguf_llama.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "checkpoint/llama_layout.h"
#include "ops/rope_table.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/chat_template.h"

namespace llama {

absl::StatusOr<std::string> GgufTensorName(absl::string_view name) {
  std::optional<std::string> gguf = RenameTensor(name, TensorNaming::kMeta, TensorNaming::kGguf);
  if (!gguf.has_value()) return absl::InvalidArgumentError(absl::StrFormat("no GGUF name for tensor \"%s\"", name));
  return *std::move(gguf);
}

namespace {

// Llama 3's vocabulary as llama.cpp's "gpt2" tokenizer with its Llama 3
// pre-tokenizer ("llama-bpe"), as llama.cpp's own converter writes it.
absl::Status AddBpeVocabulary(const Tokenizer& tokenizer, GgufMetadata& m) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  const int specials_from = tokenizer.bos_id();  // The specials follow the base tokens.
  for (int id = 0; id < tokenizer.vocab_size(); ++id) {
    const bool special = id >= specials_from;
    tokens.push_back(special ? std::string(tokenizer.TokenBytes(id)) : ByteLevelText(tokenizer.TokenBytes(id)));
    types.push_back(special ? 3 : 1);  // llama_token_type: control, normal.
    if (special || tokenizer.TokenBytes(id).size() < 2) continue;
    ASSIGN_OR_RETURN(const auto merge, tokenizer.BpeMerge(id));  // A pair of ids.
    merges.push_back(absl::StrCat(ByteLevelText(tokenizer.TokenBytes(merge.first)), " ",
                                  ByteLevelText(tokenizer.TokenBytes(merge.second))));
  }
  m.AddString("tokenizer.ggml.model", "gpt2");
  m.AddString("tokenizer.ggml.pre", "llama-bpe");
  m.AddStringArray("tokenizer.ggml.tokens", tokens);
  m.AddI32Array("tokenizer.ggml.token_type", types);
  m.AddStringArray("tokenizer.ggml.merges", merges);
  m.AddU32("tokenizer.ggml.eot_token_id", tokenizer.SpecialId("<|eot_id|>"));
  return absl::OkStatus();
}

// llama.cpp's llama_token_type of a SentencePiece piece.
int32_t GgufTokenType(Tokenizer::PieceKind kind) {
  switch (kind) {
    case Tokenizer::PieceKind::kNormal:
      return 1;
    case Tokenizer::PieceKind::kUnknown:
      return 2;
    case Tokenizer::PieceKind::kControl:
      return 3;
    case Tokenizer::PieceKind::kUnused:
      return 5;
    case Tokenizer::PieceKind::kByte:
      return 6;
  }
  return 1;
}

// A SentencePiece vocabulary as llama.cpp's "llama" tokenizer.
void AddSentencePieceVocabulary(const Tokenizer& tokenizer, GgufMetadata& m) {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (int id = 0; id < tokenizer.vocab_size(); ++id) {
    Tokenizer::Piece piece = tokenizer.GetPiece(id);
    pieces.push_back(std::move(piece.text));
    scores.push_back(piece.score);
    types.push_back(GgufTokenType(piece.kind));
  }
  m.AddString("tokenizer.ggml.model", "llama");
  m.AddStringArray("tokenizer.ggml.tokens", pieces);
  m.AddF32Array("tokenizer.ggml.scores", scores);
  m.AddI32Array("tokenizer.ggml.token_type", types);
  if (tokenizer.unk_id() >= 0) m.AddU32("tokenizer.ggml.unknown_token_id", tokenizer.unk_id());
}

// llama.cpp's llama_ftype for weights of type `weights`.
absl::StatusOr<uint32_t> GgufFileType(DType weights) {
  switch (weights) {
    case DType::kF32:
      return 0;
    case DType::kF16:
      return 1;
    case DType::kQ8_0:
      return 7;
    case DType::kQ4_K:
      return 15;  // LLAMA_FTYPE_MOSTLY_Q4_K_M: the preset q4_k comes from.
    case DType::kQ6_K:
      return 18;  // LLAMA_FTYPE_MOSTLY_Q6_K.
    case DType::kBF16:
      return 32;
    default:
      return absl::InvalidArgumentError(
          absl::StrFormat("GGUF weights must be f32, f16, bf16, q8_0, q4_k or q6_k, not %s", DTypeName(weights)));
  }
}

}  // namespace

std::vector<float> GgufRopeFactors(const ModelConfig& config) {
  if (!config.rope_scaling.has_value()) return {};
  const std::vector<float> plain = RopeFrequencies(config.head_dim(), config.rope_theta, std::nullopt);
  const std::vector<float> scaled = RopeFrequencies(config.head_dim(), config.rope_theta, config.rope_scaling);
  std::vector<float> factors(plain.size());
  for (size_t i = 0; i < plain.size(); ++i) factors[i] = plain[i] / scaled[i];
  return factors;
}

absl::StatusOr<GgufMetadata> LlamaGgufMetadata(const ModelConfig& config, const Tokenizer& tokenizer,
                                               const std::string& name, DType weights) {
  if (tokenizer.vocab_size() != config.vocab_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the tokenizer has %d pieces but the model's vocabulary is %d: GGUF needs one entry per embedding row",
        tokenizer.vocab_size(), config.vocab_size));
  }
  ASSIGN_OR_RETURN(const uint32_t file_type, GgufFileType(weights));
  GgufMetadata m;
  m.AddString("general.architecture", "llama");
  m.AddString("general.name", name);
  m.AddU32("general.file_type", file_type);
  // ggml's quantization format version (GGML_QNT_VERSION), which our q8_0
  // blocks follow; llama.cpp's converters write it.
  m.AddU32("general.quantization_version", 2);
  m.AddU32("general.alignment", kGgufAlignment);
  // Llama 2 was trained on 4096 positions; Meta's params.json does not say.
  m.AddU32("llama.context_length", config.max_seq_len > 0 ? config.max_seq_len : 4096);
  m.AddU32("llama.embedding_length", config.dim);
  m.AddU32("llama.block_count", config.n_layers);
  m.AddU32("llama.feed_forward_length", config.ffn_hidden_dim());
  m.AddU32("llama.rope.dimension_count", config.head_dim());
  m.AddU32("llama.attention.head_count", config.n_heads);
  m.AddU32("llama.attention.head_count_kv", config.n_kv_heads);
  m.AddF32("llama.attention.layer_norm_rms_epsilon", config.norm_eps);
  m.AddF32("llama.rope.freq_base", config.rope_theta);
  m.AddU32("llama.vocab_size", config.vocab_size);

  if (tokenizer.family() == Tokenizer::Family::kTiktoken) {
    RETURN_IF_ERROR(AddBpeVocabulary(tokenizer, m));
  } else {
    AddSentencePieceVocabulary(tokenizer, m);
  }
  m.AddU32("tokenizer.ggml.bos_token_id", tokenizer.bos_id());
  m.AddU32("tokenizer.ggml.eos_token_id", tokenizer.eos_id());
  // The reference's generate prepends BOS and never appends EOS.
  m.AddBool("tokenizer.ggml.add_bos_token", true);
  m.AddBool("tokenizer.ggml.add_eos_token", false);
  // llama-server picks its chat format from the template (or renders it, with --jinja).
  m.AddString("tokenizer.chat_template",
              std::string(StandardChatTemplate(tokenizer.family() == Tokenizer::Family::kTiktoken
                                                   ? ChatTemplateKind::kLlama3
                                                   : ChatTemplateKind::kLlama2)));
  return m;
}

}  // namespace llama
