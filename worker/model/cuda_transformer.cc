#include "worker/model/cuda_transformer.h"

#include <cuda_runtime.h>
#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "ops/cpu/rope.h"
#include "ops/cuda/cublas_linear.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/kernels.h"
#include "worker/model/step_graphs.h"

namespace llama {

using cuda::CudaCall;

namespace {

// Device memory (cudaMalloc, zeroed), or page-locked host memory
// (cudaMallocHost: copies from and to it are asynchronous and can be
// captured in a graph at fixed addresses); freed with its match.
class CudaBuffer {
 public:
  enum class Kind { kDevice, kPinnedHost };
  explicit CudaBuffer(Kind kind = Kind::kDevice) : kind_(kind) {}
  ~CudaBuffer() {
    if (data_ == nullptr) return;
    if (kind_ == Kind::kDevice) {
      cudaFree(data_);
    } else {
      cudaFreeHost(data_);
    }
  }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;

  absl::Status Allocate(size_t bytes) {
    bytes = std::max<size_t>(bytes, 1);
    if (kind_ == Kind::kPinnedHost) return CudaCall(cudaMallocHost(&data_, bytes), "cudaMallocHost");
    if (absl::Status s = CudaCall(cudaMalloc(&data_, bytes), "cudaMalloc"); !s.ok()) {
      return absl::ResourceExhaustedError(absl::StrFormat("%s (%d bytes)", s.message(), bytes));
    }
    return CudaCall(cudaMemset(data_, 0, bytes), "cudaMemset");
  }
  // Device memory only.
  absl::Status Upload(const void* host, size_t bytes) {
    if (absl::Status s = Allocate(bytes); !s.ok()) return s;
    return CudaCall(cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  template <typename T = float>
  T* get() const {
    return static_cast<T*>(data_);
  }

 private:
  Kind kind_;
  void* data_ = nullptr;
};

// A weight on the device, with its dtype and shape.
struct DeviceWeight {
  CudaBuffer data;
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
  CudaBuffer k_cache, v_cache;
};

// An instantiated CUDA graph, destroyed with its owner.
class GraphExec {
 public:
  explicit GraphExec(cudaGraphExec_t exec) : exec_(exec) {}
  GraphExec(GraphExec&& other) noexcept : exec_(std::exchange(other.exec_, nullptr)) {}
  GraphExec& operator=(GraphExec&& other) noexcept {
    std::swap(exec_, other.exec_);
    return *this;
  }
  ~GraphExec() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  }
  cudaGraphExec_t get() const { return exec_; }

 private:
  cudaGraphExec_t exec_;
};

// A step's inputs and outputs that cross between host and device: a pinned
// staging buffer and a device buffer each, [capacity] elements of T.
template <typename T>
struct Mirrored {
  CudaBuffer host{CudaBuffer::Kind::kPinnedHost};
  CudaBuffer device;
  absl::Status Allocate(int64_t capacity) {
    absl::Status s = host.Allocate(capacity * sizeof(T));
    if (s.ok()) s = device.Allocate(capacity * sizeof(T));
    return s;
  }
  T* staged() const { return host.get<T>(); }
  T* on_device() const { return device.get<T>(); }
  absl::Status Upload(int64_t count, cudaStream_t stream) const {
    return CudaCall(cudaMemcpyAsync(on_device(), staged(), count * sizeof(T), cudaMemcpyHostToDevice, stream),
                    "cudaMemcpyAsync(host to device)");
  }
  absl::Status Download(int64_t count, cudaStream_t stream) const {
    return CudaCall(cudaMemcpyAsync(staged(), on_device(), count * sizeof(T), cudaMemcpyDeviceToHost, stream),
                    "cudaMemcpyAsync(device to host)");
  }
};

}  // namespace

struct CudaTransformer::State {
  ModelConfig config;
  int rank = 0, world_size = 1;
  TransformerOptions options;
  NcclCommunicator* nccl = nullptr;
  cudaStream_t stream = nullptr;
  std::unique_ptr<cuda::CublasLinear> linear;
  int64_t local_heads = 0, local_kv_heads = 0, head_dim = 0, local_hidden = 0;
  DeviceWeight tok_embeddings, norm, output;
  std::vector<DeviceLayer> layers;
  CudaBuffer rope_cos, rope_sin, kv_head_of;
  CudaBuffer x, xb, q, k, v, attention, projection, gate, up, gathered, logits_local, logits, probs;
  // Per step: tokens, positions and slots of each token; the rows whose
  // logits are wanted; sampling settings and results; non-finite flags, one
  // per layer and one for the logits (index n_layers).
  Mirrored<int32_t> tokens, positions, slots, out_rows, chosen_tokens, flags;
  // Prefill steps' attention tiles (cuda::AttentionTiles): first row and
  // row count of each; decode steps (one token per chunk) attend row by row.
  Mirrored<int32_t> tile_first, tile_rows;
  int64_t tiles = 0;
  Mirrored<cuda::RowSampling> sampling;
  Mirrored<float> chosen_logprobs;
  // Prompt scoring's logits. Pinned: a copy to pageable memory blocks the
  // host inside cudaMemcpyAsync, where a hung NCCL peer would stall it
  // before Finish's watchdog ever ran.
  CudaBuffer host_logits{CudaBuffer::Kind::kPinnedHost};
  StepGraphs<GraphExec> graphs{1, false};

