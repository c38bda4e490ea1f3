// Where a step's keys and values live, the same on every device: a paged
// cache, as vLLM's. Each layer's k and v are one pool of blocks of
// `block_size` positions ([blocks, block_size, n_kv_heads, head_dim] of
// `dtype`: f32, or bf16/f16 for half the memory), and each sequence has a
// block table: entry i is the block that holds its positions
// [i * block_size, (i + 1) * block_size). So sequences take memory as they
// grow, not max_seq_len each, and a block can be shared by every sequence
// whose prompt starts with the same tokens. The pointers are in the memory
// of the device that runs the ops.

#ifndef LLAMA_OPS_KV_CACHE_VIEW_H_
#define LLAMA_OPS_KV_CACHE_VIEW_H_

#include <cstdint>

#include "ops/dtype.h"

#ifdef __CUDACC__
#define LLAMA_HOST_DEVICE __host__ __device__
#else
#define LLAMA_HOST_DEVICE
#endif

namespace llama {

struct KvCacheView {
  void* k = nullptr;
  void* v = nullptr;
  DType dtype = DType::kF32;
  int64_t block_size = 0;  // Positions per block.
};

// The block tables of a step's rows: row r's table starts at
// tables + table_of[r] * table_stride (one table per sequence of the step,
// table_stride entries each, so a device array keeps its size from step to
// step and a captured CUDA graph replays with new tables).
struct KvBlockTables {
  const int32_t* tables = nullptr;
  const int32_t* table_of = nullptr;
  int64_t table_stride = 0;
};

// Blocks of `block_size` positions that hold `positions` positions.
LLAMA_HOST_DEVICE inline int64_t KvBlocksFor(int64_t positions, int64_t block_size) {
  return (positions + block_size - 1) / block_size;
}

// The pool row (block * block_size + offset) that holds position t of the
// sequence whose block table is `table`.
LLAMA_HOST_DEVICE inline int64_t CacheRowOf(const int32_t* table, int64_t block_size, int64_t t) {
  return static_cast<int64_t>(table[t / block_size]) * block_size + t % block_size;
}

}  // namespace llama

#endif  // LLAMA_OPS_KV_CACHE_VIEW_H_
