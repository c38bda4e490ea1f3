// Seeded normal random values for kernel tests.

#ifndef LLAMA_OPS_RANDOM_VALUES_H_
#define LLAMA_OPS_RANDOM_VALUES_H_

#include <cstdint>
#include <random>
#include <vector>

namespace llama::testing {

// `n` values from N(0, 1), the same for the same seed.
inline std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

}  // namespace llama::testing

#endif  // LLAMA_OPS_RANDOM_VALUES_H_
