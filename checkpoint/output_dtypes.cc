#include "checkpoint/output_dtypes.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "checkpoint/llama_layout.h"
#include "checkpoint/q4_k_mix.h"

namespace llama {

namespace {

// Tensors stored in a block type whose slice on some rank is not whole
// blocks.
absl::flat_hash_set<std::string> SplitMidBlock(const SourceSet& sources, int world_size) {
  absl::flat_hash_set<std::string> split;
  for (const TensorSpec& spec : LlamaTensors(sources.config)) {
    const DType stored = sources.parts.at(spec.name)[0].dtype;
    for (int rank = 0; rank < world_size && IsBlockDType(stored); ++rank) {
      if (RankShape(spec, sources.config, rank, world_size).back() % BlockElements(stored) != 0) {
        split.insert(spec.name);
      }
    }
  }
  return split;
}

}  // namespace

absl::StatusOr<OutputDType> ChooseOutputDTypes(std::optional<DType> dtype, int world_size, SourceSet& sources) {
  // --dtype=q4_k on a file llama-quantize made keeps its K-quant types as
  // they are; on any other checkpoint it quantizes the linear layers to
  // llama.cpp's Q4_K_M mix of q4_k and q6_k (q4_k_mix.h).
  bool holds_q4k = false;
  for (const auto& [name, parts] : sources.parts) holds_q4k = holds_q4k || parts[0].dtype == DType::kQ4_K;
  const bool quantize_q4k = dtype == DType::kQ4_K && !holds_q4k;
  const absl::flat_hash_set<std::string> decoded = dtype.has_value() ? absl::flat_hash_set<std::string>()
                                                                     : SplitMidBlock(sources, world_size);
  return OutputDType([dtype, decoded, quantize_q4k, &sources](const std::string& name) {
    const DType stored = sources.parts[name][0].dtype;
    if (decoded.contains(name)) return DType::kF16;
    const bool linear = name != "tok_embeddings.weight" && sources.parts[name][0].shape.size() == 2;
    if (dtype == DType::kQ8_0) return linear ? DType::kQ8_0 : stored;
    if (quantize_q4k) return linear ? Q4KMixDType(name, sources.config) : stored;
    return dtype == DType::kQ4_K ? stored : dtype.value_or(stored);
  });
}

absl::Status CheckWholeBlocks(std::optional<DType> requested, DType dtype, const std::string& name,
                              const std::vector<int64_t>& shape, int world_size) {
  if (!IsBlockDType(dtype) || shape.back() % BlockElements(dtype) == 0) return absl::OkStatus();
  const auto flag_name = [](DType d) { return d == DType::kQ8_0 ? std::string("int8") : std::string(DTypeName(d)); };
  const std::string type = flag_name(dtype);
  // Without --dtype the type is the source's, kept.
  const std::string asked = requested.has_value() ? "--dtype=" + flag_name(*requested) + ": " : "";
  const std::string written = !requested.has_value()             ? " (kept " + type + ")"
                              : flag_name(*requested) != type ? " (written " + type + ")"
                                                              : "";
  return absl::InvalidArgumentError(absl::StrFormat(
      "%stensor \"%s\"%s has rows of %d values on each of %d ranks; %s blocks need a multiple of %d "
      "(use fewer ranks, or bf16)",
      asked, name, written, shape.back(), world_size, type, BlockElements(dtype)));
}

}  // namespace llama
