// Element types of tensors, as checkpoints store them and kernels use them.

#ifndef LLAMA_OPS_DTYPE_H_
#define LLAMA_OPS_DTYPE_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llama {

// Values are stable: they are written into shard indexes (checkpoint/shard.proto).
enum class DType : int {
  kF32 = 1,
  kF16 = 2,
  kBF16 = 3,
  kF64 = 4,
  kI64 = 5,
  kI32 = 6,
  kI16 = 7,
  kI8 = 8,
  kU8 = 9,
  kBool = 10,
  // 8-bit weights in blocks of 32 along a row, each block an f16 scale and
  // 32 int8 values (34 bytes): llama.cpp's Q8_0, byte for byte. Rows must
  // hold a multiple of 32 elements.
  kQ8_0 = 11,
  // 4-bit weights in super-blocks of 256 along a row: llama.cpp's Q4_K byte
  // for byte (144 bytes: f16 d, f16 dmin, 12 bytes of 6-bit sub-block scales
  // and minimums, 128 bytes of nibbles), copied from GGUF files or made by
  // QuantizeQ4_K (ops/quantize.h). Rows must hold a multiple of 256 elements.
  kQ4_K = 12,
  // 6-bit weights in super-blocks of 256: llama.cpp's Q6_K byte for byte
  // (210 bytes: 128 bytes of low nibbles, 64 of 2-bit highs, 16 int8 scales
  // of 16 values each, f16 d last). Only copied from GGUF files (a Q4_K_M
  // file's output and half its attention-value and FFN-down matrices).
  kQ6_K = 13,
};

// Elements per block of kQ8_0, and its bytes.
inline constexpr int64_t kQ8BlockElements = 32;
inline constexpr int64_t kQ8BlockBytes = 2 + kQ8BlockElements;

// Elements per super-block of kQ4_K, and its bytes.
inline constexpr int64_t kQ4KBlockElements = 256;
inline constexpr int64_t kQ4KBlockBytes = 144;

// Elements per super-block of kQ6_K, and its bytes.
inline constexpr int64_t kQ6KBlockElements = 256;
inline constexpr int64_t kQ6KBlockBytes = 210;

// The block types (kQ8_0, kQ4_K, kQ6_K): rows are whole blocks, stored as bytes
// that no element type describes.
bool IsBlockDType(DType dtype);

// Elements per block of a block type; 1 for the others.
int64_t BlockElements(DType dtype);

// Bytes per element; 0 for block types: use TensorBytes.
size_t DTypeSize(DType dtype);

// Bytes of `numel` elements of `dtype` (for block types, numel must be a
// multiple of BlockElements).
uint64_t TensorBytes(DType dtype, int64_t numel);

// Short lower-case name: "f32", "bf16", ...
absl::string_view DTypeName(DType dtype);

// Parses DTypeName's names plus the long spellings users type ("fp32",
// "float16", "bfloat16", ...). Errors quote the value.
absl::StatusOr<DType> ParseDType(absl::string_view name);

// True for values of the enum (checks integers read from files).
bool IsKnownDType(int value);

// f32, f16 or bf16: the types weights, activations and caches are stored in
// (and that CastElements converts between).
bool IsFloat16Or32(DType dtype);

// The value of a flag that takes one of those (in any ParseDType spelling);
// errors name the flag: `--<flag>="<value>": expected f32, bf16 or f16`.
absl::StatusOr<DType> ParseFloat16Or32Flag(absl::string_view flag, absl::string_view value);

// The value of a flag naming a weights' type: those three, int8 (q8_0) or
// q4_k (llama.cpp's Q4_K_M mix of q4_k and q6_k); errors name the flag:
// `--<flag>="<value>": expected bf16, fp16, fp32, int8 or q4_k`.
absl::StatusOr<DType> ParseWeightsDtypeFlag(absl::string_view flag, absl::string_view value);

}  // namespace llama

#endif  // LLAMA_OPS_DTYPE_H_
