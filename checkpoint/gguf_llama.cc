#include "checkpoint/gguf_llama.h"

#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace llama {

absl::StatusOr<std::string> GgufTensorName(absl::string_view name) {
  static const std::pair<const char*, const char*> kTop[] = {
      {"tok_embeddings.weight", "token_embd.weight"},
      {"norm.weight", "output_norm.weight"},
      {"output.weight", "output.weight"},
  };
  static const std::pair<const char*, const char*> kLayer[] = {
      {"attention.wq.weight", "attn_q.weight"},      {"attention.wk.weight", "attn_k.weight"},
      {"attention.wv.weight", "attn_v.weight"},      {"attention.wo.weight", "attn_output.weight"},
      {"feed_forward.w1.weight", "ffn_gate.weight"}, {"feed_forward.w2.weight", "ffn_down.weight"},
      {"feed_forward.w3.weight", "ffn_up.weight"},   {"attention_norm.weight", "attn_norm.weight"},
      {"ffn_norm.weight", "ffn_norm.weight"},
  };
  for (const auto& [ours, theirs] : kTop) {
    if (name == ours) return std::string(theirs);
  }
  absl::string_view rest = name;
  if (absl::ConsumePrefix(&rest, "layers.")) {
    const size_t dot = rest.find('.');
    int layer;
    if (dot != absl::string_view::npos && absl::SimpleAtoi(rest.substr(0, dot), &layer)) {
      for (const auto& [ours, theirs] : kLayer) {
        if (rest.substr(dot + 1) == ours) return absl::StrFormat("blk.%d.%s", layer, theirs);
      }
    }
  }
  return absl::InvalidArgumentError(absl::StrFormat("no GGUF name for tensor \"%s\"", name));
}

absl::StatusOr<GgufMetadata> LlamaGgufMetadata(const ModelConfig& config, const Tokenizer& tokenizer,
                                               const std::string& name, DType weights) {
  if (tokenizer.family() != Tokenizer::Family::kSentencePiece) {
    // llama.cpp wants Llama 3's vocabulary as GPT-2-style byte strings plus
    // the merge list ("gpt2" tokenizer model), which we do not write yet.
    return absl::UnimplementedError(
        "GGUF export of Llama 3 (tiktoken) tokenizers is not supported yet; only SentencePiece (Llama 2)");
  }
  if (tokenizer.vocab_size() != config.vocab_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the tokenizer has %d pieces but the model's vocabulary is %d: GGUF needs one entry per embedding row",
        tokenizer.vocab_size(), config.vocab_size));
  }
  // llama.cpp's llama_ftype.
  const uint32_t file_type = weights == DType::kF32   ? 0
                             : weights == DType::kF16 ? 1
                             : weights == DType::kQ8_0 ? 7
                                                       : 32;
  GgufMetadata m;
  m.AddString("general.architecture", "llama");
  m.AddString("general.name", name);
  m.AddU32("general.file_type", file_type);
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

  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (int id = 0; id < tokenizer.vocab_size(); ++id) {
    Tokenizer::Piece piece = tokenizer.GetPiece(id);
    pieces.push_back(std::move(piece.text));
    scores.push_back(piece.score);
    // llama.cpp's llama_token_type: 1 normal, 2 unknown, 3 control, 5 unused, 6 byte.
    switch (piece.kind) {
      case Tokenizer::PieceKind::kNormal:
        types.push_back(1);
        break;
      case Tokenizer::PieceKind::kUnknown:
        types.push_back(2);
        break;
      case Tokenizer::PieceKind::kControl:
        types.push_back(3);
        break;
      case Tokenizer::PieceKind::kUnused:
        types.push_back(5);
        break;
      case Tokenizer::PieceKind::kByte:
        types.push_back(6);
        break;
    }
  }
  m.AddString("tokenizer.ggml.model", "llama");  // SentencePiece.
  m.AddStringArray("tokenizer.ggml.tokens", pieces);
  m.AddF32Array("tokenizer.ggml.scores", scores);
  m.AddI32Array("tokenizer.ggml.token_type", types);
  m.AddU32("tokenizer.ggml.bos_token_id", tokenizer.bos_id());
  m.AddU32("tokenizer.ggml.eos_token_id", tokenizer.eos_id());
  if (tokenizer.unk_id() >= 0) m.AddU32("tokenizer.ggml.unknown_token_id", tokenizer.unk_id());
  // The reference's generate prepends BOS and never appends EOS.
  m.AddBool("tokenizer.ggml.add_bos_token", true);
  m.AddBool("tokenizer.ggml.add_eos_token", false);
  return m;
}

}  // namespace llama
