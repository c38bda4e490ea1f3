// ggml's tensor types as GGUF files store them (ggml.h's enum ggml_type,
// ggml-common.h's block layouts): the traits every reader of a GGUF file
// needs (elements and bytes per block), and the decoding of the block types
// a Llama GGUF holds (llama.cpp's quantize presets Q4_0, Q4_K_M, Q5_K_M,
// Q6_K, Q8_0) into f32.
//
// Decoding does exactly llama.cpp's float operations in its order (each
// product and difference rounded to f32, no fused multiply-add), so a
// decoded value is bit for bit the value llama.cpp's reference
// dequantize_row_* gives.

#ifndef LLAMA_OPS_GGML_BLOCKS_H_
#define LLAMA_OPS_GGML_BLOCKS_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/status.h"

namespace llama {

// ggml_type values (stable: they are written into files).
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

struct GgmlTypeTraits {
  GgmlType type;
  const char* name;  // ggml's: "F32", "Q4_K", ...
  int64_t block_elements;
  int64_t block_bytes;
};

// The traits of a type whose layout is known here (the IQ family and the
// ternary types are not), or null.
const GgmlTypeTraits* GgmlTraitsOf(uint32_t type);

// ggml's name of a type, or "type N" for one unknown here.
std::string GgmlTypeName(uint32_t type);

// True for the block types DecodeGgmlRow decodes.
bool IsDecodableGgmlBlockType(uint32_t type);

// Bytes of a row of `elements` values of a known `type` (elements must be
// a multiple of its block size).
int64_t GgmlRowBytes(const GgmlTypeTraits& traits, int64_t elements);

// The eight 6-bit scales and minimums of a Q4_K or Q5_K super-block's
// sub-blocks, packed in its 12 scale bytes: sub-blocks 0-3 in the low 6
// bits of bytes 0-3 (scales) and 4-7 (minimums); 4-7 in the low (scales)
// and high (minimums) nibbles of bytes 8-11, with their top two bits in
// the top bits of bytes 0-3 (scales) and 4-7 (minimums). Four bytes at a
// time, inline: the decoder and the scalar q4_k kernel unpack them per
// super-block (the vector kernels in one register: linear_q4k.cc).
inline void GgmlKScalesAndMins(const uint8_t* packed, uint8_t* scales, uint8_t* mins) {
  uint32_t w[3];
  std::memcpy(w, packed, sizeof w);
  const uint32_t low6 = 0x3F3F3F3Fu, low4 = 0x0F0F0F0Fu, low2 = 0x03030303u;
  const uint32_t s[2] = {w[0] & low6, (w[2] & low4) | (((w[0] >> 6) & low2) << 4)};
  const uint32_t m[2] = {w[1] & low6, ((w[2] >> 4) & low4) | (((w[1] >> 6) & low2) << 4)};
  std::memcpy(scales, s, sizeof s);
  std::memcpy(mins, m, sizeof m);
}

// Decodes `elements` values (a multiple of the type's block size) of one
// of the decodable block types (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K) from
// `blocks` into `out`. Any other type is an error naming it.
absl::Status DecodeGgmlRow(uint32_t type, const uint8_t* blocks, int64_t elements, float* out);

}  // namespace llama

#endif  // LLAMA_OPS_GGML_BLOCKS_H_
