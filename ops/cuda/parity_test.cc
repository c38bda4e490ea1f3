// Every CUDA op against its CPU twin (ops/cpu/) on random inputs of several
// shapes. Tolerances |gpu - cpu| <= atol + rtol |cpu|: f32 paths 1e-5/1e-5
// (different summation order only); GEMMs against the exact product of the
// same rounded operands, within the f32 accumulation bound (see there). NaN
// is never accepted. Skipped without a GPU.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "ops/cast.h"
#include "ops/cpu/attention.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/thread_pool.h"
#include "ops/cuda/attention.h"
#include "ops/cuda/attention_mma.h"
#include "ops/cuda/cublas_linear.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/parity_fixture.h"
#include "ops/cuda/rope.h"
#include "ops/random_values.h"
#include "ops/rope_table.h"

namespace llama::cuda {
namespace {

class AttentionParityTest : public ParityTest {
 protected:
  // k and v as a cache of `dtype` (rounded to it as StoreKv rounds): on
  // the host for the CPU reference, and uploaded.
  struct TypedCache {
    std::vector<uint16_t> k16, v16;
    const char* k_host;
    const char* v_host;
    KvCacheView device;
  };
  TypedCache StoreCache(const std::vector<float>& k, const std::vector<float>& v, DType dtype) {
    TypedCache c;
    if (dtype == DType::kF32) {
      c.k_host = reinterpret_cast<const char*>(k.data());
      c.v_host = reinterpret_cast<const char*>(v.data());
      c.device = {Upload(k), Upload(v), dtype, kBlock};
      return c;
    }
    const auto round = [dtype](float x) { return dtype == DType::kF16 ? F32ToF16(x) : F32ToBf16(x); };
    for (float x : k) c.k16.push_back(round(x));
    for (float x : v) c.v16.push_back(round(x));
    c.k_host = reinterpret_cast<const char*>(c.k16.data());
    c.v_host = reinterpret_cast<const char*>(c.v16.data());
    c.device = {Upload(c.k16), Upload(c.v16), dtype, kBlock};
    return c;
  }

  // Block tables of `sequences` sequences of `capacity` positions in blocks
  // of kBlock, scattered over a pool of exactly that many blocks (block b of
  // sequence s is pool block (5 (s per + b) + 3) mod total), so that a kernel
  // reading a sequence as one contiguous slot fails. Stride: per.
  static constexpr int64_t kBlock = 16;
  struct Paging {
    std::vector<int32_t> tables;
    int64_t stride;
    const int32_t* table(int32_t sequence) const { return tables.data() + sequence * stride; }
  };
  static Paging ScatteredTables(int64_t sequences, int64_t capacity) {
    Paging p{{}, capacity / kBlock};
    const int64_t total = sequences * p.stride;
    for (int64_t i = 0; i < total; ++i) p.tables.push_back(static_cast<int32_t>((5 * i + 3) % total));
    return p;
  }
  KvBlockTables DeviceTables(const Paging& paging, const std::vector<int32_t>& row_sequences) {
    return {Upload(paging.tables), Upload(row_sequences), paging.stride};
  }

