#include "ops/cpu/elementwise.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "ops/cast.h"

namespace llama::cpu {

float LoadAsFloat(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kF16:
      return F16ToF32(static_cast<const uint16_t*>(t.raw())[i]);
    case DType::kBF16:
      return Bf16ToF32(static_cast<const uint16_t*>(t.raw())[i]);
    default:
      return t.f32()[i];
  }
}

// Upcasting weight rows is on the decode path's critical loop: compiled for
// AVX2 too (see ops/cpu/linear.cc).
__attribute__((target_clones("arch=x86-64-v3", "default")))
void LoadRow(const Tensor& t, int64_t offset, int64_t count, float* out) {
  switch (t.dtype()) {
    case DType::kF16: {
      const uint16_t* p = static_cast<const uint16_t*>(t.raw()) + offset;
      for (int64_t i = 0; i < count; ++i) out[i] = F16ToF32(p[i]);
      break;
    }
    case DType::kBF16: {
      const uint16_t* p = static_cast<const uint16_t*>(t.raw()) + offset;
      for (int64_t i = 0; i < count; ++i) out[i] = Bf16ToF32(p[i]);
      break;
    }
    default: {
      const float* p = t.f32() + offset;
      for (int64_t i = 0; i < count; ++i) out[i] = p[i];
      break;
    }
  }
}

void EmbeddingLookup(const Tensor& table, absl::Span<const int> tokens, float* out) {
  const int64_t width = table.dim(1);
  for (size_t i = 0; i < tokens.size(); ++i) LoadRow(table, tokens[i] * width, width, out + i * width);
}

void RmsNorm(const float* x, const Tensor& weight, int64_t n, int64_t dim, float eps, float* out) {
  for (int64_t row = 0; row < n; ++row) {
    const float* in = x + row * dim;
    float* o = out + row * dim;
    float sum = 0.0f;
    for (int64_t i = 0; i < dim; ++i) sum += in[i] * in[i];
    const float scale = 1.0f / std::sqrt(sum / static_cast<float>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) o[i] = in[i] * scale * LoadAsFloat(weight, i);
  }
}

void SwiGlu(float* gate, const float* up, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void AddInPlace(float* x, const float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] += y[i];
}

absl::Status CheckFinite(const float* x, int64_t count, absl::string_view where) {
  for (int64_t i = 0; i < count; ++i) {
    if (!std::isfinite(x[i])) {
      return absl::DataLossError(
          absl::StrFormat("non-finite activation %g at index %d %s", x[i], i, where));
    }
  }
  return absl::OkStatus();
}

}  // namespace llama::cpu
