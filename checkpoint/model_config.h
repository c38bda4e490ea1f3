// Llama 2's and 3's hyper-parameters, as Meta's params.json gives them, and the
// sizes derived from them (computed here and nowhere else).
//
//   7B:  {"dim": 4096, "multiple_of": 256, "n_heads": 32, "n_layers": 32,
//         "norm_eps": 1e-05, "vocab_size": -1}
//   70B: {"dim": 8192, "multiple_of": 4096, "ffn_dim_multiplier": 1.3,
//         "n_heads": 64, "n_kv_heads": 8, "n_layers": 80, "norm_eps": 1e-05,
//         "vocab_size": -1}
//   Llama 3.1 8B: {"dim": 4096, "ffn_dim_multiplier": 1.3, "multiple_of": 1024,
//         "n_heads": 32, "n_kv_heads": 8, "n_layers": 32, "norm_eps": 1e-05,
//         "rope_theta": 500000.0, "use_scaled_rope": true, "vocab_size": 128256}
//
// vocab_size -1 means "take it from the tokenizer" (the reference does);
// the converter fills it in from the embedding's shape.

#ifndef LLAMA_CHECKPOINT_MODEL_CONFIG_H_
#define LLAMA_CHECKPOINT_MODEL_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ops/rope_scaling.h"

namespace llama {

struct ModelConfig {
  int64_t dim = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;   // params.json may omit it: then n_heads.
  int64_t vocab_size = -1;  // -1: unknown until the tokenizer or weights say.
  int64_t multiple_of = 256;
  std::optional<double> ffn_dim_multiplier;
  // The FFN width given outright (Hugging Face's intermediate_size); when
  // set it is the width, and multiple_of / ffn_dim_multiplier are unused.
  std::optional<int64_t> hidden_dim;
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
  // Llama 3.1 and later (params.json's use_scaled_rope, with the optional
  // rope_scaling_factor and rope_high_freq_factor of later llama-models).
  std::optional<RopeScaling> rope_scaling;
  int64_t max_seq_len = 0;  // 0: not given.

  int64_t head_dim() const { return dim / n_heads; }
  // The model's own context: max_seq_len when the config gives it (Hugging
  // Face's max_position_embeddings); else what Meta trained, told apart as
  // params.json allows: Llama 3.1 and later scale RoPE (131072), Llama 3's
  // rope_theta is 500000 (8192), Llama 2's the reference's 10000 (4096).
  int64_t context_length() const;
  // hidden_dim when given, else the reference's FeedForward rule: 2/3 of
  // 4*dim, times the multiplier, rounded up to a multiple of multiple_of.
  int64_t ffn_hidden_dim() const;
};

// A model of this shape with the reference's other defaults, as tests and
// synthetic models build one.
ModelConfig ModelShape(int64_t dim, int64_t n_layers, int64_t n_heads, int64_t n_kv_heads, int64_t vocab_size,
                       int64_t multiple_of = 256);

// Parses params.json text; `source` (its path) prefixes errors, which name
// the field and what was expected. Unknown fields are ignored, as the
// reference's ModelArgs(**params) would not (it raises); we only warn.
absl::StatusOr<ModelConfig> ParseParamsJson(absl::string_view text, absl::string_view source);
absl::StatusOr<ModelConfig> ReadParamsJson(const std::string& path);

// A Hugging Face config.json of a Llama model (LlamaForCausalLM).
struct HfModelConfig {
  ModelConfig model;
  // No lm_head.weight: the output projection is the embedding matrix.
  bool tie_word_embeddings = false;
};

// Parses config.json text: hidden_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, intermediate_size, vocab_size,
// rms_norm_eps, rope_theta, max_position_embeddings (as max_seq_len),
// tie_word_embeddings. What our model cannot run
// is refused naming the field: another model_type or hidden_act, biases,
// rope_scaling other than Llama 3's ("rope_type": "llama3"), a head_dim other than
// hidden_size / num_attention_heads.
absl::StatusOr<HfModelConfig> ParseHfConfigJson(absl::string_view text, absl::string_view source);
absl::StatusOr<HfModelConfig> ReadHfConfigJson(const std::string& path);

// Checks that the sizes fit together (dim divisible by n_heads, n_heads by
// n_kv_heads, everything positive).
absl::Status ValidateModelConfig(const ModelConfig& config, absl::string_view source);

// Checks that the model can be split `world_size` ways as fairscale does:
// heads, FFN hidden size, embedding dim and vocabulary divisible, and KV
// heads either divisible or, when world_size exceeds them, replicable.
absl::Status CheckWorldSize(const ModelConfig& config, int world_size);

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_MODEL_CONFIG_H_
