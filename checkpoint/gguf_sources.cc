// GGUF files as conversion sources (declared in conversion_sources.h): the
// Llama architecture as llama.cpp writes it (docs/gguf.md's llama.* keys,
// blk.N.* tensor names). llama.cpp's converters put query and key rows back
// into Meta's interleaved rotary order (its "normal" RoPE), so tensors are
// taken as they are; Llama 3.1's scaled RoPE arrives as rope_freqs.weight,
// read back into the config's RopeScaling; a file without output.weight
// ties the output projection to the embedding.
//
// F32, F16 and BF16 tensors are copied as stored. In the linear layers
// Q8_0, Q4_K and Q6_K are our int8, q4_k and q6_k byte for byte (dtype.h)
// and are copied; Q4_0 and Q5_K are decoded row by row (ggml_blocks.h) and
// re-quantized to int8. An embedding in a block type becomes f16. --dtype
// picks another type.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "checkpoint/conversion_sources.h"
#include "checkpoint/gguf_llama.h"
#include "checkpoint/gguf_reader.h"
#include "checkpoint/llama_layout.h"
#include "ops/ggml_blocks.h"

namespace llama {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The file's metadata by key.
class GgufKeys {
 public:
  GgufKeys(const GgufFile& file, std::string source) : source_(std::move(source)) {
    for (const auto& [key, value] : file.metadata()) values_[key] = &value;
  }

  const json* Find(const std::string& key) const {
    const auto it = values_.find(key);
    return it == values_.end() ? nullptr : it->second;
  }
  absl::StatusOr<std::string> String(const std::string& key) const {
    const json* value = Find(key);
    if (value == nullptr || !value->is_string()) return Error(key, value, "a string");
    return value->get<std::string>();
  }
  // A positive count; `fallback` when the key is absent and one is given.
  absl::StatusOr<int64_t> Count(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const {
    const json* value = Find(key);
    if (value == nullptr && fallback.has_value()) return *fallback;
    if (value == nullptr || !value->is_number_integer() || value->get<int64_t>() <= 0) {
      return Error(key, value, "a positive integer");
    }
    return value->get<int64_t>();
  }
  // llama.cpp writes these as f32: a value that is exactly an f32 is read
  // as the shortest decimal that f32 prints as (1e-05, not
  // 9.99999974e-06), what the checkpoint said before it was written.
  absl::StatusOr<double> Number(const std::string& key, double fallback) const {
    const json* value = Find(key);
    if (value == nullptr) return fallback;
    if (!value->is_number() || value->get<double>() <= 0) return Error(key, value, "a positive number");
    const double number = value->get<double>();
    const float narrow = static_cast<float>(number);
    if (static_cast<double>(narrow) != number) return number;
    char text[32];
    const std::to_chars_result printed = std::to_chars(text, text + sizeof text, narrow);
    return std::strtod(std::string(text, printed.ptr).c_str(), nullptr);
  }
  const std::string& source() const { return source_; }

 private:
  absl::Status Error(const std::string& key, const json* value, const char* expected) const {
    return absl::InvalidArgumentError(absl::StrFormat("%s: metadata key \"%s\" is %s; expected %s", source_, key,
                                                      value == nullptr ? "missing" : value->dump(), expected));
  }

  std::string source_;
  std::map<std::string, const json*> values_;
};

// ModelConfig from the llama.* keys (rope scaling comes from the tensors).
absl::StatusOr<ModelConfig> GgufModelConfig(const GgufKeys& keys) {
  ASSIGN_OR_RETURN(const std::string architecture, keys.String("general.architecture"));
  if (architecture != "llama") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: general.architecture is \"%s\"; expected \"llama\" (Llama 2 and 3 as llama.cpp writes them)",
        keys.source(), architecture));
  }
  ModelConfig config;
  ASSIGN_OR_RETURN(config.dim, keys.Count("llama.embedding_length"));
  ASSIGN_OR_RETURN(config.n_layers, keys.Count("llama.block_count"));
  ASSIGN_OR_RETURN(config.n_heads, keys.Count("llama.attention.head_count"));
  ASSIGN_OR_RETURN(config.n_kv_heads, keys.Count("llama.attention.head_count_kv", config.n_heads));
  ASSIGN_OR_RETURN(config.hidden_dim, keys.Count("llama.feed_forward_length"));
  ASSIGN_OR_RETURN(config.norm_eps, keys.Number("llama.attention.layer_norm_rms_epsilon", 1e-5));
  ASSIGN_OR_RETURN(config.rope_theta, keys.Number("llama.rope.freq_base", 10000.0));
  ASSIGN_OR_RETURN(config.max_seq_len, keys.Count("llama.context_length", 0));
  RETURN_IF_ERROR(ValidateModelConfig(config, keys.source()));
  ASSIGN_OR_RETURN(const int64_t rotary_dims, keys.Count("llama.rope.dimension_count", config.head_dim()));
  if (rotary_dims != config.head_dim()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: llama.rope.dimension_count is %d; expected the head size %d (partial rotary is not Llama's)",
        keys.source(), rotary_dims, config.head_dim()));
  }
  if (const json* scaling = keys.Find("llama.rope.scaling.type");
      scaling != nullptr && !(scaling->is_string() && scaling->get<std::string>() == "none")) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: llama.rope.scaling.type is %s; expected none (Llama 3.1's scaling is rope_freqs.weight)",
        keys.source(), scaling->dump()));
  }
  return config;
}

