#include "worker/model/transformer.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <new>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "ops/cast.h"
#include "ops/cpu/attention.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/linear.h"

namespace llama {
namespace {

// MemAvailable from /proc/meminfo, in bytes; 0 if unknown.
double AvailableMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (meminfo >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

}  // namespace

Transformer::Transformer(ModelWeights weights, Communicator* communicator, const TransformerOptions& options)
    : weights_(std::move(weights)),
      communicator_(communicator),
      options_(options),
      pool_(options.threads),
      rope_(weights_.config.head_dim(), 2 * options.max_seq_len, weights_.config.rope_theta) {
  const ModelConfig& c = weights_.config;
  const int ws = weights_.world_size;
  head_dim_ = c.head_dim();
  local_heads_ = c.n_heads / ws;
  local_kv_heads_ = weights_.layers[0].wk.dim(0) / head_dim_;
  local_hidden_ = c.ffn_hidden_dim() / ws;
  // Global query head h reads global KV head h / (n_heads / n_kv_heads).
  const int64_t group = c.n_heads / c.n_kv_heads;
  for (int64_t j = 0; j < local_heads_; ++j) {
    const int64_t global_head = weights_.rank * local_heads_ + j;
    kv_head_of_.push_back(static_cast<int>(global_head / group - weights_.kv_head_begin));
  }
  const int64_t cache_row = local_kv_heads_ * head_dim_;
  for (int64_t i = 0; i < c.n_layers; ++i) {
    k_cache_.push_back(Tensor::Zeros(options.kv_cache_dtype, {options.max_batch_size, options.max_seq_len, cache_row}));
    v_cache_.push_back(Tensor::Zeros(options.kv_cache_dtype, {options.max_batch_size, options.max_seq_len, cache_row}));
  }
  const int64_t t = options.max_step_tokens;
  x_ = Tensor::Zeros(DType::kF32, {t, c.dim});
  xb_ = Tensor::Zeros(DType::kF32, {t, c.dim});
  q_ = Tensor::Zeros(DType::kF32, {t, local_heads_ * head_dim_});
  k_ = Tensor::Zeros(DType::kF32, {t, cache_row});
  v_ = Tensor::Zeros(DType::kF32, {t, cache_row});
  attention_ = Tensor::Zeros(DType::kF32, {t, local_heads_ * head_dim_});
  projection_ = Tensor::Zeros(DType::kF32, {t, c.dim});
  gate_ = Tensor::Zeros(DType::kF32, {t, local_hidden_});
  up_ = Tensor::Zeros(DType::kF32, {t, local_hidden_});
  gathered_ = Tensor::Zeros(DType::kF32, {t, std::max(c.dim, c.vocab_size)});
  logits_local_ = Tensor::Zeros(DType::kF32, {t, c.vocab_size / ws});
  logits_ = Tensor::Zeros(DType::kF32, {t, c.vocab_size});
  tokens_.reserve(t);
}

absl::StatusOr<std::unique_ptr<Transformer>> Transformer::Create(ModelWeights weights, Communicator* communicator,
                                                                 const TransformerOptions& options) {
  if (absl::Status s = ValidateModelConfig(weights.config, "model config"); !s.ok()) return s;
  if (weights.config.vocab_size <= 0 || weights.layers.size() != static_cast<size_t>(weights.config.n_layers)) {
    return absl::InvalidArgumentError(absl::StrFormat("model config: vocab_size %d and %d layers of weights for n_layers %d",
                                                      weights.config.vocab_size, weights.layers.size(),
                                                      weights.config.n_layers));
  }
  if (communicator->rank() != weights.rank || communicator->world_size() != weights.world_size) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the shard is for rank %d of %d but this process is rank %d of %d; convert for world size %d "
        "(//tools:convert --world_size=%d)",
        weights.rank, weights.world_size, communicator->rank(), communicator->world_size(),
        communicator->world_size(), communicator->world_size()));
  }
  if (!IsFloat16Or32(options.kv_cache_dtype)) {
    return absl::InvalidArgumentError(absl::StrFormat("--kv_cache_dtype=%s: expected f32, bf16 or f16",
                                                      DTypeName(options.kv_cache_dtype)));
  }
  if (options.max_batch_size < 1 || options.max_seq_len < 1 || options.max_step_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--max_batch_size (%d), --max_seq_len (%d) and the step size (%d) must be positive",
        options.max_batch_size, options.max_seq_len, options.max_step_tokens));
  }
  // Everything is allocated here, once: say so plainly if it cannot fit
  // rather than die in the allocator.
  const ModelConfig& c = weights.config;
  const double kv_bytes = 2.0 * c.n_layers * options.max_batch_size * options.max_seq_len *
                          weights.layers[0].wk.dim(0) * DTypeSize(options.kv_cache_dtype);
  const double work_bytes = static_cast<double>(options.max_step_tokens) *
                            (8.0 * c.dim + 2.0 * c.ffn_hidden_dim() / weights.world_size + 3.0 * c.vocab_size) *
                            sizeof(float);
  const double available = AvailableMemoryBytes();
  if (available > 0 && kv_bytes + work_bytes > available) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the KV cache (%.2f GB for --max_batch_size=%d x --max_seq_len=%d) and work buffers (%.2f GB) need more than "
        "the %.2f GB of memory available; lower --max_batch_size or --max_seq_len",
        kv_bytes / 1e9, options.max_batch_size, options.max_seq_len, work_bytes / 1e9, available / 1e9));
  }
  try {
    return std::unique_ptr<Transformer>(new Transformer(std::move(weights), communicator, options));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "out of memory allocating the KV cache (%.2f GB) and work buffers (%.2f GB); lower --max_batch_size or "
        "--max_seq_len",
        kv_bytes / 1e9, work_bytes / 1e9));
  }
}

