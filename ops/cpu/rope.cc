#include "ops/cpu/rope.h"

#include <cmath>

namespace llama::cpu {

RopeTable::RopeTable(int64_t head_dim, int64_t positions, double theta)
    : half_(head_dim / 2), positions_(positions), cos_(positions * half_), sin_(positions * half_) {
  for (int64_t i = 0; i < half_; ++i) {
    // As the reference: f32 frequencies, f32 angles (torch.outer of f32s).
    const float freq = static_cast<float>(1.0 / std::pow(theta, static_cast<double>(2 * i) / head_dim));
    for (int64_t p = 0; p < positions; ++p) {
      const float angle = static_cast<float>(p) * freq;
      cos_[p * half_ + i] = std::cos(angle);
      sin_[p * half_ + i] = std::sin(angle);
    }
  }
}

void RopeTable::Apply(float* x, int64_t heads, int64_t pos) const {
  const float* c = cos_.data() + pos * half_;
  const float* s = sin_.data() + pos * half_;
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * 2 * half_;
    for (int64_t i = 0; i < half_; ++i) {
      const float re = v[2 * i], im = v[2 * i + 1];
      v[2 * i] = re * c[i] - im * s[i];
      v[2 * i + 1] = re * s[i] + im * c[i];
    }
  }
}

}  // namespace llama::cpu