// The RopeScaling whose factors rope_freqs.weight holds: Llama 3.x's rule
// with its factor (the largest frequency divisor) and the published
// low/high frequency factors and original context (the same for 3.1, 3.2
// and 3.3), checked value by value.
absl::StatusOr<RopeScaling> RopeScalingOf(ModelConfig config, const GgufTensorInfo& info,
                                          absl::Span<const uint8_t> bytes, const std::string& source) {
  const int64_t pairs = config.head_dim() / 2;
  if (info.ggml_type != static_cast<uint32_t>(GgmlType::kF32) || info.shape != std::vector<int64_t>{pairs}) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: tensor \"%s\" is %s [%d]; expected F32 [%d]", source,
                                                      info.name, GgmlTypeName(info.ggml_type),
                                                      info.shape.empty() ? 0 : info.shape[0], pairs));
  }
  std::vector<float> stored(pairs);
  std::memcpy(stored.data(), bytes.data(), pairs * sizeof(float));
  RopeScaling scaling;
  scaling.factor = *std::max_element(stored.begin(), stored.end());
  config.rope_scaling = scaling;
  const std::vector<float> expected = GgufRopeFactors(config);
  for (int64_t i = 0; i < pairs; ++i) {
    if (std::abs(stored[i] - expected[i]) > 1e-5f * std::abs(expected[i])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: rope_freqs.weight[%d] is %g; Llama 3.1's scaling with factor %g gives %g (another scaling is not "
          "supported)",
          source, i, stored[i], scaling.factor, expected[i]));
    }
  }
  return scaling;
}

// The part a GGUF tensor gives one of our tensors (`spec`).
absl::StatusOr<SourcePart> GgufPart(const GgufFile& file, const GgufTensorInfo& info, const TensorSpec& spec,
                                    const std::string& source) {
  if (info.shape != spec.shape) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: tensor \"%s\" has shape [%s]; expected [%s] (from the "
                                                      "llama.* metadata)",
                                                      source, info.name, absl::StrJoin(info.shape, ", "),
                                                      absl::StrJoin(spec.shape, ", ")));
  }
  SourcePart part{file.TensorData(info), DType::kF32, info.shape, 0,
                  spec.split_dim() >= 0 ? spec.shape[spec.split_dim()] : 0, {}};
  switch (static_cast<GgmlType>(info.ggml_type)) {
    case GgmlType::kF32:
      return part;
    case GgmlType::kF16:
      part.dtype = DType::kF16;
      return part;
    case GgmlType::kBF16:
      part.dtype = DType::kBF16;
      return part;
    default:
      break;
  }
  if (!IsDecodableGgmlBlockType(info.ggml_type) || info.shape.size() != 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: tensor \"%s\" is %s; expected F32, F16, BF16 or (2-D) Q8_0, Q4_0, Q4_K, Q5_K or Q6_K", source,
        info.name, GgmlTypeName(info.ggml_type)));
  }
  part.ggml_block_type = info.ggml_type;
  // In the linear layers Q4_K and Q6_K stay q4_k and q6_k (a Q4_K_M
  // file's largest matrices are Q6_K) and Q8_0 is our q8_0; the other block
  // types (Q4_0, Q5_K) are decoded and re-quantized to q8_0, 8.5 bits read
  // per weight at decode where f16 reads 16 (each value moves by at most
  // half a q8_0 step of its block). The embedding, a lookup, becomes f16.
  const bool linear = spec.name != "tok_embeddings.weight";
  const GgmlType type = static_cast<GgmlType>(info.ggml_type);
  part.dtype = !linear                   ? DType::kF16
               : type == GgmlType::kQ4_K ? DType::kQ4_K
               : type == GgmlType::kQ6_K ? DType::kQ6_K
                                         : DType::kQ8_0;
  return part;
}