  // Rows of q attending to `len` positions from `start` of a sequence.
  struct Chunk {
    int32_t sequence;
    int64_t start, len;
  };
  // The CPU's attention, chunk by chunk (q's rows in chunk order): what the
  // GPU kernels are checked against.
  static std::vector<float> CpuAttention(const std::vector<float>& q, const TypedCache& cache, DType dtype,
                                         const Paging& paging, const std::vector<Chunk>& chunks,
                                         const std::vector<int>& kv_head_of, int64_t n_heads, int64_t n_kv,
                                         int64_t hd, ThreadPool& pool) {
    int64_t rows = 0;
    for (const Chunk& c : chunks) rows += c.len;
    std::vector<float> out(rows * n_heads * hd);
    int64_t row = 0;
    for (const Chunk& c : chunks) {
      cpu::Attention({q.data() + row * n_heads * hd, cache.k_host, cache.v_host, dtype, paging.table(c.sequence),
                      kBlock, kv_head_of.data(), c.start, c.len, n_heads, n_kv, hd, out.data() + row * n_heads * hd},
                     pool);
      row += c.len;
    }
    return out;
  }
  std::vector<void*> allocations_;
};

// The reference is the exact product (in double) of the operands the GPU
// multiplies: with 16-bit weights through cuBLAS, x rounded to the weights'
// type as CublasLinear rounds it (nearest even; comparing with the CPU's
// f32-x product instead fails thousands of outputs at K = 4096 without any
// fault); through Gemv (one row), x as it is. The shapes take both paths:
// 1 row (Gemv), 7, 8, 9 and 33 rows (cuBLAS).
// A product of two bf16 or f16 values, or of two f32 values' rounding, is
// then summed in f32 by cuBLAS in an order of its choosing (tensor-core
// tiles, split K). Any order of K f32 additions errs by at most
// K * 2^-24 * sum_k |x_k w_k| (Higham's gamma_K bound); twice that allows
// for the tensor cores' truncating accumulators and the f32 product's own
// rounding. At K = 4096 with unit normal operands that is 4.9e-4 of
// sum |x w| ~ 2600, i.e. ~1.3 against outputs of size ~64: a wrong layout,
// transpose, dtype or leading dimension misses by the output's own size.
TEST_F(ParityTest, LinearEveryDtypeAndShape) {
  for (const auto& [n, in, out] : {std::tuple<int64_t, int64_t, int64_t>{1, 64, 96}, {1, 11008, 4096},
                                   {7, 4096, 4096}, {8, 11008, 512}, {33, 512, 11008}}) {
    const std::vector<float> x = Random(n * in, 1), w = Random(out * in, 2);
    absl::StatusOr<std::unique_ptr<CublasLinear>> linear = CublasLinear::Create(nullptr, n * in);
    ASSERT_TRUE(linear.ok()) << linear.status();
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      std::vector<uint16_t> w16(w.size());
      std::vector<float> x_used = x, w_used = w;  // What the GPU multiplies.
      if (dtype != DType::kF32) {
        const auto round = [dtype](float v) {
          return dtype == DType::kF16 ? F16ToF32(F32ToF16(v)) : Bf16ToF32(F32ToBf16(v));
        };
        for (size_t i = 0; i < w.size(); ++i) {
          w16[i] = dtype == DType::kF16 ? F32ToF16(w[i]) : F32ToBf16(w[i]);
          w_used[i] = round(w[i]);
        }
        if (CublasLinear::RoundsInput(n, dtype, in)) {
          for (float& v : x_used) v = round(v);
        }
      }
      const void* device_w = dtype == DType::kF32 ? static_cast<const void*>(Upload(w)) : Upload(w16);
      float* y = Upload(std::vector<float>(n * out));
      ASSERT_TRUE((*linear)->Run(Upload(x), n, device_w, dtype, out, in, y).ok());
      const std::vector<float> got = Download(y, n * out);
      const double bound_per_term = 2.0 * static_cast<double>(in) * std::ldexp(1.0, -24);
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t o = 0; o < out; ++o) {
          double exact = 0, magnitude = 0;
          for (int64_t k = 0; k < in; ++k) {
            const double term = static_cast<double>(x_used[r * in + k]) * w_used[o * in + k];
            exact += term;
            magnitude += std::abs(term);
          }
          const float value = got[r * out + o];
          ASSERT_TRUE(std::isfinite(value)) << DTypeName(dtype) << " (" << r << ", " << o << ")";
          ASSERT_LE(std::abs(value - exact), bound_per_term * magnitude)
              << DTypeName(dtype) << " n " << n << " K " << in << " output (" << r << ", " << o << "): exact "
              << exact << ", sum |x w| " << magnitude;
        }
      }
    }
  }
}

// A group (q/k/v, gate/up) is one Gemv launch at one row and one cast of x
// for cuBLAS: each output must be the one its own Run gives, bit for bit,
// with a group larger than one launch takes and outputs of different sizes.
TEST_F(ParityTest, GroupedLinearsEqualSeparateRuns) {
  const int64_t in = 512;
  const std::vector<int64_t> outs = {96, 64, 40, 200};
  for (int64_t n : {1, 7}) {
    absl::StatusOr<std::unique_ptr<CublasLinear>> linear = CublasLinear::Create(nullptr, n * in);
    ASSERT_TRUE(linear.ok()) << linear.status();
    const float* x = Upload(Random(n * in, 5));
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      std::vector<LinearOutput> group;
      std::vector<float*> alone;
      for (size_t i = 0; i < outs.size(); ++i) {
        const std::vector<float> w = Random(outs[i] * in, 6 + i);
        std::vector<uint16_t> w16(w.size());
        for (size_t j = 0; j < w.size(); ++j) w16[j] = dtype == DType::kF16 ? F32ToF16(w[j]) : F32ToBf16(w[j]);
        const void* device_w = dtype == DType::kF32 ? static_cast<const void*>(Upload(w)) : Upload(w16);
        group.push_back({device_w, outs[i], Upload(std::vector<float>(n * outs[i]))});
        alone.push_back(Upload(std::vector<float>(n * outs[i])));
        ASSERT_TRUE((*linear)->Run(x, n, device_w, dtype, outs[i], in, alone.back()).ok());
      }
      ASSERT_TRUE((*linear)->RunGroup(x, n, dtype, in, group).ok());
      if (n == 1 && dtype != DType::kF32) {
        // One launch takes 1 to kMaxGemvGroup weights (RunGroup splits larger groups).
        for (size_t size : {size_t{0}, group.size()}) {
          const absl::Status status = Gemv(x, n, dtype, in, absl::MakeConstSpan(group).first(size), nullptr);
          EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << size << " weights";
          EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("1 to 3 weights")) << status;
        }
      }
      for (size_t i = 0; i < outs.size(); ++i) {
        const std::vector<float> got = Download(group[i].y, n * outs[i]), want = Download(alone[i], n * outs[i]);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
            << DTypeName(dtype) << " n " << n << " weight " << i;
      }
    }
  }
}

