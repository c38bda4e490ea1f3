// The dtype each tensor of a conversion is written in: --dtype applied to
// what the sources store, and the checks that it can be.

#ifndef LLAMA_CHECKPOINT_OUTPUT_DTYPES_H_
#define LLAMA_CHECKPOINT_OUTPUT_DTYPES_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/conversion_sources.h"
#include "ops/dtype.h"

namespace llama {

// The output type of each tensor, by name.
using OutputDType = std::function<DType(const std::string&)>;

// For --dtype `dtype` (unset: as stored). int8 (q8_0) is for the linear
// layers' weights: the embedding is a lookup (kept as stored) and norms are
// vectors. q4_k of a GGUF that holds Q4_K keeps its types, as by default;
// of other sources it quantizes the linear layers to q4_k and q6_k as
// llama.cpp's Q4_K_M does (q4_k_mix.h: q6_k for the output projection and
// some layers' value and down projections). By
// default (no --dtype), a GGUF block tensor whose rank slices at
// `world_size` are not whole blocks is written f16 instead (a small model's
// 256-wide rows split in two), so that any world size the model allows
// converts; asked for by --dtype, CheckWholeBlocks refuses it. The result
// reads `sources`, which must outlive it.
absl::StatusOr<OutputDType> ChooseOutputDTypes(std::optional<DType> dtype, int world_size, SourceSet& sources);

// A block type's rows (the last dim of `shape`, one rank's slice of tensor
// `name` at `world_size` ranks) must be whole blocks: else an error naming
// the --dtype asked for (`requested`, if any), the tensor, its type `dtype`
// where that differs (q6_k in a q4_k mix; the source's, kept, without
// --dtype) and the world size.
absl::Status CheckWholeBlocks(std::optional<DType> requested, DType dtype, const std::string& name,
                              const std::vector<int64_t>& shape, int world_size);

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_OUTPUT_DTYPES_H_
