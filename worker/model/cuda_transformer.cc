#include "worker/model/cuda_transformer.h"

#include <cuda_runtime.h>
#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "ops/cuda/attention.h"
#include "ops/cuda/cublas_linear.h"
#include "ops/cuda/cuda_buffer.h"
#include "ops/cuda/cuda_graph.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/sampling.h"
#include "worker/model/cuda_layer_ops.h"
#include "worker/model/llama_forward.h"
#include "worker/model/rank_plan.h"
#include "worker/model/step_graphs.h"
#include "worker/model/step_plan.h"

namespace llama {

using cuda::CudaCall;

using cuda::CudaBuffer;
using cuda::GraphExec;
using cuda::Mirrored;

struct CudaTransformer::State {
  RankPlan plan;
  NcclCommunicator* nccl = nullptr;
  cudaStream_t stream = nullptr;
  std::unique_ptr<cuda::CublasLinear> linear;
  // The weights' device copies, and ModelWeights viewing them.
  std::vector<CudaBuffer> weight_buffers;
  ModelWeights weights;
  std::vector<CudaBuffer> cache_buffers;  // k and v of each layer.
  std::vector<KvCacheView> caches;
  CudaBuffer rope_cos, rope_sin, kv_head_of, decode_scratch;
  std::vector<CudaBuffer> work_buffers;  // WorkBuffers' list.
  Activations activations;               // Views of work_buffers.
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
  StepPlan step_plan;
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

