// Scratch buffers the kernels read with 64-byte loads start on a cache
// line. std::vector's storage is only 16-byte aligned (glibc's malloc, and
// large blocks come from mmap 16 bytes past a page), so every 64-byte load
// of such a buffer spans two lines and costs two: aligning the quantized x
// of the q4_k prefill kernel took TinyLlama's Q4_K_M prefill of 512 tokens
// from 112 to 123 tokens/s (ops/cpu/PERFORMANCE.md). Internal to ops/cpu.

#ifndef LLAMA_OPS_CPU_CACHE_ALIGNED_H_
#define LLAMA_OPS_CPU_CACHE_ALIGNED_H_

#include <vector>

#include "boost/align/aligned_allocator.hpp"

namespace llama::cpu {

constexpr std::size_t kCacheLine = 64;

template <typename T>
using CacheAlignedVector = std::vector<T, boost::alignment::aligned_allocator<T, kCacheLine>>;

}  // namespace llama::cpu

#endif  // LLAMA_OPS_CPU_CACHE_ALIGNED_H_