// Every tensor's one part; every tensor in the file must be used.
absl::Status GatherGgufParts(const GgufFile& file, const std::string& source, SourceSet& set) {
  absl::flat_hash_map<std::string, const GgufTensorInfo*> by_name;
  for (const GgufTensorInfo& info : file.tensors()) by_name[info.name] = &info;
  absl::flat_hash_set<std::string> used;
  for (const TensorSpec& spec : LlamaTensors(set.config)) {
    ASSIGN_OR_RETURN(const std::string name, GgufTensorName(spec.name));
    auto it = by_name.find(name);
    if (it == by_name.end() && spec.name == "output.weight") it = by_name.find("token_embd.weight");  // Tied.
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: missing the tensor \"%s\" (our \"%s\")", source, name,
                                                        spec.name));
    }
    ASSIGN_OR_RETURN(SourcePart part, GgufPart(file, *it->second, spec, source));
    set.parts[spec.name].push_back(std::move(part));
    used.insert(it->first);
  }
  if (const auto it = by_name.find(kGgufRopeFactorsName); it != by_name.end()) {
    ASSIGN_OR_RETURN(set.config.rope_scaling,
                     RopeScalingOf(set.config, *it->second, file.TensorData(*it->second), source));
    used.insert(it->first);
  }
  for (const GgufTensorInfo& info : file.tensors()) {
    if (used.contains(info.name)) continue;
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: unexpected tensor \"%s\" (the metadata describes a Llama model of %d layers)", source, info.name,
        set.config.n_layers));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> FindGgufFile(const std::string& ckpt_dir) {
  std::error_code error;
  if (!fs::is_directory(ckpt_dir, error)) {
    return absl::EndsWith(ckpt_dir, ".gguf") && fs::is_regular_file(ckpt_dir, error)
               ? absl::StatusOr<std::string>(ckpt_dir)
               : absl::NotFoundError(absl::StrFormat("\"%s\": neither a folder nor a .gguf file", ckpt_dir));
  }
  std::vector<std::string> found;
  for (const fs::directory_entry& entry : fs::directory_iterator(ckpt_dir, error)) {
    if (entry.path().extension() == ".gguf" && entry.is_regular_file(error)) found.push_back(entry.path().string());
  }
  if (found.size() > 1) {
    std::sort(found.begin(), found.end());
    return absl::InvalidArgumentError(absl::StrFormat(
        "\"%s\" holds %d GGUF files (%s); pass one of them as --ckpt_dir", ckpt_dir, found.size(),
        absl::StrJoin(found, ", ", [](std::string* out, const std::string& p) {
          absl::StrAppend(out, fs::path(p).filename().string());
        })));
  }
  if (found.empty()) return absl::NotFoundError(absl::StrFormat("\"%s\" holds no .gguf file", ckpt_dir));
  return found[0];
}

absl::StatusOr<SourceSet> OpenGgufCheckpoint(const std::string& path) {
  SourceSet set;
  ASSIGN_OR_RETURN(set.gguf, GgufFile::Open(path));
  const fs::path file(path);
  ASSIGN_OR_RETURN(shard::SourceFile record,
                   DescribeSourceFile(file.parent_path().empty() ? "." : file.parent_path().string(),
                                      file.filename().string()));
  set.records.push_back(std::move(record));
  const GgufKeys keys(*set.gguf, path);
  ASSIGN_OR_RETURN(set.config, GgufModelConfig(keys));
  const GgufTensorInfo* embedding = nullptr;
  for (const GgufTensorInfo& info : set.gguf->tensors()) {
    if (info.name == "token_embd.weight") embedding = &info;
  }
  if (embedding == nullptr || embedding->shape.size() != 2) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: no 2-D tensor \"token_embd.weight\"", path));
  }
  ASSIGN_OR_RETURN(set.config.vocab_size, keys.Count("llama.vocab_size", embedding->shape[0]));
  RETURN_IF_ERROR(GatherGgufParts(*set.gguf, path, set));
  return set;
}

}  // namespace llama
