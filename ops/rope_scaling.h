// Llama 3.1's rotary frequency scaling for long contexts (llama-models'
// apply_scaling, used when params.json sets use_scaled_rope): frequencies
// whose wavelength exceeds original_context / low_freq_factor are divided
// by `factor`, those below original_context / high_freq_factor are kept,
// and those between are blended. The defaults are Llama 3.1's.

#ifndef LLAMA_OPS_ROPE_SCALING_H_
#define LLAMA_OPS_ROPE_SCALING_H_

namespace llama {

struct RopeScaling {
  double factor = 8;
  double low_freq_factor = 1;
  double high_freq_factor = 4;
  double original_context = 8192;
};

}  // namespace llama

#endif  // LLAMA_OPS_ROPE_SCALING_H_
