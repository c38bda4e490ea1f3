#include "checkpoint/output_dtypes.h"

#include "absl/strings/str_format.h"

namespace llama {

absl::StatusOr<OutputDType> ChooseOutputDTypes(std::optional<DType> dtype, const std::string& ckpt_dir,
                                               SourceSet& sources) {
  if (dtype == DType::kQ4_K) {
    bool holds_q4k = false;
    for (const auto& [name, parts] : sources.parts) holds_q4k = holds_q4k || parts[0].dtype == DType::kQ4_K;
    if (!holds_q4k) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--dtype=q4_k: \"%s\" holds no Q4_K tensor; q4_k comes from a GGUF file made by llama-quantize "
          "(Q4_K_M, Q4_K_S); quantizing is not implemented (use --dtype=int8)",
          ckpt_dir));
    }
  }
  return OutputDType([dtype, &sources](const std::string& name) {
    const DType stored = sources.parts[name][0].dtype;
    if (dtype == DType::kQ8_0) {
      return name != "tok_embeddings.weight" && sources.parts[name][0].shape.size() == 2 ? DType::kQ8_0 : stored;
    }
    return dtype == DType::kQ4_K ? stored : dtype.value_or(stored);
  });
}

absl::Status CheckWholeBlocks(DType dtype, const std::string& name, const std::vector<int64_t>& shape,
                              int world_size) {
  if (!IsBlockDType(dtype) || shape.back() % BlockElements(dtype) == 0) return absl::OkStatus();
  const char* type = dtype == DType::kQ8_0 ? "int8" : DTypeName(dtype).data();
  return absl::InvalidArgumentError(absl::StrFormat(
      "--dtype=%s: tensor \"%s\" has rows of %d values on each of %d ranks; %s blocks need a multiple of %d "
      "(use fewer ranks, or bf16)",
      type, name, shape.back(), world_size, type, BlockElements(dtype)));
}

}  // namespace llama
