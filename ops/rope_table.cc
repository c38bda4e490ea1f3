#include "ops/rope_table.h"

#include <cmath>

namespace llama {

namespace {

// llama-models' apply_scaling, in f32 as PyTorch runs it on f32 frequencies.
float ScaleFrequency(float freq, const RopeScaling& s) {
  const float wavelen = static_cast<float>(2 * M_PI) / freq;
  const float low_freq_wavelen = static_cast<float>(s.original_context / s.low_freq_factor);
  const float high_freq_wavelen = static_cast<float>(s.original_context / s.high_freq_factor);
  if (wavelen < high_freq_wavelen) return freq;
  if (wavelen > low_freq_wavelen) return freq / static_cast<float>(s.factor);
  const float smooth = (static_cast<float>(s.original_context) / wavelen - static_cast<float>(s.low_freq_factor)) /
                       static_cast<float>(s.high_freq_factor - s.low_freq_factor);
  return (1 - smooth) * freq / static_cast<float>(s.factor) + smooth * freq;
}

}  // namespace

std::vector<float> RopeFrequencies(int64_t head_dim, double theta, const std::optional<RopeScaling>& scaling) {
  std::vector<float> freqs(head_dim / 2);
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    // As the reference: f32 frequencies.
    freqs[i] = static_cast<float>(1.0 / std::pow(theta, static_cast<double>(2 * i) / head_dim));
    if (scaling.has_value()) freqs[i] = ScaleFrequency(freqs[i], *scaling);
  }
  return freqs;
}

RopeTable::RopeTable(int64_t head_dim, int64_t positions, double theta, const std::optional<RopeScaling>& scaling)
    : half_(head_dim / 2), positions_(positions), cos_(positions * half_), sin_(positions * half_) {
  const std::vector<float> freqs = RopeFrequencies(head_dim, theta, scaling);
  for (int64_t i = 0; i < half_; ++i) {
    for (int64_t p = 0; p < positions; ++p) {
      const float angle = static_cast<float>(p) * freqs[i];  // f32 angles, as torch.outer of f32s.
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

}  // namespace llama
