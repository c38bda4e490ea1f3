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
#include "ops/cuda/attention.h"
#include "ops/cuda/cublas_linear.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/sampling.h"
#include "ops/status_macros.h"
#include "worker/model/cuda_layer_ops.h"
#include "worker/model/llama_forward.h"
#include "worker/model/model_options.h"
#include "worker/model/step_graphs.h"
#include "worker/model/step_plan.h"

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
  CudaBuffer(CudaBuffer&& other) noexcept : kind_(other.kind_), data_(std::exchange(other.data_, nullptr)) {}

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
    RETURN_IF_ERROR(Allocate(bytes));
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
  RankGeometry geometry;
  TransformerOptions options;
  NcclCommunicator* nccl = nullptr;
  cudaStream_t stream = nullptr;
  std::unique_ptr<cuda::CublasLinear> linear;
  // The weights' device copies, and ModelWeights viewing them.
  std::vector<CudaBuffer> weight_buffers;
  ModelWeights weights;
  std::vector<CudaBuffer> cache_buffers;  // k and v of each layer.
  std::vector<KvCacheView> caches;
  CudaBuffer rope_cos, rope_sin, kv_head_of, decode_scratch;
  CudaBuffer x, xb, q, k, v, attention, projection, gate, up, gathered, logits_local, logits, probs;
  Activations activations;
  // Per step: tokens, positions and block tables of each token (table_of)
  // and of each sequence (block_tables, max_batch_size x table_stride); the
  // rows whose logits are wanted; sampling settings and results; non-finite
  // flags, one per layer and one for the logits (index n_layers).
  Mirrored<int32_t> tokens, positions, table_of, block_tables, logit_rows, chosen_tokens, flags;
  // Prefill steps' attention tiles (cuda::AttentionTiles): first row and
  // row count of each; decode steps (one token per chunk) attend row by row.
  Mirrored<int32_t> tile_first, tile_rows;
  Mirrored<cuda::RowSampling> sampling;
  Mirrored<float> chosen_logprobs;
  // Prompt scoring's logits. Pinned: a copy to pageable memory blocks the
  // host inside cudaMemcpyAsync, where a hung NCCL peer would stall it
  // before Finish's watchdog ever ran.
  CudaBuffer host_logits{CudaBuffer::Kind::kPinnedHost};
  DeviceStepArrays step;
  std::unique_ptr<CudaLayerOps> ops;
  StepPlan plan;
  StepGraphs<GraphExec> graphs{1, false};

  ~State() {
    if (stream == nullptr) return;
    cudaStreamSynchronize(stream);
    // Everything bound to the stream goes before it.
    ops.reset();
    linear.reset();
    if (nccl != nullptr) nccl->set_stream(nullptr);
    cudaStreamDestroy(stream);
  }

  const ModelConfig& config() const { return geometry.config; }
  absl::Status UploadWeight(const Tensor& host, Tensor* device);
  // Plans the step and fills the staging buffers.
  absl::Status Stage(absl::Span<const SequenceChunk> chunks);
  // The whole step, from the staged inputs to the staged outputs.
  absl::Status EnqueueStep(bool choose);
  absl::Status CaptureAndLaunch(int key);
  // Waits for the step (watching NCCL when there are peers), then checks
  // the non-finite flags.
  absl::Status Finish();
};

absl::Status CudaTransformer::State::UploadWeight(const Tensor& host, Tensor* device) {
  weight_buffers.emplace_back();
  RETURN_IF_ERROR(weight_buffers.back().Upload(host.raw(), host.bytes()));
  *device = Tensor::View(host.dtype(), host.shape(), weight_buffers.back().get<void>());
  return absl::OkStatus();
}

