#include "ops/dtype.h"

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "base/named_values.h"

namespace llama {
namespace {

// Each dtype's short name (DTypeName) first, then the long spellings users
// type.
constexpr NamedValues<DType, 19> kDTypeNames({
    {"f32", DType::kF32},   {"fp32", DType::kF32},      {"float32", DType::kF32},
    {"f16", DType::kF16},   {"fp16", DType::kF16},      {"float16", DType::kF16},
    {"bf16", DType::kBF16}, {"bfloat16", DType::kBF16}, {"f64", DType::kF64},
    {"i64", DType::kI64},   {"i32", DType::kI32},       {"i16", DType::kI16},
    {"i8", DType::kI8},     {"u8", DType::kU8},         {"bool", DType::kBool},
    {"q8_0", DType::kQ8_0}, {"int8", DType::kQ8_0},     {"q4_k", DType::kQ4_K},
    {"q6_k", DType::kQ6_K},
});

}  // namespace

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
    case DType::kI16:
      return 2;
    case DType::kI8:
    case DType::kU8:
    case DType::kBool:
      return 1;
    case DType::kQ8_0:
    case DType::kQ4_K:
    case DType::kQ6_K:
      return 0;
  }
  return 0;
}

bool IsBlockDType(DType dtype) { return dtype == DType::kQ8_0 || dtype == DType::kQ4_K || dtype == DType::kQ6_K; }

int64_t BlockElements(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0:
      return kQ8BlockElements;
    case DType::kQ4_K:
      return kQ4KBlockElements;
    case DType::kQ6_K:
      return kQ6KBlockElements;
    default:
      return 1;
  }
}

uint64_t TensorBytes(DType dtype, int64_t numel) {
  switch (dtype) {
    case DType::kQ8_0:
      return static_cast<uint64_t>(numel / kQ8BlockElements) * kQ8BlockBytes;
    case DType::kQ4_K:
      return static_cast<uint64_t>(numel / kQ4KBlockElements) * kQ4KBlockBytes;
    case DType::kQ6_K:
      return static_cast<uint64_t>(numel / kQ6KBlockElements) * kQ6KBlockBytes;
    default:
      return static_cast<uint64_t>(numel) * DTypeSize(dtype);
  }
}

absl::string_view DTypeName(DType dtype) { return kDTypeNames.Name(dtype); }

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  if (const std::optional<DType> dtype = kDTypeNames.Find(name)) return *dtype;
  return absl::InvalidArgumentError(
      absl::StrFormat("dtype \"%s\": expected one of bf16, fp16, fp32, int8, q4_k, q6_k", name));
}

bool IsKnownDType(int value) { return value >= 1 && value <= 13; }

bool IsFloat16Or32(DType dtype) { return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16; }

absl::StatusOr<DType> ParseFloat16Or32Flag(absl::string_view flag, absl::string_view value) {
  const absl::StatusOr<DType> dtype = ParseDType(value);
  if (!dtype.ok() || !IsFloat16Or32(*dtype)) {
    return absl::InvalidArgumentError(absl::StrFormat("--%s=\"%s\": expected f32, bf16 or f16", flag, value));
  }
  return *dtype;
}

absl::StatusOr<DType> ParseWeightsDtypeFlag(absl::string_view flag, absl::string_view value) {
  const absl::StatusOr<DType> dtype = ParseDType(value);
  // q6_k is not asked for: it comes with q4_k (llama.cpp's Q4_K_M mix).
  if (!dtype.ok() || !(IsFloat16Or32(*dtype) || *dtype == DType::kQ8_0 || *dtype == DType::kQ4_K)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--%s=\"%s\": expected bf16, fp16, fp32, int8 or q4_k", flag, value));
  }
  return *dtype;
}

}  // namespace llama
