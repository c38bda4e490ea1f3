// Makes ops/ggml_blocks_test's data with llama.cpp's own code: per ggml
// type, <NAME>.blocks (ggml_quantize_chunk of 3 rows of 512 pseudo-random
// values, the third row offset so minimums matter) and <NAME>.f32 (ggml's
// to_float of those blocks). Not part of the build; with a llama.cpp build
// at $LLAMA_CPP:
//   gcc -O2 gen_blocks.c -I$LLAMA_CPP/ggml/include -L$LLAMA_CPP/build/bin
//       -lggml -lggml-base -Wl,-rpath,$LLAMA_CPP/build/bin -o gen_blocks
//   ./gen_blocks .
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#include "ggml.h"

static float next_value(unsigned* state) {
  *state = *state * 1664525u + 1013904223u;  // Numerical Recipes' LCG.
  return ((*state >> 8) / 16777216.0f) * 2 - 1;
}

static int write_file(const char* dir, const char* type, const char* ext, const void* data, size_t bytes) {
  char path[512], name[16];
  int i = 0;
  for (; type[i] != 0 && i < 15; ++i) name[i] = (char)toupper((unsigned char)type[i]);
  name[i] = 0;
  snprintf(path, sizeof path, "%s/%s.%s", dir, name, ext);
  FILE* f = fopen(path, "wb");
  if (f == NULL || fwrite(data, 1, bytes, f) != bytes || fclose(f) != 0) return 1;
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  enum { kRows = 3, kCols = 512 };
  const enum ggml_type types[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
  static float x[kRows * kCols], y[kRows * kCols];
  // ggml_init fills the f16-to-f32 table the reference dequantizers read.
  struct ggml_init_params params = {0, NULL, true};
  ggml_free(ggml_init(params));
  unsigned state = 12345;
  for (int i = 0; i < kRows * kCols; i++) {
    const float v = next_value(&state);
    x[i] = v * v * v * (i % 97 == 0 ? 8.0f : 1.0f) + (i / kCols == 2 ? 0.3f : 0.0f);
  }
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
    const size_t bytes = ggml_row_size(types[t], kCols) * kRows;
    void* q = malloc(bytes);
    ggml_quantize_init(types[t]);
    if (ggml_quantize_chunk(types[t], x, q, 0, kRows, kCols, NULL) != bytes) return 1;
    ggml_get_type_traits(types[t])->to_float(q, y, kRows * kCols);
    if (write_file(argv[1], ggml_type_name(types[t]), "blocks", q, bytes) ||
        write_file(argv[1], ggml_type_name(types[t]), "f32", y, sizeof y)) {
      return 1;
    }
    free(q);
  }
  return 0;
}
