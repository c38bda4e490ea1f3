#include "worker/cuda_transformer.h"

#include <cuda_runtime.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "ops/cpu/rope.h"
#include "ops/cuda/cublas_linear.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/kernels.h"

namespace llama {

using cuda::CudaCall;

// A device allocation, freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  absl::Status Allocate(size_t bytes) {
    if (absl::Status s = CudaCall(cudaMalloc(&data_, bytes == 0 ? 1 : bytes), "cudaMalloc"); !s.ok()) {
      return absl::ResourceExhaustedError(absl::StrFormat("%s (%d bytes)", s.message(), bytes));
    }
    return CudaCall(cudaMemset(data_, 0, bytes == 0 ? 1 : bytes), "cudaMemset");
  }
  absl::Status Upload(const void* host, size_t bytes) {
    if (absl::Status s = Allocate(bytes); !s.ok()) return s;
    return CudaCall(cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  template <typename T = float>
  T* get() const {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
};

// A weight on the device, with its dtype and shape.
struct DeviceWeight {
  DeviceBuffer data;
  DType dtype = DType::kF32;
  int64_t rows = 0, cols = 0;

  absl::Status Upload(const Tensor& t) {
    dtype = t.dtype();
    rows = t.dim(0);
    cols = t.rank() > 1 ? t.dim(1) : 1;
    return data.Upload(t.raw(), t.bytes());
  }
};

struct DeviceLayer {
  DeviceWeight attention_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3;
  DeviceBuffer k_cache, v_cache;
};

struct CudaTransformer::State {
  ModelConfig config;
  int rank = 0, world_size = 1;
  TransformerOptions options;
  Communicator* communicator = nullptr;
  cudaStream_t stream = nullptr;
  std::unique_ptr<cuda::CublasLinear> linear;
  int64_t local_heads = 0, local_kv_heads = 0, head_dim = 0, local_hidden = 0;
  DeviceWeight tok_embeddings, norm, output;
  std::vector<DeviceLayer> layers;
  DeviceBuffer rope_cos, rope_sin, kv_head_of;
  DeviceBuffer x, xb, q, k, v, attention, projection, gate, up, gathered, logits_local, logits;
  DeviceBuffer tokens, positions, flags;
  std::vector<int32_t> host_tokens, host_positions, host_flags;
  std::vector<float> host_logits;

  ~State() {
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  absl::Status GatherColumns(const float* local, int64_t n, int64_t width, float* full);
  absl::Status Layer(int index, absl::Span<const SequenceChunk> chunks, int64_t n);
};

absl::Status CudaTransformer::State::GatherColumns(const float* local, int64_t n, int64_t width, float* full) {
  if (world_size == 1) {
    return CudaCall(cudaMemcpyAsync(full, local, n * width * sizeof(float), cudaMemcpyDeviceToDevice, stream),
                    "cudaMemcpyAsync");
  }
  float* staged = gathered.get();
  if (absl::Status s = communicator->AllGather(local, n * width, staged); !s.ok()) return s;
  // [ws][n][width] -> [n][ws * width]: one strided copy per rank.
  for (int r = 0; r < world_size; ++r) {
    if (absl::Status s = CudaCall(cudaMemcpy2DAsync(full + r * width, world_size * width * sizeof(float),
                                                    staged + r * n * width, width * sizeof(float),
                                                    width * sizeof(float), n, cudaMemcpyDeviceToDevice, stream),
                                  "cudaMemcpy2DAsync");
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status CudaTransformer::State::Layer(int index, absl::Span<const SequenceChunk> chunks, int64_t n) {
  DeviceLayer& w = layers[index];
  const int64_t dim = config.dim, q_width = local_heads * head_dim, kv_width = local_kv_heads * head_dim;
  const float eps = static_cast<float>(config.norm_eps);
  const auto run = [&](const float* in, const DeviceWeight& weight, float* out) {
    return linear->Run(in, n, weight.data.get<void>(), weight.dtype, weight.rows, weight.cols, out);
  };
  absl::Status s = cuda::RmsNorm(x.get(), w.attention_norm.data.get<void>(), w.attention_norm.dtype, n, dim, eps,
                                 xb.get(), stream);
  if (s.ok()) s = run(xb.get(), w.wq, q.get());
  if (s.ok()) s = run(xb.get(), w.wk, k.get());
  if (s.ok()) s = run(xb.get(), w.wv, v.get());
  if (s.ok()) s = cuda::Rope(q.get(), n, local_heads, head_dim, positions.get<int32_t>(), rope_cos.get(), rope_sin.get(), stream);
  if (s.ok()) s = cuda::Rope(k.get(), n, local_kv_heads, head_dim, positions.get<int32_t>(), rope_cos.get(), rope_sin.get(), stream);
  if (!s.ok()) return s;
  int64_t row = 0;
  for (const SequenceChunk& chunk : chunks) {
    const int64_t len = chunk.tokens.size();
    float* k_cache = w.k_cache.get() + chunk.slot * options.max_seq_len * kv_width;
    float* v_cache = w.v_cache.get() + chunk.slot * options.max_seq_len * kv_width;
    // A chunk's rows are consecutive positions: one copy each into the cache.
    s = CudaCall(cudaMemcpyAsync(k_cache + chunk.start_pos * kv_width, k.get() + row * kv_width,
                                 len * kv_width * sizeof(float), cudaMemcpyDeviceToDevice, stream),
                 "cudaMemcpyAsync");
    if (s.ok()) {
      s = CudaCall(cudaMemcpyAsync(v_cache + chunk.start_pos * kv_width, v.get() + row * kv_width,
                                   len * kv_width * sizeof(float), cudaMemcpyDeviceToDevice, stream),
                   "cudaMemcpyAsync");
    }
    if (s.ok()) {
      s = cuda::Attention(q.get() + row * q_width, k_cache, v_cache, kv_head_of.get<int32_t>(), chunk.start_pos, len,
                          local_heads, local_kv_heads, head_dim, attention.get() + row * q_width, stream);
    }
    if (!s.ok()) return s;
    row += len;
  }
  s = run(attention.get(), w.wo, projection.get());
  if (s.ok()) s = communicator->AllReduceSum(projection.get(), n * dim);
  if (s.ok()) s = cuda::AddInPlace(x.get(), projection.get(), n * dim, stream);
  if (s.ok()) s = cuda::RmsNorm(x.get(), w.ffn_norm.data.get<void>(), w.ffn_norm.dtype, n, dim, eps, xb.get(), stream);
  if (s.ok()) s = run(xb.get(), w.w1, gate.get());
  if (s.ok()) s = run(xb.get(), w.w3, up.get());
  if (s.ok()) s = cuda::SwiGlu(gate.get(), up.get(), n * local_hidden, stream);
  if (s.ok()) s = run(gate.get(), w.w2, projection.get());
  if (s.ok()) s = communicator->AllReduceSum(projection.get(), n * dim);
  if (s.ok()) s = cuda::AddInPlace(x.get(), projection.get(), n * dim, stream);
  if (s.ok()) s = cuda::FlagNonFinite(x.get(), n * dim, flags.get<int32_t>(), index, stream);
  return s;
}

CudaTransformer::CudaTransformer(std::unique_ptr<State> state) : state_(std::move(state)) {}
CudaTransformer::~CudaTransformer() = default;

int64_t CudaTransformer::vocab_size() const { return state_->config.vocab_size; }
int CudaTransformer::max_batch_size() const { return state_->options.max_batch_size; }
int64_t CudaTransformer::max_seq_len() const { return state_->options.max_seq_len; }
int64_t CudaTransformer::max_step_tokens() const { return state_->options.max_step_tokens; }

absl::StatusOr<std::unique_ptr<CudaTransformer>> CudaTransformer::Create(const ModelWeights& weights,
                                                                         Communicator* communicator,
                                                                         const TransformerOptions& options) {
  if (communicator->rank() != weights.rank || communicator->world_size() != weights.world_size) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the shard is for rank %d of %d but this process is rank %d of %d; convert for world size %d",
        weights.rank, weights.world_size, communicator->rank(), communicator->world_size(), communicator->world_size()));
  }
  if (absl::Status s = ValidateModelConfig(weights.config, "model config"); !s.ok()) return s;
  if (options.kv_cache_dtype != DType::kF32) {
    return absl::UnimplementedError(absl::StrFormat(
        "--kv_cache_dtype=%s: the CUDA backend keeps an f32 KV cache; use --kv_cache_dtype=f32 or --device=cpu",
        DTypeName(options.kv_cache_dtype)));
  }
  auto state = std::make_unique<State>();
  State& st = *state;
  st.config = weights.config;
  st.rank = weights.rank;
  st.world_size = weights.world_size;
  st.options = options;
  st.communicator = communicator;
  const ModelConfig& c = st.config;
  if (absl::Status s = CudaCall(cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking), "cudaStreamCreate"); !s.ok()) {
    return s;
  }
  st.head_dim = c.head_dim();
  st.local_heads = c.n_heads / st.world_size;
  st.local_kv_heads = weights.layers[0].wk.dim(0) / st.head_dim;
  st.local_hidden = c.ffn_hidden_dim() / st.world_size;
  const int64_t t = options.max_step_tokens, kv_width = st.local_kv_heads * st.head_dim;
  absl::StatusOr<std::unique_ptr<cuda::CublasLinear>> linear =
      cuda::CublasLinear::Create(st.stream, t * std::max(c.dim, st.local_hidden));
  if (!linear.ok()) return linear.status();
  st.linear = *std::move(linear);

  absl::Status s = st.tok_embeddings.Upload(weights.tok_embeddings);
  if (s.ok()) s = st.norm.Upload(weights.norm);
  if (s.ok()) s = st.output.Upload(weights.output);
  st.layers = std::vector<DeviceLayer>(c.n_layers);
  for (int64_t i = 0; i < c.n_layers && s.ok(); ++i) {
    const LayerWeights& l = weights.layers[i];
    DeviceLayer& d = st.layers[i];
    for (const auto& [device, host] : {std::pair<DeviceWeight*, const Tensor*>{&d.attention_norm, &l.attention_norm},
                                       {&d.wq, &l.wq}, {&d.wk, &l.wk}, {&d.wv, &l.wv}, {&d.wo, &l.wo},
                                       {&d.ffn_norm, &l.ffn_norm}, {&d.w1, &l.w1}, {&d.w2, &l.w2}, {&d.w3, &l.w3}}) {
      if (s.ok()) s = device->Upload(*host);
    }
    const size_t cache_bytes = options.max_batch_size * options.max_seq_len * kv_width * sizeof(float);
    if (s.ok()) s = d.k_cache.Allocate(cache_bytes);
    if (s.ok()) s = d.v_cache.Allocate(cache_bytes);
  }
  if (!s.ok()) return s;

  const cpu::RopeTable rope(st.head_dim, 2 * options.max_seq_len, c.rope_theta);
  std::vector<int32_t> kv_head_of;
  const int64_t group = c.n_heads / c.n_kv_heads;
  for (int64_t j = 0; j < st.local_heads; ++j) {
    kv_head_of.push_back(static_cast<int32_t>((st.rank * st.local_heads + j) / group - weights.kv_head_begin));
  }
  s = st.rope_cos.Upload(rope.cos_table().data(), rope.cos_table().size() * sizeof(float));
  if (s.ok()) s = st.rope_sin.Upload(rope.sin_table().data(), rope.sin_table().size() * sizeof(float));
  if (s.ok()) s = st.kv_head_of.Upload(kv_head_of.data(), kv_head_of.size() * sizeof(int32_t));
  const size_t f = sizeof(float);
  for (const auto& [buffer, elements] : {std::pair<DeviceBuffer*, int64_t>{&st.x, t * c.dim}, {&st.xb, t * c.dim},
                                         {&st.q, t * st.local_heads * st.head_dim}, {&st.k, t * kv_width},
                                         {&st.v, t * kv_width}, {&st.attention, t * st.local_heads * st.head_dim},
                                         {&st.projection, t * c.dim}, {&st.gate, t * st.local_hidden},
                                         {&st.up, t * st.local_hidden}, {&st.gathered, t * std::max(c.dim, c.vocab_size)},
                                         {&st.logits_local, t * (c.vocab_size / st.world_size)},
                                         {&st.logits, t * c.vocab_size}}) {
    if (s.ok()) s = buffer->Allocate(elements * f);
  }
  if (s.ok()) s = st.tokens.Allocate(t * sizeof(int32_t));
  if (s.ok()) s = st.positions.Allocate(t * sizeof(int32_t));
  if (s.ok()) s = st.flags.Allocate(c.n_layers * sizeof(int32_t));
  if (!s.ok()) return s;
  st.host_flags.resize(c.n_layers);
  st.host_logits.resize(t * c.vocab_size);
  return std::unique_ptr<CudaTransformer>(new CudaTransformer(std::move(state)));
}

absl::StatusOr<absl::Span<const float>> CudaTransformer::Forward(absl::Span<const SequenceChunk> chunks) {
  State& st = *state_;
  const ModelConfig& c = st.config;
  st.host_tokens.clear();
  st.host_positions.clear();
  int64_t rows = 0;
  for (const SequenceChunk& chunk : chunks) {
    if (chunk.slot < 0 || chunk.slot >= st.options.max_batch_size || chunk.tokens.empty() || chunk.start_pos < 0 ||
        chunk.start_pos + static_cast<int64_t>(chunk.tokens.size()) > st.options.max_seq_len) {
      return absl::InvalidArgumentError(absl::StrFormat("chunk for slot %d at [%d, +%d) does not fit the cache",
                                                        chunk.slot, chunk.start_pos, chunk.tokens.size()));
    }
    for (size_t i = 0; i < chunk.tokens.size(); ++i) {
      if (chunk.tokens[i] < 0 || chunk.tokens[i] >= c.vocab_size) {
        return absl::InvalidArgumentError(absl::StrFormat("token id %d outside the vocabulary", chunk.tokens[i]));
      }
      st.host_tokens.push_back(chunk.tokens[i]);
      st.host_positions.push_back(static_cast<int32_t>(chunk.start_pos + i));
    }
    rows += chunk.all_logits ? chunk.tokens.size() : 1;
  }
  const int64_t n = st.host_tokens.size();
  if (n > st.options.max_step_tokens) {
    return absl::InvalidArgumentError(absl::StrFormat("%d tokens in one step; at most %d", n, st.options.max_step_tokens));
  }
  absl::Status s = CudaCall(cudaMemcpyAsync(st.tokens.get<int32_t>(), st.host_tokens.data(), n * sizeof(int32_t),
                                            cudaMemcpyHostToDevice, st.stream),
                            "cudaMemcpyAsync");
  if (s.ok()) {
    s = CudaCall(cudaMemcpyAsync(st.positions.get<int32_t>(), st.host_positions.data(), n * sizeof(int32_t),
                                 cudaMemcpyHostToDevice, st.stream),
                 "cudaMemcpyAsync");
  }
  if (s.ok()) s = CudaCall(cudaMemsetAsync(st.flags.get(), 0, c.n_layers * sizeof(int32_t), st.stream), "cudaMemsetAsync");
  const int64_t local_dim = st.tok_embeddings.cols;
  if (s.ok()) {
    s = cuda::EmbeddingLookup(st.tokens.get<int32_t>(), n, st.tok_embeddings.data.get<void>(), st.tok_embeddings.dtype,
                              local_dim, st.xb.get(), st.stream);
  }
  if (s.ok()) s = st.GatherColumns(st.xb.get(), n, local_dim, st.x.get());
  for (int i = 0; i < c.n_layers && s.ok(); ++i) s = st.Layer(i, chunks, n);
  // The rows whose logits are wanted, packed.
  int64_t row = 0, out = 0;
  for (const SequenceChunk& chunk : chunks) {
    const int64_t len = chunk.tokens.size(), first = chunk.all_logits ? 0 : len - 1;
    if (s.ok()) {
      s = CudaCall(cudaMemcpyAsync(st.xb.get() + out * c.dim, st.x.get() + (row + first) * c.dim,
                                   (len - first) * c.dim * sizeof(float), cudaMemcpyDeviceToDevice, st.stream),
                   "cudaMemcpyAsync");
    }
    out += len - first;
    row += len;
  }
  if (s.ok()) s = cuda::RmsNorm(st.xb.get(), st.norm.data.get<void>(), st.norm.dtype, rows, c.dim,
                                static_cast<float>(c.norm_eps), st.xb.get(), st.stream);
  if (s.ok()) s = st.linear->Run(st.xb.get(), rows, st.output.data.get<void>(), st.output.dtype, st.output.rows,
                                 st.output.cols, st.logits_local.get());
  if (s.ok()) s = st.GatherColumns(st.logits_local.get(), rows, c.vocab_size / st.world_size, st.logits.get());
  if (s.ok()) {
    s = CudaCall(cudaMemcpyAsync(st.host_logits.data(), st.logits.get(), rows * c.vocab_size * sizeof(float),
                                 cudaMemcpyDeviceToHost, st.stream),
                 "cudaMemcpyAsync");
  }
  if (s.ok()) {
    s = CudaCall(cudaMemcpyAsync(st.host_flags.data(), st.flags.get(), c.n_layers * sizeof(int32_t),
                                 cudaMemcpyDeviceToHost, st.stream),
                 "cudaMemcpyAsync");
  }
  if (s.ok()) s = CudaCall(cudaStreamSynchronize(st.stream), "cudaStreamSynchronize");
  if (!s.ok()) return s;
  for (int i = 0; i < c.n_layers; ++i) {
    if (st.host_flags[i] != 0) {
      return absl::DataLossError(absl::StrFormat("non-finite activation after layer %d (rank %d)", i, st.rank));
    }
  }
  return absl::Span<const float>(st.host_logits.data(), rows * c.vocab_size);
}

}  // namespace llama