TEST_F(ParityTest, RmsNormRopeSwiGluEmbedding) {
  const int64_t n = 5, dim = 4096, heads = 32, hd = 128;
  const std::vector<float> x = Random(n * dim, 3), w = Random(dim, 4);
  std::vector<uint16_t> w16(dim);
  for (int64_t i = 0; i < dim; ++i) w16[i] = F32ToBf16(w[i]);
  std::vector<float> expected(n * dim);
  cpu::RmsNorm(x.data(), Tensor::View(DType::kBF16, {dim}, w16.data()), n, dim, 1e-5f, expected.data());
  float* out = Upload(std::vector<float>(n * dim));
  ASSERT_TRUE(RmsNorm(Upload(x), Upload(w16), DType::kBF16, n, dim, 1e-5f, out, nullptr).ok());
  ExpectClose(Download(out, n * dim), expected, 1e-5, 1e-5, "rms_norm");

  RopeTable table(hd, 4096, 10000.0);
  std::vector<float> q = Random(n * heads * hd, 5), q_cpu = q;
  const std::vector<int32_t> positions = {0, 1, 17, 1000, 4095};
  for (int64_t r = 0; r < n; ++r) table.Apply(q_cpu.data() + r * heads * hd, heads, positions[r]);
  float* q_gpu = Upload(q);
  ASSERT_TRUE(Rope(q_gpu, n, heads, hd, Upload(positions), Upload(table.cos_table()), Upload(table.sin_table()), nullptr).ok());
  ExpectClose(Download(q_gpu, q.size()), q_cpu, 1e-5, 1e-5, "rope");

  std::vector<float> gate = Random(10000, 6), up = Random(10000, 7), gate_cpu = gate;
  cpu::SwiGlu(gate_cpu.data(), up.data(), 10000);
  float* gate_gpu = Upload(gate);
  ASSERT_TRUE(SwiGlu(gate_gpu, Upload(up), 10000, nullptr).ok());
  ExpectClose(Download(gate_gpu, 10000), gate_cpu, 1e-5, 1e-5, "swiglu");

  const std::vector<float> table_values = Random(100 * 64, 8);
  const std::vector<int32_t> tokens = {5, 99, 0, 5};
  std::vector<float> rows(4 * 64);
  cpu::EmbeddingLookup(Tensor::View(DType::kF32, {100, 64}, table_values.data()), {5, 99, 0, 5}, rows.data());
  float* gpu_rows = Upload(std::vector<float>(4 * 64));
  ASSERT_TRUE(EmbeddingLookup(Upload(tokens), 4, Upload(table_values), DType::kF32, 64, gpu_rows, nullptr).ok());
  ExpectClose(Download(gpu_rows, rows.size()), rows, 0, 0, "embedding");
}

