#include "checkpoint/model_config.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include <glog/logging.h>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "base/durable_file.h"
#include "base/status_macros.h"

namespace llama {
namespace {

using json = nlohmann::json;

absl::Status FieldError(absl::string_view source, absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrFormat("%s: field \"%s\": %s", source, field, what));
}

// Reads an integer field; JSON numbers like 4096.0 are accepted if integral.
absl::Status ReadInt(const json& params, absl::string_view source, const char* field, bool required,
                     int64_t* out) {
  auto it = params.find(field);
  if (it == params.end() || it->is_null()) {
    return required ? FieldError(source, field, "missing; expected an integer") : absl::OkStatus();
  }
  if (it->is_number_integer()) {
    *out = it->get<int64_t>();
  } else if (it->is_number_float() && std::floor(it->get<double>()) == it->get<double>()) {
    *out = static_cast<int64_t>(it->get<double>());
  } else {
    return FieldError(source, field, absl::StrFormat("is %s; expected an integer", it->dump()));
  }
  return absl::OkStatus();
}

absl::Status ReadDouble(const json& params, absl::string_view source, const char* field,
                        std::optional<double>* out) {
  auto it = params.find(field);
  if (it == params.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) {
    return FieldError(source, field, absl::StrFormat("is %s; expected a number", it->dump()));
  }
  *out = it->get<double>();
  return absl::OkStatus();
}

}  // namespace

int64_t ModelConfig::context_length() const {
  if (max_seq_len > 0) return max_seq_len;
  if (rope_scaling.has_value()) return 131072;
  return rope_theta >= 500000 ? 8192 : 4096;
}

ModelConfig ModelShape(int64_t dim, int64_t n_layers, int64_t n_heads, int64_t n_kv_heads, int64_t vocab_size,
                       int64_t multiple_of) {
  ModelConfig config;
  config.dim = dim;
  config.n_layers = n_layers;
  config.n_heads = n_heads;
  config.n_kv_heads = n_kv_heads;
  config.vocab_size = vocab_size;
  config.multiple_of = multiple_of;
  return config;
}

int64_t ModelConfig::ffn_hidden_dim() const {
  if (hidden_dim.has_value()) return *hidden_dim;
  int64_t hidden = 4 * dim;
  hidden = static_cast<int64_t>(2 * hidden / 3);
  if (ffn_dim_multiplier.has_value()) {
    hidden = static_cast<int64_t>(*ffn_dim_multiplier * static_cast<double>(hidden));
  }
  return multiple_of * ((hidden + multiple_of - 1) / multiple_of);
}

absl::StatusOr<ModelConfig> ParseParamsJson(absl::string_view text, absl::string_view source) {
  json params;
  try {
    params = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& error) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: invalid JSON: %s", source, error.what()));
  }
  if (!params.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: expected a JSON object of model parameters", source));
  }
  ModelConfig config;
  for (const auto& [field, out, required] : {
           std::tuple<const char*, int64_t*, bool>{"dim", &config.dim, true},
           {"n_layers", &config.n_layers, true},
           {"n_heads", &config.n_heads, true},
           {"n_kv_heads", &config.n_kv_heads, false},
           {"vocab_size", &config.vocab_size, false},
           {"multiple_of", &config.multiple_of, false},
           {"max_seq_len", &config.max_seq_len, false},
       }) {
    RETURN_IF_ERROR(ReadInt(params, source, field, required, out));
  }
  if (config.n_kv_heads == 0) config.n_kv_heads = config.n_heads;
  std::optional<double> norm_eps, rope_theta;
  for (const auto& [field, out] : {std::pair<const char*, std::optional<double>*>{"norm_eps", &norm_eps},
                                   {"rope_theta", &rope_theta},
                                   {"ffn_dim_multiplier", &config.ffn_dim_multiplier}}) {
    RETURN_IF_ERROR(ReadDouble(params, source, field, out));
  }
  if (norm_eps.has_value()) config.norm_eps = *norm_eps;
  if (rope_theta.has_value()) config.rope_theta = *rope_theta;
  if (auto it = params.find("use_scaled_rope"); it != params.end() && !it->is_null()) {
    if (!it->is_boolean()) return FieldError(source, "use_scaled_rope", absl::StrFormat("is %s; expected true or false", it->dump()));
    if (it->get<bool>()) {
      RopeScaling scaling;
      std::optional<double> factor, high_freq_factor;
      RETURN_IF_ERROR(ReadDouble(params, source, "rope_scaling_factor", &factor));
      RETURN_IF_ERROR(ReadDouble(params, source, "rope_high_freq_factor", &high_freq_factor));
      if (factor.has_value()) scaling.factor = *factor;
      if (high_freq_factor.has_value()) scaling.high_freq_factor = *high_freq_factor;
      config.rope_scaling = scaling;
    }
  }
  for (const auto& [key, value] : params.items()) {
    static constexpr const char* kKnown[] = {"dim",        "n_layers",   "n_heads",
                                             "n_kv_heads", "vocab_size", "multiple_of",
                                             "max_seq_len", "norm_eps",  "rope_theta",
                                             "ffn_dim_multiplier", "max_batch_size", "use_scaled_rope",
                                             "rope_scaling_factor", "rope_high_freq_factor"};
    if (std::find(std::begin(kKnown), std::end(kKnown), key) == std::end(kKnown)) {
      LOG(WARNING) << source << ": ignoring unknown field \"" << key << "\"";
    }
  }
  RETURN_IF_ERROR(ValidateModelConfig(config, source));
  return config;
}