absl::Status Transformer::CheckChunks(absl::Span<const SequenceChunk> chunks, int64_t* tokens,
                                      int64_t* rows) const {
  *tokens = *rows = 0;
  for (const SequenceChunk& chunk : chunks) {
    if (chunk.slot < 0 || chunk.slot >= options_.max_batch_size) {
      return absl::InvalidArgumentError(
          absl::StrFormat("KV slot %d outside [0, %d)", chunk.slot, options_.max_batch_size));
    }
    if (chunk.tokens.empty() || chunk.start_pos < 0 ||
        chunk.start_pos + static_cast<int64_t>(chunk.tokens.size()) > options_.max_seq_len) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "positions [%d, %d) do not fit max_seq_len %d", chunk.start_pos,
          chunk.start_pos + chunk.tokens.size(), options_.max_seq_len));
    }
    for (int token : chunk.tokens) {
      if (token < 0 || token >= config().vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrFormat("token id %d outside the vocabulary [0, %d)", token, config().vocab_size));
      }
    }
    *tokens += chunk.tokens.size();
    *rows += chunk.all_logits ? chunk.tokens.size() : 1;
  }
  if (*tokens > options_.max_step_tokens) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d tokens in one step; at most %d", *tokens, options_.max_step_tokens));
  }
  return absl::OkStatus();
}

absl::Status Transformer::GatherColumns(const float* local, int64_t n, int64_t width, float* full) {
  const int ws = weights_.world_size;
  if (ws == 1) {
    if (full != local) std::memcpy(full, local, n * width * sizeof(float));
    return absl::OkStatus();
  }
  // AllGather gives [ws][n][width]; rows want [n][ws * width].
  float* staged = gathered_.mutable_f32();
  if (absl::Status s = communicator_->AllGather(local, n * width, staged); !s.ok()) return s;
  for (int r = 0; r < ws; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(full + i * ws * width + r * width, staged + (r * n + i) * width, width * sizeof(float));
    }
  }
  return absl::OkStatus();
}