// A paged cache of three sequences in each dtype; one step that prefills
// 150 rows of sequence 0 from position 70 (tiles of 64, 64 and 22 rows, not
// aligned with the 64-key rounds), decodes sequence 1 at position 300 and
// prefills 37 rows of sequence 2 from 0, against cpu::Attention per sequence
// over the same bytes and block tables: row by row (Attention) and in tiles
// (AttentionTiles). Head sizes 128 and 64 take the tensor-core kernel, 96 the
// CUDA-core one (and the row-by-row kernel): f32 math, 1e-5 + 1e-4 |cpu|.
// The tensor cores' bf16x3 products keep each operand to about 2^-17 and
// drop the remainders' product (2^-18), so a score errs by up to 2^-16 of
// sum |q_d k_d| / sqrt(head_dim), about 3 here (uniform [-1, 1] operands),
// and the output by that much relatively: 2^-14 (6.1e-5) allows a factor of
// four over the 2^-16 scale; H200: at most 1.9e-5 seen (f32 cache), 1.3e-5
// (f16), 6.6e-6 (bf16, whose remainders are zero).
TEST_F(AttentionParityTest, AttentionMixedStepEveryCacheType) {
  ThreadPool pool(4);
  const int64_t n_heads = 8, n_kv = 2, capacity = 512, sequences = 3;
  const std::vector<Chunk> chunks = {{0, 70, 150}, {1, 300, 1}, {2, 0, 37}};
  const Paging paging = ScatteredTables(sequences, capacity);
  std::vector<int32_t> row_sequences, row_positions, tile_first, tile_rows;
  for (const Chunk& c : chunks) {
    for (int64_t i = 0; i < c.len; ++i) {
      if (i % kAttentionTileRows == 0) {
        tile_first.push_back(static_cast<int32_t>(row_sequences.size()));
        tile_rows.push_back(static_cast<int32_t>(std::min<int64_t>(kAttentionTileRows, c.len - i)));
      }
      row_sequences.push_back(c.sequence);
      row_positions.push_back(static_cast<int32_t>(c.start + i));
    }
  }
  const int64_t n = row_sequences.size();
  const std::vector<int32_t> kv_head_of = {0, 0, 0, 0, 1, 1, 1, 1};
  const std::vector<int> kv_cpu(kv_head_of.begin(), kv_head_of.end());
  const KvBlockTables tables = DeviceTables(paging, row_sequences);
  for (const int64_t hd : {128, 64, 96}) {
    const int64_t kv_width = n_kv * hd;
    const std::vector<float> q = Random(n * n_heads * hd, 9), k = Random(sequences * capacity * kv_width, 10),
                             v = Random(sequences * capacity * kv_width, 11);
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      const std::string what = absl::StrFormat("%s cache, head_dim %d", DTypeName(dtype), hd);
      const TypedCache cache = StoreCache(k, v, dtype);
      const std::vector<float> expected =
          CpuAttention(q, cache, dtype, paging, chunks, kv_cpu, n_heads, n_kv, hd, pool);
      float* out = Upload(std::vector<float>(expected.size()));
      ASSERT_TRUE(Attention(Upload(q), n, tables, Upload(row_positions), cache.device, Upload(kv_head_of), n_heads,
                            n_kv, hd, out, nullptr)
                      .ok());
      ExpectClose(Download(out, expected.size()), expected, 1e-5, 1e-4, "attention, " + what);
      float* tiled = Upload(std::vector<float>(expected.size()));
      ASSERT_TRUE(AttentionTiles(Upload(q), Upload(tile_first), Upload(tile_rows), tile_first.size(), tables,
                                 Upload(row_positions), cache.device, Upload(kv_head_of), n_heads, n_kv, hd, tiled,
                                 nullptr)
                      .ok());
      const std::vector<float> got = Download(tiled, expected.size());
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max<double>(worst, std::abs(got[i] - expected[i]));
      std::printf("tiled attention, %s (%s): max |gpu - cpu| %.3g\n", what.c_str(),
                  TensorCoreAttentionFits(hd) ? "tensor cores" : "CUDA cores", worst);
      ExpectClose(got, expected, TensorCoreAttentionFits(hd) ? 6.1e-5 : 1e-5, 1e-4, "tiled attention, " + what);
    }
  }
  // Called with a head size it is not built for, the tensor-core kernel says so.
  const KvCacheView none{nullptr, nullptr, DType::kF32, kBlock};
  EXPECT_EQ(TensorCoreAttentionTiles(nullptr, nullptr, nullptr, 1, tables, nullptr, none, nullptr, n_heads, n_kv, 96,
                                     nullptr, nullptr)
                .message(),
            "TensorCoreAttentionTiles: head_dim 96; expected 64 or 128");
}