absl::StatusOr<ModelConfig> ReadParamsJson(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path));
  return ParseParamsJson(text, path);
}

absl::StatusOr<HfModelConfig> ParseHfConfigJson(absl::string_view text, absl::string_view source) {
  const json config = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: expected a JSON object (Hugging Face's config.json)", source));
  }
  const auto string_field = [&](const char* field, absl::string_view expected) -> absl::Status {
    auto it = config.find(field);
    if (it == config.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_string() || it->get<std::string>() != expected) {
      return FieldError(source, field,
                        absl::StrFormat("is %s; expected \"%s\" (a Llama model)", it->dump(), expected));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(string_field("model_type", "llama"));
  RETURN_IF_ERROR(string_field("hidden_act", "silu"));
  for (const char* field : {"attention_bias", "mlp_bias"}) {
    if (auto it = config.find(field); it != config.end() && !(it->is_boolean() && !it->get<bool>())) {
      return FieldError(source, field, absl::StrFormat("is %s; Llama has no biases (expected false)", it->dump()));
    }
  }
  HfModelConfig hf;
  ModelConfig& c = hf.model;
  if (auto it = config.find("rope_scaling"); it != config.end() && !it->is_null()) {
    // Llama 3.1's scaling, as transformers names it; other kinds (linear,
    // dynamic, yarn) belong to other models.
    const auto type = it->is_object() ? it->find("rope_type") : it->end();
    if (type == it->end() || *type != "llama3") {
      return absl::UnimplementedError(absl::StrFormat(
          "%s: field \"rope_scaling\": %s: only Llama 3's scaling (\"rope_type\": \"llama3\") is supported", source,
          it->dump()));
    }
    RopeScaling scaling;
    for (const auto& [field, out] : {std::pair<const char*, double*>{"factor", &scaling.factor},
                                     {"low_freq_factor", &scaling.low_freq_factor},
                                     {"high_freq_factor", &scaling.high_freq_factor},
                                     {"original_max_position_embeddings", &scaling.original_context}}) {
      std::optional<double> value;
      RETURN_IF_ERROR(ReadDouble(*it, source, field, &value));
      if (value.has_value()) *out = *value;
    }
    c.rope_scaling = scaling;
  }
  int64_t hidden_dim = 0;
  for (const auto& [field, out, required] : {
           std::tuple<const char*, int64_t*, bool>{"hidden_size", &c.dim, true},
           {"num_hidden_layers", &c.n_layers, true},
           {"num_attention_heads", &c.n_heads, true},
           {"num_key_value_heads", &c.n_kv_heads, false},
           {"intermediate_size", &hidden_dim, true},
           {"vocab_size", &c.vocab_size, true},
           {"max_position_embeddings", &c.max_seq_len, false},
       }) {
    RETURN_IF_ERROR(ReadInt(config, source, field, required, out));
  }
  if (c.n_kv_heads == 0) c.n_kv_heads = c.n_heads;
  c.hidden_dim = hidden_dim;
  if (int64_t head_dim = 0; config.contains("head_dim")) {
    RETURN_IF_ERROR(ReadInt(config, source, "head_dim", false, &head_dim));
    if (c.n_heads > 0 && head_dim != c.dim / c.n_heads) {
      return FieldError(source, "head_dim",
                        absl::StrFormat("is %d; expected hidden_size / num_attention_heads = %d", head_dim,
                                        c.dim / c.n_heads));
    }
  }
  std::optional<double> norm_eps, rope_theta;
  RETURN_IF_ERROR(ReadDouble(config, source, "rms_norm_eps", &norm_eps));
  RETURN_IF_ERROR(ReadDouble(config, source, "rope_theta", &rope_theta));
  if (norm_eps.has_value()) c.norm_eps = *norm_eps;
  if (rope_theta.has_value()) c.rope_theta = *rope_theta;
  if (auto it = config.find("tie_word_embeddings"); it != config.end() && !it->is_null()) {
    if (!it->is_boolean()) return FieldError(source, "tie_word_embeddings", absl::StrFormat("is %s; expected true or false", it->dump()));
    hf.tie_word_embeddings = it->get<bool>();
  }
  RETURN_IF_ERROR(ValidateModelConfig(c, source));
  return hf;
}

absl::StatusOr<HfModelConfig> ReadHfConfigJson(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path));
  return ParseHfConfigJson(text, path);
}