  const ModelConfig& config() const { return plan.config(); }
  const RankGeometry& geometry() const { return plan.geometry; }
  // Create's steps, in order.
  absl::Status UploadWeights(const ModelWeights& host);
  absl::Status UploadWeight(const Tensor& host, Tensor* device);
  absl::Status AllocateKvCache();
  absl::Status UploadTables();
  absl::Status AllocateWorkBuffers();
  absl::Status AllocateStepArrays();
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

// Uploaded once; `weights` views the device copies.
absl::Status CudaTransformer::State::UploadWeights(const ModelWeights& host) {
  weights.config = host.config;
  weights.rank = host.rank;
  weights.world_size = host.world_size;
  weights.kv_head_begin = host.kv_head_begin;
  weights.layers.resize(host.layers.size());
  weight_buffers.reserve(3 + kLayerTensors.size() * host.layers.size());
  RETURN_IF_ERROR(UploadWeight(host.tok_embeddings, &weights.tok_embeddings));
  RETURN_IF_ERROR(UploadWeight(host.norm, &weights.norm));
  RETURN_IF_ERROR(UploadWeight(host.output, &weights.output));
  for (size_t i = 0; i < host.layers.size(); ++i) {
    for (Tensor LayerWeights::*t : kLayerTensors) RETURN_IF_ERROR(UploadWeight(host.layers[i].*t, &(weights.layers[i].*t)));
  }
  return absl::OkStatus();
}

absl::Status CudaTransformer::State::AllocateKvCache() {
  const ModelLimits& l = plan.limits;
  const size_t layer_bytes = l.kv_blocks * l.kv_block_size * geometry().kv_width() * DTypeSize(plan.kv_cache_dtype);
  cache_buffers = std::vector<CudaBuffer>(2 * config().n_layers);
  for (int64_t i = 0; i < config().n_layers; ++i) {
    CudaBuffer& k_cache = cache_buffers[2 * i];
    CudaBuffer& v_cache = cache_buffers[2 * i + 1];
    RETURN_IF_ERROR(k_cache.Allocate(layer_bytes));
    RETURN_IF_ERROR(v_cache.Allocate(layer_bytes));
    caches.push_back({k_cache.get<void>(), v_cache.get<void>(), plan.kv_cache_dtype, l.kv_block_size});
  }
  return absl::OkStatus();
}

absl::Status CudaTransformer::State::UploadTables() {
  const RankGeometry& g = geometry();
  const RopeTable rope = RopeTableOf(plan);
  RETURN_IF_ERROR(rope_cos.Upload(rope.cos_table().data(), rope.cos_table().size() * sizeof(float)));
  RETURN_IF_ERROR(rope_sin.Upload(rope.sin_table().data(), rope.sin_table().size() * sizeof(float)));
  RETURN_IF_ERROR(kv_head_of.Upload(g.kv_head_of.data(), g.kv_head_of.size() * sizeof(int32_t)));
  return decode_scratch.Allocate(cuda::DecodeAttentionScratchFloats(plan.limits.max_batch_size, g.local_heads,
                                                                    g.head_dim, plan.limits.max_seq_len) *
                                 sizeof(float));
}

absl::Status CudaTransformer::State::AllocateWorkBuffers() {
  for (const WorkBuffer& buffer : WorkBuffers(geometry(), Sampling::kOnDevice)) {
    work_buffers.emplace_back();
    RETURN_IF_ERROR(work_buffers.back().Allocate(plan.limits.max_step_tokens * buffer.width * sizeof(float)));
    activations.*buffer.member = work_buffers.back().get();
  }
  return absl::OkStatus();
}

absl::Status CudaTransformer::State::AllocateStepArrays() {
  const ModelLimits& l = plan.limits;
  for (Mirrored<int32_t>* m :
       {&tokens, &positions, &table_of, &logit_rows, &chosen_tokens, &tile_first, &tile_rows}) {
    RETURN_IF_ERROR(m->Allocate(l.max_step_tokens));
  }
  RETURN_IF_ERROR(block_tables.Allocate(l.max_batch_size * l.blocks_per_sequence()));
  RETURN_IF_ERROR(flags.Allocate(config().n_layers + 1));
  RETURN_IF_ERROR(sampling.Allocate(l.max_step_tokens));
  RETURN_IF_ERROR(chosen_logprobs.Allocate(l.max_step_tokens));
  RETURN_IF_ERROR(host_logits.Allocate(l.max_step_tokens * config().vocab_size * sizeof(float)));
  step = {tokens.on_device(),
          positions.on_device(),
          {block_tables.on_device(), table_of.on_device(), l.blocks_per_sequence()},
          logit_rows.on_device(),
          tile_first.on_device(),
          tile_rows.on_device(),
          0};
  return absl::OkStatus();
}

absl::Status CudaTransformer::State::Stage(absl::Span<const SequenceChunk> chunks) {
  RETURN_IF_ERROR(PlanStep(chunks, plan.limits, step_plan));
  const StepPlan& p = step_plan;
  std::copy(p.tokens.begin(), p.tokens.end(), tokens.staged());
  std::copy(p.positions.begin(), p.positions.end(), positions.staged());
  std::copy(p.table_of.begin(), p.table_of.end(), table_of.staged());
  std::copy(p.block_tables.begin(), p.block_tables.end(), block_tables.staged());
  std::copy(p.logit_rows.begin(), p.logit_rows.end(), logit_rows.staged());
  // Decode steps keep fixed shapes for the graphs: no tiles.
  step.tiles = 0;
  if (ChooseAttentionKernel(p, geometry().head_dim, plan.limits.max_batch_size) != AttentionKernel::kTiles) {
    return absl::OkStatus();
  }
  for (const PlannedChunk& chunk : p.chunks) {
    for (int64_t i = 0; i < chunk.len; i += cuda::kAttentionTileRows) {
      tile_first.staged()[step.tiles] = static_cast<int32_t>(chunk.first_row + i);
      tile_rows.staged()[step.tiles++] = static_cast<int32_t>(std::min<int64_t>(cuda::kAttentionTileRows, chunk.len - i));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaTransformer::State::EnqueueStep(bool choose) {
  const ModelConfig& c = config();
  const int64_t n = step_plan.n(), rows = step_plan.rows();
  RETURN_IF_ERROR(tokens.Upload(n, stream));
  RETURN_IF_ERROR(positions.Upload(n, stream));
  RETURN_IF_ERROR(table_of.Upload(n, stream));
  RETURN_IF_ERROR(block_tables.Upload(step_plan.block_tables.size(), stream));
  RETURN_IF_ERROR(logit_rows.Upload(rows, stream));
  if (step.tiles > 0) {
    RETURN_IF_ERROR(tile_first.Upload(step.tiles, stream));
    RETURN_IF_ERROR(tile_rows.Upload(step.tiles, stream));
  }
  if (choose) RETURN_IF_ERROR(sampling.Upload(rows, stream));
  RETURN_IF_ERROR(
      CudaCall(cudaMemsetAsync(flags.on_device(), 0, (c.n_layers + 1) * sizeof(int32_t), stream), "cudaMemsetAsync"));
  RETURN_IF_ERROR(LlamaForward(*ops, geometry(), weights, step_plan, caches, activations));
  if (choose) {
    RETURN_IF_ERROR(cuda::SampleRows(activations.logits, rows, c.vocab_size, sampling.on_device(),
                                     activations.probabilities, chosen_tokens.on_device(),
                                     chosen_logprobs.on_device(), stream));
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
  const int64_t n_layers = config().n_layers;
  for (int i = 0; i <= n_layers; ++i) {
    if (flags.staged()[i] != 0) {
      return absl::DataLossError(
          absl::StrCat("non-finite activation ", FiniteCheckPlace(i, n_layers, geometry().rank)));
    }
  }
  return absl::OkStatus();
}

CudaTransformer::CudaTransformer(std::unique_ptr<State> state) : state_(std::move(state)) {}
CudaTransformer::~CudaTransformer() = default;

const ModelLimits& CudaTransformer::limits() const { return state_->plan.limits; }
int CudaTransformer::graphs_captured() const { return state_->graphs.captures(); }

absl::StatusOr<std::unique_ptr<CudaTransformer>> CudaTransformer::Create(const ModelWeights& weights,
                                                                         NcclCommunicator* nccl,
                                                                         const RankPlan& plan) {
  const int rank = nccl != nullptr ? nccl->rank() : 0, world_size = nccl != nullptr ? nccl->world_size() : 1;
  if (rank != plan.geometry.rank || world_size != plan.geometry.world_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the plan is for rank %d of %d but the communicator is rank %d of %d", plan.geometry.rank,
        plan.geometry.world_size, rank, world_size));
  }
  if (const std::optional<DType> block = FirstBlockDType(weights)) {
    return absl::UnimplementedError(absl::StrFormat(
        "%s shards run on CPUs only for now (--device=cpu); for the GPU convert with --dtype=bf16",
        *block == DType::kQ8_0 ? "int8 (q8_0)" : DTypeName(*block)));
  }
  // Said up front, in the flags' terms, rather than as a failed cudaMalloc.
  size_t free_bytes = 0, total_bytes = 0;
  RETURN_IF_ERROR(CudaCall(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
  RETURN_IF_ERROR(CheckMemory(plan, Sampling::kOnDevice, WeightBytes(plan.geometry, weights.layers[0].wq.dtype()),
                              static_cast<double>(free_bytes), "this GPU"));

  auto state = std::make_unique<State>();
  State& st = *state;
  st.plan = plan;
  st.nccl = nccl;
  const ModelConfig& c = plan.config();
  const ModelLimits& l = plan.limits;
  RETURN_IF_ERROR(CudaCall(cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  if (nccl != nullptr) nccl->set_stream(st.stream);
  ASSIGN_OR_RETURN(st.linear, cuda::CublasLinear::Create(st.stream,
                                                         l.max_step_tokens * std::max(c.dim, plan.geometry.local_hidden)));
  RETURN_IF_ERROR(st.UploadWeights(weights));
  RETURN_IF_ERROR(st.AllocateKvCache());
  RETURN_IF_ERROR(st.UploadTables());
  RETURN_IF_ERROR(st.AllocateWorkBuffers());
  RETURN_IF_ERROR(st.AllocateStepArrays());
  st.ops = std::make_unique<CudaLayerOps>(
      st.geometry(), st.stream, st.linear.get(), nccl, &st.step,
      DeviceModelTables{st.rope_cos.get(), st.rope_sin.get(), st.kv_head_of.get<int32_t>(), st.decode_scratch.get(),
                        l.max_batch_size, l.max_seq_len},
      st.activations.gathered, st.flags.on_device());
  // The zeroing and the pageable uploads above ran on the legacy default
  // stream, which the non-blocking model stream does not wait for.
  RETURN_IF_ERROR(CudaCall(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
  st.graphs = StepGraphs<GraphExec>(l.max_batch_size, plan.cuda_graphs);
  return std::unique_ptr<CudaTransformer>(new CudaTransformer(std::move(state)));
}

absl::StatusOr<absl::Span<const float>> CudaTransformer::Forward(absl::Span<const SequenceChunk> chunks) {
  State& st = *state_;
  if (chunks.empty()) return absl::Span<const float>();
  RETURN_IF_ERROR(st.Stage(chunks));
  RETURN_IF_ERROR(st.EnqueueStep(/*choose=*/false));
  const size_t bytes = st.step_plan.rows() * st.config().vocab_size * sizeof(float);
  RETURN_IF_ERROR(CudaCall(
      cudaMemcpyAsync(st.host_logits.get(), st.activations.logits, bytes, cudaMemcpyDeviceToHost, st.stream),
      "cudaMemcpyAsync(logits)"));
  RETURN_IF_ERROR(st.Finish());
  return absl::Span<const float>(st.host_logits.get(), st.step_plan.rows() * st.config().vocab_size);
}

absl::Status CudaTransformer::ForwardAndChoose(absl::Span<const SequenceChunk> chunks,
                                               absl::Span<const TokenChoice> choices, absl::Span<ChosenToken> chosen) {
  RETURN_IF_ERROR(CheckChooseArguments(chunks, choices, chosen, limits().vocab_size));
  if (chunks.empty()) return absl::OkStatus();
  // Alternatives' log-probabilities, adjusted or masked logits and the
  // top_k, min_p and typical_p filters come from the host's copy of the logits
  // (the device sampler keeps only the chosen token and does top-p alone).
  if (std::any_of(choices.begin(), choices.end(), [](const TokenChoice& c) {
        return c.top_logprobs > 0 || !c.adjustments.empty() || c.allowed != nullptr ||
               (c.sampling.temperature > 0 &&
                (c.sampling.top_k > 0 || c.sampling.min_p > 0 || c.sampling.typical_p < 1));
      })) {
    return LanguageModel::ForwardAndChoose(chunks, choices, chosen);
  }
  State& st = *state_;
  RETURN_IF_ERROR(st.Stage(chunks));
  for (size_t i = 0; i < choices.size(); ++i) {
    st.sampling.staged()[i] = {choices[i].sampling.temperature, choices[i].sampling.top_p, choices[i].uniform};
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
        LOG(WARNING) << "rank " << st.plan.geometry.rank << ": decode steps run without CUDA graphs: " << s;
        s = st.graphs.CaptureFailed(s, st.plan.geometry.world_size);
        if (s.ok()) s = st.EnqueueStep(/*choose=*/true);
      }
      break;
    case StepMode::kEager:
      s = st.EnqueueStep(/*choose=*/true);
      break;
  }
  RETURN_IF_ERROR(s);
  RETURN_IF_ERROR(st.Finish());
  for (int64_t i = 0; i < st.step_plan.rows(); ++i) {
    chosen[i].token = st.chosen_tokens.staged()[i];
    chosen[i].logprob = st.chosen_logprobs.staged()[i];
    chosen[i].top_count = 0;
  }
  return absl::OkStatus();
}

}  // namespace llama