absl::Status Transformer::Layer(int index, absl::Span<const SequenceChunk> chunks, int64_t n) {
  const ModelConfig& c = config();
  const LayerWeights& w = weights_.layers[index];
  float* x = x_.mutable_f32();
  float* xb = xb_.mutable_f32();
  const int64_t q_width = local_heads_ * head_dim_, kv_width = local_kv_heads_ * head_dim_;

  cpu::RmsNorm(x, w.attention_norm, n, c.dim, static_cast<float>(c.norm_eps), xb);
  cpu::Linear(xb, n, w.wq, q_.mutable_f32(), pool_);
  cpu::Linear(xb, n, w.wk, k_.mutable_f32(), pool_);
  cpu::Linear(xb, n, w.wv, v_.mutable_f32(), pool_);
  int64_t row = 0;
  for (const SequenceChunk& chunk : chunks) {
    const int64_t len = chunk.tokens.size();
    const DType cache_dtype = options_.kv_cache_dtype;
    const size_t cache_row_bytes = kv_width * DTypeSize(cache_dtype);
    const size_t slot_offset = chunk.slot * options_.max_seq_len * cache_row_bytes;
    char* k_cache = static_cast<char*>(k_cache_[index].mutable_raw()) + slot_offset;
    char* v_cache = static_cast<char*>(v_cache_[index].mutable_raw()) + slot_offset;
    for (int64_t i = 0; i < len; ++i) {
      const int64_t pos = chunk.start_pos + i;
      rope_.Apply(q_.mutable_f32() + (row + i) * q_width, local_heads_, pos);
      rope_.Apply(k_.mutable_f32() + (row + i) * kv_width, local_kv_heads_, pos);
      // Create checked the dtype, the one failure CastElements has.
      CastElements(k_.f32() + (row + i) * kv_width, DType::kF32, k_cache + pos * cache_row_bytes, cache_dtype,
                   kv_width).IgnoreError();
      CastElements(v_.f32() + (row + i) * kv_width, DType::kF32, v_cache + pos * cache_row_bytes, cache_dtype,
                   kv_width).IgnoreError();
    }
    cpu::Attention({q_.f32() + row * q_width, k_cache, v_cache, cache_dtype, kv_head_of_.data(), chunk.start_pos, len,
                    local_heads_, local_kv_heads_, head_dim_, attention_.mutable_f32() + row * q_width},
                   pool_);
    row += len;
  }
  float* projection = projection_.mutable_f32();
  cpu::Linear(attention_.f32(), n, w.wo, projection, pool_);
  if (absl::Status s = communicator_->AllReduceSum(projection, n * c.dim); !s.ok()) return s;
  cpu::AddInPlace(x, projection, n * c.dim);

  cpu::RmsNorm(x, w.ffn_norm, n, c.dim, static_cast<float>(c.norm_eps), xb);
  cpu::Linear(xb, n, w.w1, gate_.mutable_f32(), pool_);
  cpu::Linear(xb, n, w.w3, up_.mutable_f32(), pool_);
  cpu::SwiGlu(gate_.mutable_f32(), up_.f32(), n * local_hidden_);
  cpu::Linear(gate_.f32(), n, w.w2, projection, pool_);
  if (absl::Status s = communicator_->AllReduceSum(projection, n * c.dim); !s.ok()) return s;
  cpu::AddInPlace(x, projection, n * c.dim);
  return cpu::CheckFinite(x, n * c.dim,
                          absl::StrFormat("after layer %d (rank %d)", index, weights_.rank));
}

absl::StatusOr<absl::Span<const float>> Transformer::Forward(absl::Span<const SequenceChunk> chunks) {
  int64_t n = 0, rows = 0;
  if (absl::Status s = CheckChunks(chunks, &n, &rows); !s.ok()) return s;
  const ModelConfig& c = config();
  tokens_.clear();
  for (const SequenceChunk& chunk : chunks) tokens_.insert(tokens_.end(), chunk.tokens.begin(), chunk.tokens.end());

  // Each rank looks up its slice of the embedding dimension; gather the rows.
  const int64_t local_dim = weights_.tok_embeddings.dim(1);
  cpu::EmbeddingLookup(weights_.tok_embeddings, tokens_, xb_.mutable_f32());
  if (absl::Status s = GatherColumns(xb_.f32(), n, local_dim, x_.mutable_f32()); !s.ok()) return s;

  for (int i = 0; i < c.n_layers; ++i) {
    if (absl::Status s = Layer(i, chunks, n); !s.ok()) return s;
  }

  // Only the rows whose logits are wanted go through the norm and output.
  float* selected = xb_.mutable_f32();
  int64_t row = 0, out = 0;
  for (const SequenceChunk& chunk : chunks) {
    const int64_t len = chunk.tokens.size();
    const int64_t first = chunk.all_logits ? 0 : len - 1;
    for (int64_t i = first; i < len; ++i) {
      std::memcpy(selected + out * c.dim, x_.f32() + (row + i) * c.dim, c.dim * sizeof(float));
      ++out;
    }
    row += len;
  }
  cpu::RmsNorm(selected, weights_.norm, rows, c.dim, static_cast<float>(c.norm_eps), selected);
  cpu::Linear(selected, rows, weights_.output, logits_local_.mutable_f32(), pool_);
  if (absl::Status s = GatherColumns(logits_local_.f32(), rows, c.vocab_size / weights_.world_size,
                                     logits_.mutable_f32());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = cpu::CheckFinite(logits_.f32(), rows * c.vocab_size,
                                        absl::StrFormat("in the logits (rank %d)", weights_.rank));
      !s.ok()) {
    return s;
  }
  return absl::Span<const float>(logits_.f32(), rows * c.vocab_size);
}

}  // namespace llama