absl::Status ValidateModelConfig(const ModelConfig& c, absl::string_view source) {
  for (const auto& [field, value] : {std::pair<const char*, int64_t>{"dim", c.dim},
                                     {"n_layers", c.n_layers},
                                     {"n_heads", c.n_heads},
                                     {"n_kv_heads", c.n_kv_heads},
                                     {"multiple_of", c.multiple_of}}) {
    if (value <= 0 || value > (int64_t{1} << 20)) {
      return FieldError(source, field, absl::StrFormat("is %d; expected 1..%d", value, 1 << 20));
    }
  }
  if (c.vocab_size != -1 && (c.vocab_size <= 0 || c.vocab_size > (int64_t{1} << 24))) {
    return FieldError(source, "vocab_size", absl::StrFormat("is %d; expected -1 or 1..%d", c.vocab_size, 1 << 24));
  }
  if (c.max_seq_len < 0) return FieldError(source, "max_seq_len", "is negative");
  if (c.dim % c.n_heads != 0) {
    return FieldError(source, "n_heads",
                      absl::StrFormat("%d does not divide dim %d", c.n_heads, c.dim));
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    return FieldError(source, "n_kv_heads",
                      absl::StrFormat("%d does not divide n_heads %d", c.n_kv_heads, c.n_heads));
  }
  if (c.head_dim() % 2 != 0) {
    return FieldError(source, "n_heads",
                      absl::StrFormat("head dim %d is odd; rotary embeddings need it even", c.head_dim()));
  }
  if (!(c.norm_eps > 0) || !std::isfinite(c.norm_eps)) {
    return FieldError(source, "norm_eps", absl::StrFormat("is %g; expected > 0", c.norm_eps));
  }
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta)) {
    return FieldError(source, "rope_theta", absl::StrFormat("is %g; expected > 0", c.rope_theta));
  }
  if (c.ffn_dim_multiplier.has_value() && !(*c.ffn_dim_multiplier > 0)) {
    return FieldError(source, "ffn_dim_multiplier", absl::StrFormat("is %g; expected > 0", *c.ffn_dim_multiplier));
  }
  if (c.rope_scaling.has_value()) {
    const RopeScaling& r = *c.rope_scaling;
    if (!(r.factor >= 1) || !std::isfinite(r.factor)) {
      return FieldError(source, "rope_scaling_factor", absl::StrFormat("is %g; expected >= 1", r.factor));
    }
    if (!(r.high_freq_factor > r.low_freq_factor) || !std::isfinite(r.high_freq_factor)) {
      return FieldError(source, "rope_high_freq_factor",
                        absl::StrFormat("is %g; expected more than the low-frequency factor %g", r.high_freq_factor,
                                        r.low_freq_factor));
    }
  }
  if (c.hidden_dim.has_value() && (*c.hidden_dim <= 0 || *c.hidden_dim > (int64_t{1} << 22))) {
    return FieldError(source, "hidden_dim", absl::StrFormat("is %d; expected 1..%d", *c.hidden_dim, 1 << 22));
  }
  return absl::OkStatus();
}

absl::Status CheckWorldSize(const ModelConfig& c, int world_size) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("world size %d: expected at least 1", world_size));
  }
  const auto fail = [&](absl::string_view what, int64_t value) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "world size %d does not divide %s (%d); the model cannot be split that way", world_size, what,
        value));
  };
  if (c.n_heads % world_size != 0) return fail("n_heads", c.n_heads);
  if (c.dim % world_size != 0) return fail("dim", c.dim);
  if (c.ffn_hidden_dim() % world_size != 0) return fail("the FFN hidden size", c.ffn_hidden_dim());
  if (c.vocab_size > 0 && c.vocab_size % world_size != 0) return fail("vocab_size", c.vocab_size);
  if (c.n_kv_heads % world_size != 0 && world_size % c.n_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "world size %d and n_kv_heads %d: one must divide the other (KV heads are split, or "
        "replicated when ranks outnumber them)",
        world_size, c.n_kv_heads));
  }
  return absl::OkStatus();
}

}  // namespace llama