absl::Status CudaTransformer::State::Stage(absl::Span<const SequenceChunk> chunks) {
  RETURN_IF_ERROR(PlanStep(chunks, StepLimitsOf(options, config().vocab_size), plan));
  std::copy(plan.tokens.begin(), plan.tokens.end(), tokens.staged());
  std::copy(plan.positions.begin(), plan.positions.end(), positions.staged());
  std::copy(plan.table_of.begin(), plan.table_of.end(), table_of.staged());
  std::copy(plan.block_tables.begin(), plan.block_tables.end(), block_tables.staged());
  std::copy(plan.logit_rows.begin(), plan.logit_rows.end(), logit_rows.staged());
  // Tiles pay off once a chunk has several rows; decode steps keep fixed
  // shapes for the graphs. AttentionTiles takes head_dim <= 128.
  step.tiles = 0;
  if (plan.decode_only || geometry.head_dim > 128) return absl::OkStatus();
  for (const PlannedChunk& chunk : plan.chunks) {
    for (int64_t i = 0; i < chunk.len; i += cuda::kAttentionTileRows) {
      tile_first.staged()[step.tiles] = static_cast<int32_t>(chunk.first_row + i);
      tile_rows.staged()[step.tiles++] = static_cast<int32_t>(std::min<int64_t>(cuda::kAttentionTileRows, chunk.len - i));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaTransformer::State::EnqueueStep(bool choose) {
  const ModelConfig& c = config();
  const int64_t n = plan.n(), rows = plan.rows();
  RETURN_IF_ERROR(tokens.Upload(n, stream));
  RETURN_IF_ERROR(positions.Upload(n, stream));
  RETURN_IF_ERROR(table_of.Upload(n, stream));
  RETURN_IF_ERROR(block_tables.Upload(plan.block_tables.size(), stream));
  RETURN_IF_ERROR(logit_rows.Upload(rows, stream));
  if (step.tiles > 0) {
    RETURN_IF_ERROR(tile_first.Upload(step.tiles, stream));
    RETURN_IF_ERROR(tile_rows.Upload(step.tiles, stream));
  }
  if (choose) RETURN_IF_ERROR(sampling.Upload(rows, stream));
  RETURN_IF_ERROR(
      CudaCall(cudaMemsetAsync(flags.on_device(), 0, (c.n_layers + 1) * sizeof(int32_t), stream), "cudaMemsetAsync"));
  RETURN_IF_ERROR(LlamaForward(*ops, geometry, weights, plan, caches, activations));
  if (choose) {
    RETURN_IF_ERROR(cuda::SampleRows(logits.get(), rows, c.vocab_size, sampling.on_device(), probs.get(),
                                     chosen_tokens.on_device(), chosen_logprobs.on_device(), stream));
    RETURN_IF_ERROR(chosen_tokens.Download(rows, stream));
    RETURN_IF_ERROR(chosen_logprobs.Download(rows, stream));
  }
  return flags.Download(c.n_layers + 1, stream);
}

absl::Status CudaTransformer::State::CaptureAndLaunch(int key) {
  RETURN_IF_ERROR(
      CudaCall(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture"));
  const absl::Status enqueued = EnqueueStep(/*choose=*/true);
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
  RETURN_IF_ERROR(nccl != nullptr ? nccl->Wait("the model step")
                                  : CudaCall(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
  const ModelConfig& c = config();
  for (int i = 0; i < c.n_layers; ++i) {
    if (flags.staged()[i] != 0) {
      return absl::DataLossError(
          absl::StrFormat("non-finite activation after layer %d (rank %d)", i, geometry.rank));
    }
  }
  if (flags.staged()[c.n_layers] != 0) {
    return absl::DataLossError(absl::StrFormat("non-finite activation in the logits (rank %d)", geometry.rank));
  }
  return absl::OkStatus();
}

CudaTransformer::CudaTransformer(std::unique_ptr<State> state) : state_(std::move(state)) {}
CudaTransformer::~CudaTransformer() = default;

int64_t CudaTransformer::vocab_size() const { return state_->config().vocab_size; }
int CudaTransformer::max_batch_size() const { return state_->options.max_batch_size; }
int64_t CudaTransformer::max_seq_len() const { return state_->options.max_seq_len; }
int64_t CudaTransformer::max_step_tokens() const { return state_->options.max_step_tokens; }
int64_t CudaTransformer::kv_block_size() const { return state_->options.kv_block_size; }
int64_t CudaTransformer::kv_blocks() const { return KvBlocksOf(state_->options); }
int CudaTransformer::graphs_captured() const { return state_->graphs.captures(); }

absl::StatusOr<std::unique_ptr<CudaTransformer>> CudaTransformer::Create(const ModelWeights& weights,
                                                                         NcclCommunicator* nccl,
                                                                         const TransformerOptions& options) {
  const int rank = nccl != nullptr ? nccl->rank() : 0, world_size = nccl != nullptr ? nccl->world_size() : 1;
  ASSIGN_OR_RETURN(RankGeometry geometry, CheckModel(weights, rank, world_size, options));
  if (weights.layers[0].wq.dtype() == DType::kQ8_0 || weights.output.dtype() == DType::kQ8_0) {
    return absl::UnimplementedError(
        "int8 (q8_0) shards run on CPUs only for now (--device=cpu); for the GPU convert with --dtype=bf16");
  }
  // Said up front, in the flags' terms, rather than as a failed cudaMalloc.
  size_t free_bytes = 0, total_bytes = 0;
  RETURN_IF_ERROR(CudaCall(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
  RETURN_IF_ERROR(CheckMemory(geometry, options, geometry.WeightBytes(weights.layers[0].wq.dtype()),
                              static_cast<double>(free_bytes), "this GPU"));

  auto state = std::make_unique<State>();
  State& st = *state;
  st.geometry = std::move(geometry);
  st.options = options;
  st.nccl = nccl;
  const RankGeometry& g = st.geometry;
  const ModelConfig& c = g.config;
  const int64_t t = options.max_step_tokens;
  RETURN_IF_ERROR(CudaCall(cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  if (nccl != nullptr) nccl->set_stream(st.stream);
  ASSIGN_OR_RETURN(st.linear, cuda::CublasLinear::Create(st.stream, t * std::max(c.dim, g.local_hidden)));

  // Uploaded once; st.weights views the device copies.
  st.weights.config = weights.config;
  st.weights.rank = weights.rank;
  st.weights.world_size = weights.world_size;
  st.weights.kv_head_begin = weights.kv_head_begin;
  st.weights.layers.resize(c.n_layers);
  st.weight_buffers.reserve(3 + 9 * c.n_layers);
  RETURN_IF_ERROR(st.UploadWeight(weights.tok_embeddings, &st.weights.tok_embeddings));
  RETURN_IF_ERROR(st.UploadWeight(weights.norm, &st.weights.norm));
  RETURN_IF_ERROR(st.UploadWeight(weights.output, &st.weights.output));
  const size_t layer_cache_bytes =
      KvBlocksOf(options) * options.kv_block_size * g.kv_width() * DTypeSize(options.kv_cache_dtype);
  st.cache_buffers = std::vector<CudaBuffer>(2 * c.n_layers);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const LayerWeights& l = weights.layers[i];
    LayerWeights& d = st.weights.layers[i];
    for (const auto& [device, host] : {std::pair<Tensor*, const Tensor*>{&d.attention_norm, &l.attention_norm},
                                       {&d.wq, &l.wq}, {&d.wk, &l.wk}, {&d.wv, &l.wv}, {&d.wo, &l.wo},
                                       {&d.ffn_norm, &l.ffn_norm}, {&d.w1, &l.w1}, {&d.w2, &l.w2}, {&d.w3, &l.w3}}) {
      RETURN_IF_ERROR(st.UploadWeight(*host, device));
    }
    CudaBuffer& k_cache = st.cache_buffers[2 * i];
    CudaBuffer& v_cache = st.cache_buffers[2 * i + 1];
    RETURN_IF_ERROR(k_cache.Allocate(layer_cache_bytes));
    RETURN_IF_ERROR(v_cache.Allocate(layer_cache_bytes));
    st.caches.push_back({k_cache.get<void>(), v_cache.get<void>(), options.kv_cache_dtype, options.kv_block_size});
  }

  const cpu::RopeTable rope(g.head_dim, 2 * options.max_seq_len, c.rope_theta, c.rope_scaling);
  RETURN_IF_ERROR(st.rope_cos.Upload(rope.cos_table().data(), rope.cos_table().size() * sizeof(float)));
  RETURN_IF_ERROR(st.rope_sin.Upload(rope.sin_table().data(), rope.sin_table().size() * sizeof(float)));
  RETURN_IF_ERROR(st.kv_head_of.Upload(g.kv_head_of.data(), g.kv_head_of.size() * sizeof(int32_t)));
  RETURN_IF_ERROR(st.decode_scratch.Allocate(
      cuda::DecodeAttentionScratchFloats(options.max_batch_size, g.local_heads, g.head_dim, options.max_seq_len) *
      sizeof(float)));
  const size_t f = sizeof(float);
  for (const auto& [buffer, width] : {std::pair<CudaBuffer*, int64_t>{&st.x, c.dim}, {&st.xb, c.dim},
                                      {&st.q, g.q_width()}, {&st.k, g.kv_width()}, {&st.v, g.kv_width()},
                                      {&st.attention, g.q_width()}, {&st.projection, c.dim},
                                      {&st.gate, g.local_hidden}, {&st.up, g.local_hidden},
                                      {&st.gathered, std::max(c.dim, c.vocab_size)},
                                      {&st.logits_local, g.local_vocab}, {&st.logits, c.vocab_size},
                                      {&st.probs, c.vocab_size}}) {
    RETURN_IF_ERROR(buffer->Allocate(t * width * f));
  }
  st.activations = {st.x.get(),         st.xb.get(),   st.q.get(),  st.k.get(),
                    st.v.get(),         st.attention.get(), st.projection.get(), st.gate.get(),
                    st.up.get(),        st.logits_local.get(), st.logits.get()};
  for (Mirrored<int32_t>* m : {&st.tokens, &st.positions, &st.table_of, &st.logit_rows, &st.chosen_tokens,
                               &st.tile_first, &st.tile_rows}) {
    RETURN_IF_ERROR(m->Allocate(t));
  }
  const int64_t table_stride = StepLimitsOf(options, c.vocab_size).table_stride();
  RETURN_IF_ERROR(st.block_tables.Allocate(options.max_batch_size * table_stride));
  RETURN_IF_ERROR(st.flags.Allocate(c.n_layers + 1));
  RETURN_IF_ERROR(st.sampling.Allocate(t));
  RETURN_IF_ERROR(st.chosen_logprobs.Allocate(t));
  RETURN_IF_ERROR(st.host_logits.Allocate(t * c.vocab_size * f));
  st.step = {st.tokens.on_device(),
             st.positions.on_device(),
             {st.block_tables.on_device(), st.table_of.on_device(), table_stride},
             st.logit_rows.on_device(),
             st.tile_first.on_device(),
             st.tile_rows.on_device(),
             0};
  st.ops = std::make_unique<CudaLayerOps>(
      g, st.stream, st.linear.get(), nccl, &st.step,
      DeviceModelTables{st.rope_cos.get(), st.rope_sin.get(), st.kv_head_of.get<int32_t>(), st.decode_scratch.get(),
                        options.max_batch_size, options.max_seq_len},
      st.gathered.get(),
      st.flags.on_device());
  // The zeroing and the pageable uploads above ran on the legacy default
  // stream, which the non-blocking model stream does not wait for.
  RETURN_IF_ERROR(CudaCall(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
  st.graphs = StepGraphs<GraphExec>(options.max_batch_size, options.cuda_graphs);
  return std::unique_ptr<CudaTransformer>(new CudaTransformer(std::move(state)));
}

absl::StatusOr<absl::Span<const float>> CudaTransformer::Forward(absl::Span<const SequenceChunk> chunks) {
  State& st = *state_;
  if (chunks.empty()) return absl::Span<const float>();
  RETURN_IF_ERROR(st.Stage(chunks));
  RETURN_IF_ERROR(st.EnqueueStep(/*choose=*/false));
  const size_t bytes = st.plan.rows() * st.config().vocab_size * sizeof(float);
  RETURN_IF_ERROR(CudaCall(
      cudaMemcpyAsync(st.host_logits.get(), st.logits.get(), bytes, cudaMemcpyDeviceToHost, st.stream),
      "cudaMemcpyAsync(logits)"));
  RETURN_IF_ERROR(st.Finish());
  return absl::Span<const float>(st.host_logits.get(), st.plan.rows() * st.config().vocab_size);
}

absl::Status CudaTransformer::ForwardAndChoose(absl::Span<const SequenceChunk> chunks,
                                               absl::Span<const TokenChoice> choices, absl::Span<ChosenToken> chosen) {
  RETURN_IF_ERROR(CheckChooseArguments(chunks, choices, chosen, vocab_size()));
  if (chunks.empty()) return absl::OkStatus();
  // Alternatives' log-probabilities, adjusted logits and the top_k and
  // min_p filters come from the host's copy of the logits (the device
  // sampler keeps only the chosen token and does top-p alone).
  if (std::any_of(choices.begin(), choices.end(), [](const TokenChoice& c) {
        return c.top_logprobs > 0 || !c.adjustments.empty() || (c.temperature > 0 && (c.top_k > 0 || c.min_p > 0));
      })) {
    return LanguageModel::ForwardAndChoose(chunks, choices, chosen);
  }
  State& st = *state_;
  RETURN_IF_ERROR(st.Stage(chunks));
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
      s = st.CaptureAndLaunch(*key);
      if (!s.ok()) {
        LOG(WARNING) << "rank " << st.geometry.rank << ": decode steps run without CUDA graphs: " << s;
        s = st.graphs.CaptureFailed(s, st.geometry.world_size);
        if (s.ok()) s = st.EnqueueStep(/*choose=*/true);
      }
      break;
    case StepMode::kEager:
      s = st.EnqueueStep(/*choose=*/true);
      break;
  }
  RETURN_IF_ERROR(s);
  RETURN_IF_ERROR(st.Finish());
  for (int64_t i = 0; i < st.plan.rows(); ++i) {
    chosen[i].token = st.chosen_tokens.staged()[i];
    chosen[i].logprob = st.chosen_logprobs.staged()[i];
    chosen[i].top_count = 0;
  }
  return absl::OkStatus();
}

}  // namespace llama