  ~State() {
    if (stream == nullptr) return;
    cudaStreamSynchronize(stream);
    // Everything bound to the stream goes before it.
    linear.reset();
    if (nccl != nullptr) nccl->set_stream(nullptr);
    cudaStreamDestroy(stream);
  }

  absl::Status AllReduceSum(float* data, int64_t count) {
    return nccl == nullptr ? absl::OkStatus() : nccl->AllReduceSum(data, count);
  }
  absl::Status GatherColumns(const float* local, int64_t n, int64_t width, float* full);
  absl::Status Layer(int index, int64_t n);
  // Fills the staging buffers; *n: tokens in the step, *rows: logit rows.
  absl::Status Stage(absl::Span<const SequenceChunk> chunks, int64_t* n, int64_t* rows);
  // The whole step, from the staged inputs to the staged outputs.
  absl::Status EnqueueStep(int64_t n, int64_t rows, bool choose);
  absl::Status CaptureAndLaunch(int key, int64_t n, int64_t rows);
  // Waits for the step (watching NCCL when there are peers), then checks
  // the NaN flags.
  absl::Status Finish();
};

absl::Status CudaTransformer::State::GatherColumns(const float* local, int64_t n, int64_t width, float* full) {
  if (world_size == 1) {
    return CudaCall(cudaMemcpyAsync(full, local, n * width * sizeof(float), cudaMemcpyDeviceToDevice, stream),
                    "cudaMemcpyAsync");
  }
  float* staged = gathered.get();
  if (absl::Status s = nccl->AllGather(local, n * width, staged); !s.ok()) return s;
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

absl::Status CudaTransformer::State::Layer(int index, int64_t n) {
  DeviceLayer& w = layers[index];
  const int64_t dim = config.dim, kv_width = local_kv_heads * head_dim;
  const float eps = static_cast<float>(config.norm_eps);
  const auto run = [&](const float* in, const DeviceWeight& weight, float* out) {
    return linear->Run(in, n, weight.data.get<void>(), weight.dtype, weight.rows, weight.cols, out);
  };
  const cuda::KvCacheView cache{w.k_cache.get<void>(), w.v_cache.get<void>(), options.kv_cache_dtype,
                                options.max_seq_len * kv_width};
  const int32_t* row_positions = positions.on_device();
  const bool by_tiles = tiles > 0;
  absl::Status s = cuda::RmsNorm(x.get(), w.attention_norm.data.get<void>(), w.attention_norm.dtype, n, dim, eps,
                                 xb.get(), stream);
  if (s.ok()) s = run(xb.get(), w.wq, q.get());
  if (s.ok()) s = run(xb.get(), w.wk, k.get());
  if (s.ok()) s = run(xb.get(), w.wv, v.get());
  if (s.ok()) s = cuda::Rope(q.get(), n, local_heads, head_dim, row_positions, rope_cos.get(), rope_sin.get(), stream);
  if (s.ok()) s = cuda::Rope(k.get(), n, local_kv_heads, head_dim, row_positions, rope_cos.get(), rope_sin.get(), stream);
  if (s.ok()) s = cuda::StoreKv(k.get(), v.get(), n, kv_width, slots.on_device(), row_positions, cache, stream);
  if (s.ok() && by_tiles) {
    s = cuda::AttentionTiles(q.get(), tile_first.on_device(), tile_rows.on_device(), tiles, slots.on_device(),
                             row_positions, cache, kv_head_of.get<int32_t>(), local_heads, local_kv_heads, head_dim,
                             attention.get(), stream);
  } else if (s.ok()) {
    s = cuda::Attention(q.get(), n, slots.on_device(), row_positions, cache, kv_head_of.get<int32_t>(), local_heads,
                        local_kv_heads, head_dim, attention.get(), stream);
  }
  if (s.ok()) s = run(attention.get(), w.wo, projection.get());
  if (s.ok()) s = AllReduceSum(projection.get(), n * dim);
  if (s.ok()) s = cuda::AddInPlace(x.get(), projection.get(), n * dim, stream);
  if (s.ok()) s = cuda::RmsNorm(x.get(), w.ffn_norm.data.get<void>(), w.ffn_norm.dtype, n, dim, eps, xb.get(), stream);
  if (s.ok()) s = run(xb.get(), w.w1, gate.get());
  if (s.ok()) s = run(xb.get(), w.w3, up.get());
  if (s.ok()) s = cuda::SwiGlu(gate.get(), up.get(), n * local_hidden, stream);
  if (s.ok()) s = run(gate.get(), w.w2, projection.get());
  if (s.ok()) s = AllReduceSum(projection.get(), n * dim);
  if (s.ok()) s = cuda::AddInPlace(x.get(), projection.get(), n * dim, stream);
  if (s.ok()) s = cuda::FlagNonFinite(x.get(), n * dim, flags.on_device(), index, stream);
  return s;
}

absl::Status CudaTransformer::State::Stage(absl::Span<const SequenceChunk> chunks, int64_t* n, int64_t* rows) {
  *n = *rows = 0;
  tiles = 0;
  bool decode = true;
  for (const SequenceChunk& chunk : chunks) {
    const int64_t len = chunk.tokens.size();
    if (chunk.slot < 0 || chunk.slot >= options.max_batch_size || len == 0 || chunk.start_pos < 0 ||
        chunk.start_pos + len > options.max_seq_len) {
      return absl::InvalidArgumentError(
          absl::StrFormat("chunk for slot %d at [%d, +%d) does not fit the cache", chunk.slot, chunk.start_pos, len));
    }
    if (*n + len > options.max_step_tokens) {
      return absl::InvalidArgumentError(
          absl::StrFormat("more than %d tokens in one step", options.max_step_tokens));
    }
    for (int64_t i = 0; i < len; ++i) {
      if (chunk.tokens[i] < 0 || chunk.tokens[i] >= config.vocab_size) {
        return absl::InvalidArgumentError(absl::StrFormat("token id %d outside the vocabulary", chunk.tokens[i]));
      }
      tokens.staged()[*n + i] = chunk.tokens[i];
      positions.staged()[*n + i] = static_cast<int32_t>(chunk.start_pos + i);
      slots.staged()[*n + i] = chunk.slot;
      if (chunk.all_logits || i == len - 1) out_rows.staged()[(*rows)++] = static_cast<int32_t>(*n + i);
      if (i % cuda::kAttentionTileRows == 0) {
        tile_first.staged()[tiles] = static_cast<int32_t>(*n + i);
        tile_rows.staged()[tiles++] = static_cast<int32_t>(std::min<int64_t>(cuda::kAttentionTileRows, len - i));
      }
    }
    decode &= len == 1;
    *n += len;
  }
  // Tiles pay off once a chunk has several rows; decode steps keep fixed
  // shapes for the graphs. AttentionTiles takes head_dim <= 128.
  if (decode || head_dim > 128) tiles = 0;
  return absl::OkStatus();
}

absl::Status CudaTransformer::State::EnqueueStep(int64_t n, int64_t rows, bool choose) {
  const ModelConfig& c = config;
  absl::Status s = tokens.Upload(n, stream);
  if (s.ok()) s = positions.Upload(n, stream);
  if (s.ok()) s = slots.Upload(n, stream);
  if (s.ok()) s = out_rows.Upload(rows, stream);
  if (s.ok() && tiles > 0) s = tile_first.Upload(tiles, stream);
  if (s.ok() && tiles > 0) s = tile_rows.Upload(tiles, stream);
  if (s.ok() && choose) s = sampling.Upload(rows, stream);
  if (s.ok()) {
    s = CudaCall(cudaMemsetAsync(flags.on_device(), 0, (c.n_layers + 1) * sizeof(int32_t), stream),
                 "cudaMemsetAsync");
  }
  const int64_t local_dim = tok_embeddings.cols;
  if (s.ok()) {
    s = cuda::EmbeddingLookup(tokens.on_device(), n, tok_embeddings.data.get<void>(), tok_embeddings.dtype, local_dim,
                              xb.get(), stream);
  }
  if (s.ok()) s = GatherColumns(xb.get(), n, local_dim, x.get());
  for (int i = 0; i < c.n_layers && s.ok(); ++i) s = Layer(i, n);
  if (s.ok()) s = cuda::GatherRows(x.get(), out_rows.on_device(), rows, c.dim, xb.get(), stream);
  if (s.ok()) {
    s = cuda::RmsNorm(xb.get(), norm.data.get<void>(), norm.dtype, rows, c.dim, static_cast<float>(c.norm_eps),
                      xb.get(), stream);
  }
  if (s.ok()) {
    s = linear->Run(xb.get(), rows, output.data.get<void>(), output.dtype, output.rows, output.cols,
                    logits_local.get());
  }
  if (s.ok()) s = GatherColumns(logits_local.get(), rows, c.vocab_size / world_size, logits.get());
  if (s.ok()) s = cuda::FlagNonFinite(logits.get(), rows * c.vocab_size, flags.on_device(), c.n_layers, stream);
  if (s.ok() && choose) {
    s = cuda::SampleRows(logits.get(), rows, c.vocab_size, sampling.on_device(), probs.get(),
                         chosen_tokens.on_device(), chosen_logprobs.on_device(), stream);
    if (s.ok()) s = chosen_tokens.Download(rows, stream);
    if (s.ok()) s = chosen_logprobs.Download(rows, stream);
  }
  if (s.ok()) s = flags.Download(c.n_layers + 1, stream);
  return s;
}

absl::Status CudaTransformer::State::CaptureAndLaunch(int key, int64_t n, int64_t rows) {
  if (absl::Status s = CudaCall(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                                "cudaStreamBeginCapture");
      !s.ok()) {
    return s;
  }
  const absl::Status enqueued = EnqueueStep(n, rows, /*choose=*/true);
  cudaGraph_t graph = nullptr;
  const absl::Status ended = CudaCall(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  absl::Status s = enqueued.ok() ? ended : enqueued;
  cudaGraphExec_t exec = nullptr;
  if (s.ok()) s = CudaCall(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (!s.ok()) {
    cudaGetLastError();  // A failed capture's error must not be reported by the next launch.
    return s;
  }
  graphs.Captured(key, GraphExec(exec));
  return CudaCall(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
}

absl::Status CudaTransformer::State::Finish() {
  absl::Status s = nccl != nullptr ? nccl->Wait("the model step")
                                   : CudaCall(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  if (!s.ok()) return s;
  for (int i = 0; i < config.n_layers; ++i) {
    if (flags.staged()[i] != 0) {
      return absl::DataLossError(absl::StrFormat("non-finite activation after layer %d (rank %d)", i, rank));
    }
  }
  if (flags.staged()[config.n_layers] != 0) {
    return absl::DataLossError(absl::StrFormat("non-finite value in the logits (rank %d)", rank));
  }
  return absl::OkStatus();
}

CudaTransformer::CudaTransformer(std::unique_ptr<State> state) : state_(std::move(state)) {}
CudaTransformer::~CudaTransformer() = default;

int64_t CudaTransformer::vocab_size() const { return state_->config.vocab_size; }
int CudaTransformer::max_batch_size() const { return state_->options.max_batch_size; }
int64_t CudaTransformer::max_seq_len() const { return state_->options.max_seq_len; }
int64_t CudaTransformer::max_step_tokens() const { return state_->options.max_step_tokens; }
int CudaTransformer::graphs_captured() const { return state_->graphs.captures(); }

absl::StatusOr<std::unique_ptr<CudaTransformer>> CudaTransformer::Create(const ModelWeights& weights,
                                                                         NcclCommunicator* nccl,
                                                                         const TransformerOptions& options) {
  const int rank = nccl != nullptr ? nccl->rank() : 0, world_size = nccl != nullptr ? nccl->world_size() : 1;
  if (rank != weights.rank || world_size != weights.world_size) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the shard is for rank %d of %d but this process is rank %d of %d; convert for world size %d", weights.rank,
        weights.world_size, rank, world_size, world_size));
  }
  if (absl::Status s = ValidateModelConfig(weights.config, "model config"); !s.ok()) return s;
  if (!IsFloat16Or32(options.kv_cache_dtype)) {
    return absl::InvalidArgumentError(absl::StrFormat("KV cache of %s: expected f32, bf16 or f16",
                                                      DTypeName(options.kv_cache_dtype)));
  }
  if (options.max_batch_size < 1 || options.max_seq_len < 1 || options.max_step_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--max_batch_size (%d), --max_seq_len (%d) and the step size (%d) must be positive", options.max_batch_size,
        options.max_seq_len, options.max_step_tokens));
  }
  auto state = std::make_unique<State>();
  State& st = *state;
  st.config = weights.config;
  st.rank = rank;
  st.world_size = world_size;
  st.options = options;
  st.nccl = nccl;
  const ModelConfig& c = st.config;
  st.head_dim = c.head_dim();
  st.local_heads = c.n_heads / world_size;
  st.local_kv_heads = weights.layers[0].wk.dim(0) / st.head_dim;
  st.local_hidden = c.ffn_hidden_dim() / world_size;
  const int64_t t = options.max_step_tokens, kv_width = st.local_kv_heads * st.head_dim;

  // Said up front, in the flags' terms, rather than as a failed cudaMalloc.
  size_t free_bytes = 0, total_bytes = 0;
  if (absl::Status s = CudaCall(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"); !s.ok()) return s;
  double weight_bytes = weights.tok_embeddings.bytes() + weights.norm.bytes() + weights.output.bytes();
  for (const LayerWeights& l : weights.layers) {
    for (const Tensor* w : {&l.attention_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.w1, &l.w2, &l.w3}) {
      weight_bytes += w->bytes();
    }
  }
  const double cache_bytes = 2.0 * c.n_layers * options.max_batch_size * options.max_seq_len * kv_width *
                             DTypeSize(options.kv_cache_dtype);
  const double work_bytes =
      static_cast<double>(t) * (8.0 * c.dim + 2.0 * st.local_hidden + 2.0 * c.vocab_size + 3.0 * c.vocab_size) * 4;
  if (weight_bytes + cache_bytes + work_bytes > free_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the weights (%.2f GB), the KV cache (%.2f GB for --max_batch_size=%d x --max_seq_len=%d, %s) and work "
        "buffers (%.2f GB) need more than the %.2f GB free on this GPU; lower --max_batch_size or --max_seq_len, "
        "use --kv_cache_dtype=bf16, or split the model over more GPUs",
        weight_bytes / 1e9, cache_bytes / 1e9, options.max_batch_size, options.max_seq_len,
        DTypeName(options.kv_cache_dtype), work_bytes / 1e9, free_bytes / 1e9));
  }

  if (absl::Status s = CudaCall(cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking), "cudaStreamCreate");
      !s.ok()) {
    return s;
  }
  if (nccl != nullptr) nccl->set_stream(st.stream);
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
    const size_t layer_cache_bytes =
        options.max_batch_size * options.max_seq_len * kv_width * DTypeSize(options.kv_cache_dtype);
    if (s.ok()) s = d.k_cache.Allocate(layer_cache_bytes);
    if (s.ok()) s = d.v_cache.Allocate(layer_cache_bytes);
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
  for (const auto& [buffer, elements] : {std::pair<CudaBuffer*, int64_t>{&st.x, t * c.dim}, {&st.xb, t * c.dim},
                                         {&st.q, t * st.local_heads * st.head_dim}, {&st.k, t * kv_width},
                                         {&st.v, t * kv_width}, {&st.attention, t * st.local_heads * st.head_dim},
                                         {&st.projection, t * c.dim}, {&st.gate, t * st.local_hidden},
                                         {&st.up, t * st.local_hidden}, {&st.gathered, t * std::max(c.dim, c.vocab_size)},
                                         {&st.logits_local, t * (c.vocab_size / world_size)},
                                         {&st.logits, t * c.vocab_size}, {&st.probs, t * c.vocab_size}}) {
    if (s.ok()) s = buffer->Allocate(elements * f);
  }
  for (Mirrored<int32_t>* m : {&st.tokens, &st.positions, &st.slots, &st.out_rows, &st.chosen_tokens, &st.tile_first,
                               &st.tile_rows}) {
    if (s.ok()) s = m->Allocate(t);
  }
  if (s.ok()) s = st.flags.Allocate(c.n_layers + 1);
  if (s.ok()) s = st.sampling.Allocate(t);
  if (s.ok()) s = st.chosen_logprobs.Allocate(t);
  if (s.ok()) s = st.host_logits.Allocate(t * c.vocab_size * f);
  // The zeroing and the pageable uploads above ran on the legacy default
  // stream, which the non-blocking model stream does not wait for.
  if (s.ok()) s = CudaCall(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  if (!s.ok()) return s;
  st.graphs = StepGraphs<GraphExec>(options.max_batch_size, options.cuda_graphs);
  return std::unique_ptr<CudaTransformer>(new CudaTransformer(std::move(state)));
}

absl::StatusOr<absl::Span<const float>> CudaTransformer::Forward(absl::Span<const SequenceChunk> chunks) {
  State& st = *state_;
  if (chunks.empty()) return absl::Span<const float>();
  int64_t n = 0, rows = 0;
  absl::Status s = st.Stage(chunks, &n, &rows);
  if (s.ok()) s = st.EnqueueStep(n, rows, /*choose=*/false);
  if (s.ok()) {
    s = CudaCall(cudaMemcpyAsync(st.host_logits.get(), st.logits.get(), rows * st.config.vocab_size * sizeof(float),
                                 cudaMemcpyDeviceToHost, st.stream),
                 "cudaMemcpyAsync(logits)");
  }
  if (s.ok()) s = st.Finish();
  if (!s.ok()) return s;
  return absl::Span<const float>(st.host_logits.get(), rows * st.config.vocab_size);
}

absl::Status CudaTransformer::ForwardAndChoose(absl::Span<const SequenceChunk> chunks,
                                               absl::Span<const TokenChoice> choices, absl::Span<ChosenToken> chosen) {
  if (absl::Status s = CheckChooseArguments(chunks, choices, chosen); !s.ok()) return s;
  if (chunks.empty()) return absl::OkStatus();
  State& st = *state_;
  int64_t n = 0, rows = 0;
  if (absl::Status s = st.Stage(chunks, &n, &rows); !s.ok()) return s;
  for (size_t i = 0; i < choices.size(); ++i) {
    st.sampling.staged()[i] = {choices[i].temperature, choices[i].top_p, choices[i].uniform};
  }
  const std::optional<int> key = st.graphs.KeyOf(chunks);
  absl::Status s;
  switch (st.graphs.Plan(key)) {
    case StepMode::kReplay:
      s = CudaCall(cudaGraphLaunch(st.graphs.graph(*key).get(), st.stream), "cudaGraphLaunch");
      break;
    case StepMode::kCapture:
      s = st.CaptureAndLaunch(*key, n, rows);
      if (!s.ok()) {
        LOG(WARNING) << "rank " << st.rank << ": decode steps run without CUDA graphs: " << s;
        s = st.graphs.CaptureFailed(s, st.world_size);
        if (s.ok()) s = st.EnqueueStep(n, rows, /*choose=*/true);
      }
      break;
    case StepMode::kEager:
      s = st.EnqueueStep(n, rows, /*choose=*/true);
      break;
  }
  if (s.ok()) s = st.Finish();
  if (!s.ok()) return s;
  for (int64_t i = 0; i < rows; ++i) chosen[i] = {st.chosen_tokens.staged()[i], st.chosen_logprobs.staged()[i]};
  return absl::OkStatus();
}

}  // namespace llama
