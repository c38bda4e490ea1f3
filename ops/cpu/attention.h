// Causal self-attention of one sequence's new positions over its KV cache,
// with grouped-query heads (several query heads share a KV head).
//
// The new positions' keys and values must already be in the cache, so that
// position p attends to cache rows [0, p]: the reference's causal mask over
// the cached prefix during prefill, and plain attention during decode.

#ifndef LLAMA_OPS_CPU_ATTENTION_H_
#define LLAMA_OPS_CPU_ATTENTION_H_

#include <cstdint>

#include "ops/cpu/thread_pool.h"
#include "ops/dtype.h"
#include "ops/kv_cache_view.h"

namespace llama::cpu {

struct AttentionArgs {
  const float* q;        // [len, n_heads, head_dim], rotary already applied.
  const void* k_cache;   // The layer's block pool (ops/kv_cache_view.h), [rows, n_kv_heads, head_dim] of cache_dtype.
  const void* v_cache;   // Same layout.
  DType cache_dtype;     // f32, or bf16/f16 (half the memory; widened per row).
  const int32_t* block_table;  // The sequence's: position t is in pool row CacheRowOf(block_table, block_size, t).
  int64_t block_size;
  const int* kv_head_of;  // [n_heads]: the KV head each query head reads.
  int64_t start_pos;      // Position of q's first row.
  int64_t len;
  int64_t n_heads;
  int64_t n_kv_heads;
  int64_t head_dim;
  float* out;  // [len, n_heads * head_dim]
};

void Attention(const AttentionArgs& args, ThreadPool& pool);

}  // namespace llama::cpu

#endif  // LLAMA_OPS_CPU_ATTENTION_H_