// Decode rows split over the context (DecodeAttention) against cpu::Attention
// one row at a time: positions at and around the split edges (splits of 32
// positions for a 512-position cache: 0, 31, 32, 33) and deep in it, GQA
// heads, every cache type. The splits' online softmax sums in another
// order than the CPU: the attention tolerance of the mixed-step test.
TEST_F(AttentionParityTest, DecodeAttentionSplitOverTheContext) {
  ThreadPool pool(4);
  const int64_t n_heads = 8, n_kv = 2, hd = 128, capacity = 512, sequences = 7, kv_width = n_kv * hd;
  ASSERT_EQ(DecodeSplitPositions(capacity), 32);
  const std::vector<int32_t> row_sequences = {0, 1, 2, 3, 4, 5, 6}, row_positions = {0, 1, 31, 32, 33, 300, 511};
  const int64_t n = row_sequences.size();
  const Paging paging = ScatteredTables(sequences, capacity);
  const std::vector<float> q = Random(n * n_heads * hd, 17), k = Random(sequences * capacity * kv_width, 18),
                           v = Random(sequences * capacity * kv_width, 19);
  const std::vector<int32_t> kv_head_of = {0, 0, 0, 0, 1, 1, 1, 1};
  const std::vector<int> kv_cpu(kv_head_of.begin(), kv_head_of.end());
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    const TypedCache cache = StoreCache(k, v, dtype);
    std::vector<Chunk> one_row_each;  // Each decode row alone at its position.
    for (int64_t r = 0; r < n; ++r) one_row_each.push_back({row_sequences[r], row_positions[r], 1});
    const std::vector<float> expected =
        CpuAttention(q, cache, dtype, paging, one_row_each, kv_cpu, n_heads, n_kv, hd, pool);
    float* scratch = Upload(std::vector<float>(DecodeAttentionScratchFloats(n, n_heads, hd, capacity)));
    float* out = Upload(std::vector<float>(expected.size()));
    ASSERT_TRUE(DecodeAttention(Upload(q), n, DeviceTables(paging, row_sequences), Upload(row_positions), cache.device,
                                Upload(kv_head_of), n_heads, n_kv, hd, capacity, scratch, out, nullptr)
                    .ok());
    ExpectClose(Download(out, expected.size()), expected, 1e-5, 1e-4,
                std::string("decode attention, ") + std::string(DTypeName(dtype)) + " cache");
  }
}

// StoreKv writes each row at its position of its sequence's paged cache,
// rounded to the cache's type exactly as ops/cast.h rounds (nearest even);
// GatherRows copies rows.
TEST_F(AttentionParityTest, StoreKvAndGatherRows) {
  const int64_t capacity = 32, kv_width = 256, n = 3;
  const std::vector<float> k = Random(n * kv_width, 13), v = Random(n * kv_width, 14);
  const std::vector<int32_t> sequences = {1, 0, 1}, positions = {5, 0, 17};
  const Paging paging = ScatteredTables(2, capacity);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    const size_t bytes = 2 * capacity * kv_width * DTypeSize(dtype);
    const KvCacheView cache{Upload(std::vector<char>(bytes)), Upload(std::vector<char>(bytes)), dtype, kBlock};
    ASSERT_TRUE(StoreKv(Upload(k), Upload(v), n, kv_width, DeviceTables(paging, sequences), Upload(positions), cache,
                        nullptr)
                    .ok());
    const std::vector<char> k_cache = Download(static_cast<const char*>(cache.k), bytes);
    const std::vector<char> v_cache = Download(static_cast<const char*>(cache.v), bytes);
    for (int64_t r = 0; r < n; ++r) {
      const int64_t element = CacheRowOf(paging.table(sequences[r]), kBlock, positions[r]) * kv_width;
      for (int64_t i = 0; i < kv_width; ++i) {
        const float kx = k[r * kv_width + i], vx = v[r * kv_width + i];
        if (dtype == DType::kF32) {
          ASSERT_EQ(reinterpret_cast<const float*>(k_cache.data())[element + i], kx);
          ASSERT_EQ(reinterpret_cast<const float*>(v_cache.data())[element + i], vx);
        } else {
          const auto round = [&](float x) { return dtype == DType::kF16 ? F32ToF16(x) : F32ToBf16(x); };
          ASSERT_EQ(reinterpret_cast<const uint16_t*>(k_cache.data())[element + i], round(kx)) << DTypeName(dtype);
          ASSERT_EQ(reinterpret_cast<const uint16_t*>(v_cache.data())[element + i], round(vx)) << DTypeName(dtype);
        }
      }
    }
  }
  const std::vector<int32_t> rows = {2, 0, 2};
  float* gathered = Upload(std::vector<float>(3 * kv_width));
  ASSERT_TRUE(GatherRows(Upload(k), Upload(rows), 3, kv_width, gathered, nullptr).ok());
  const std::vector<float> got = Download(gathered, 3 * kv_width);
  for (int i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < kv_width; ++j) ASSERT_EQ(got[i * kv_width + j], k[rows[i] * kv_width + j]);
  }
}

}  // namespace
}  // namespace llama::cuda
