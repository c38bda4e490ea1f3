// //tools:bench: prefill and decode throughput of one model, and peak RSS.
//
//   bench                                   synthetic model, random bf16 weights, on the CPU
//   bench --weights_dtype=fp16              the same with f16 weights
//   bench --dim=4096 --n_layers=32 ...      another synthetic shape
//   bench --shard=/path/rank-0-of-1.shard   a converted checkpoint
//   bench --device=cuda ...                 on a GPU (one rank)
//   bench --json_schema=s.json --tokenizer_path=tokenizer.model
//                                           decode also with every row held to a JSON Schema,
//                                           interleaved with plain decode (structured output's cost)
//   bench --verify_rows=5                   decode steps of 5 rows a sequence (speculative
//                                           decoding's verification of 4 guesses), interleaved
//                                           with plain decode
//
// The default shape (dim 2048, 22 layers, 32 heads, 4 KV heads, FFN 5632,
// vocab 32000; TinyLlama-1.1B) keeps a run to about a minute on 2 cores.
// Decode is memory-bound: the line "weights streamed" compares the bytes
// read per decode step with the machine's memory bandwidth (--mem_gbps).
// The model is built as the worker builds it (worker/rank_model.h), with
// the job's --kv_cache_dtype, --cuda_graphs, --threads and --device.

#include <immintrin.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "checkpoint/shard_format.h"
#include "ops/cpu/linear.h"
#include "ops/cpu/simd.h"
#include "ops/cpu/thread_pool.h"
#include "ops/dtype.h"
#include "ops/tensor.h"
#include "third_party/cuda/cuda_build_info.h"
#include "tools/bench_model.h"
#include "tools/local_ranks.h"
#include "tokenizer/tokenizer.h"
#include "tools/tool_main.h"
#include "worker/grammar/grammar.h"
#include "worker/grammar/token_matcher.h"
#include "worker/job.h"
#include "worker/job_flags.h"
#include "worker/model/model_weights.h"
#include "worker/model/rank_plan.h"
#include "worker/model/synthetic_weights.h"
#include "worker/rank_model.h"
#if LLAMA_WITH_CUDA
#include "ops/cuda/bandwidth.h"
#endif

DEFINE_int32(prefill_tokens, 128, "Prompt length for the prefill measurement.");
DEFINE_int32(prefill_repeats, 1, "Times the prefill is timed; the median is reported (a short prefill on a noisy "
                                 "machine needs several).");
DEFINE_int32(decode_tokens, 16, "Decode steps to time.");
DEFINE_int32(batch, 1, "Sequences decoded together.");
DEFINE_int32(verify_rows, 0, "Also time decode steps of this many rows a sequence (speculative decoding: the last "
                             "token and verify_rows - 1 guesses, a token chosen at each), interleaved with plain "
                             "decode; 0: not.");
DEFINE_int32(world_size, 1, "Tensor-parallel ranks (local processes over the TCP collective; synthetic model only).");
DEFINE_int64(weight_prefetch_bytes, -1, "CPU: how far ahead the integer (int8, q4_k, q6_k) decode kernels prefetch "
             "weights, in bytes; 0: not at all; -1: this CPU's default (2048 on Intel, 0 elsewhere).");
DEFINE_double(mem_gbps, 0, "Memory read bandwidth of this machine in GB/s, for the % of the limit. "
              "0: measured here: CPU by streaming 1 GB with every thread, cuda by a 1 GiB device-to-device copy "
              "(bytes read + written).");

namespace {

// The sum of p[0 .. n), n a multiple of 64, in four independent vector sums,
// so that the adds' latency cannot limit the loads (with one 8-float sum, a
// Xeon read 15.6-20.1 GB/s where a STREAM read kernel measured 20-26).
__attribute__((always_inline)) inline float SumOfV3OrBaselineImpl(const float* p, size_t n) {
  llama::cpu::simd::Float8 s[4] = {};
  for (size_t i = 0; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) s[k] += llama::cpu::simd::Load8(p + i + 8 * k);
  }
  return llama::cpu::simd::Sum(s[0] + s[1] + s[2] + s[3]);
}
LLAMA_DISPATCH_V3(float, SumOfV3OrBaseline, (const float* p, size_t n), (p, n))

// With 64-byte loads where the CPU has them, as the decode kernels use: a
// 2-vCPU Xeon (AVX-512) read 1 GB at 22 GB/s with 32-byte loads and at 32
// with these, while its kernels streamed a decode step's weights at 24-30.
// (Masked loads and no _mm512_reduce_add_ps: GCC 12 warns on their
// intrinsics' undefined inputs.)
__attribute__((target("avx512f"))) float SumOfAvx512(const float* p, size_t n) {
  __m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  for (size_t i = 0; i + 64 <= n; i += 64) {
    for (int k = 0; k < 4; ++k) s[k] = _mm512_add_ps(s[k], _mm512_maskz_loadu_ps(0xFFFF, p + i + 16 * k));
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, _mm512_add_ps(_mm512_add_ps(s[0], s[1]), _mm512_add_ps(s[2], s[3])));
  float sum = 0;
  for (float lane : lanes) sum += lane;
  return sum;
}

float SumOf(const float* p, size_t n) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512 ? SumOfAvx512(p, n) : SumOfV3OrBaseline(p, n);
}

// Read bandwidth of this machine: every thread sums its share of 1 GB (best
// of 5), the access pattern of a decode step's weights, in the memory they
// live in (Tensor::Zeros: 2 MB pages where the kernel gives them) and with
// AVX2 loads where the CPU has them: the baseline (SSE2) loop over 4 KB
// pages read 15 GB/s on a 2-vCPU Xeon where this reads 35.
absl::StatusOr<double> MeasureReadBandwidth(int threads) {
  const size_t count = (size_t{1} << 30) / sizeof(float);
  ASSIGN_OR_RETURN(llama::Tensor buffer, llama::Tensor::Zeros(llama::DType::kF32, {static_cast<int64_t>(count)}));
  float* data = buffer.mutable_f32();
  std::fill(data, data + count, 1.0f);
  llama::ThreadPool pool(threads);
  const size_t share = count / pool.size() / 64 * 64;
  double best = 0;
  for (int round = 0; round < 5; ++round) {
    std::vector<double> sums(pool.size(), 0);
    const auto start = std::chrono::steady_clock::now();
    pool.ParallelFor(pool.size(), 1, [&](int64_t begin, int64_t end) {
      for (int64_t part = begin; part < end; ++part) sums[part] = SumOf(data + share * part, share);
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, share * pool.size() * sizeof(float) / seconds / 1e9);
  }
  return best;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

namespace {

// The worker's plan for the job's flags, with the bench's own batch and
// lengths.
absl::StatusOr<llama::RankPlan> BenchPlan(const llama::JobFlags& flags, const llama::ModelWeights& weights, int rank) {
  ASSIGN_OR_RETURN(llama::TransformerOptions options, llama::TransformerOptionsFromFlags(flags, FLAGS_world_size));
  options.max_batch_size = FLAGS_batch;
  options.max_seq_len = FLAGS_prefill_tokens + FLAGS_decode_tokens + std::max(1, FLAGS_verify_rows);
  options.max_step_tokens = std::max(FLAGS_prefill_tokens, FLAGS_batch * std::max(1, FLAGS_verify_rows));
  return llama::PlanRank(weights, rank, FLAGS_world_size, options);
}

struct StepTimes {
  double prefill_seconds = 0;  // The median of --prefill_repeats.
  double prefill_fastest = 0, prefill_slowest = 0;
  double decode_seconds = 0;
  double constrained_decode_seconds = 0;  // With --json_schema.
  double verify_seconds = 0;              // With --verify_rows.
};

// Every row's choices held to --json_schema, in --tokenizer_path's
// vocabulary (structured output, worker/grammar/token_matcher.h).
struct Constraint {
  std::shared_ptr<llama::grammar::TokenAutomaton> automaton;
  std::vector<int> stop_ids;
};

absl::StatusOr<std::unique_ptr<Constraint>> ConstraintFromFlags(const llama::JobFlags& flags, int64_t vocab) {
  if (flags.json_schema.empty()) return nullptr;
  if (flags.tokenizer_path.empty()) {
    return absl::InvalidArgumentError("--json_schema needs --tokenizer_path (the vocabulary its masks are over)");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<llama::Tokenizer> tokenizer, llama::Tokenizer::Load(flags.tokenizer_path));
  if (tokenizer->vocab_size() != vocab) {
    return absl::InvalidArgumentError(absl::StrFormat("--tokenizer_path=%s has %d tokens; the model's vocabulary %d",
                                                      flags.tokenizer_path, tokenizer->vocab_size(), vocab));
  }
  ASSIGN_OR_RETURN(const std::string gbnf, llama::ReadJsonSchemaGrammar(flags.json_schema));
  ASSIGN_OR_RETURN(std::shared_ptr<const llama::grammar::Grammar> grammar, llama::grammar::Grammar::Parse(gbnf));
  auto constraint = std::make_unique<Constraint>();
  constraint->automaton = std::make_shared<llama::grammar::TokenAutomaton>(
      std::move(grammar), llama::grammar::TokenTrie::ForTokenizer(*tokenizer));
  constraint->stop_ids = tokenizer->stop_ids();
  return constraint;
}

// Decode as the generator does: each step feeds every row its last token
// and gets the next (greedy) back; on a GPU only the ids leave the device.
// With a constraint, each row's choice is masked as the engine masks it, a
// row that completes its grammar starting it again. With `rows` > 1 each
// sequence's step also carries rows - 1 guesses (copies of its last token)
// and chooses at each, as speculative decoding verifies them; the
// sequence then moves on by one position, as when no guess is kept.
absl::StatusOr<double> TimeDecode(llama::LanguageModel& model, const std::vector<std::vector<int32_t>>& tables,
                                  const Constraint* constraint, int rows = 1) {
  std::vector<int> next(FLAGS_batch, 1);
  std::vector<std::vector<int>> fed(FLAGS_batch, std::vector<int>(rows));
  std::vector<llama::SequenceChunk> chunks(FLAGS_batch);
  std::vector<llama::TokenChoice> choices(FLAGS_batch * rows);
  std::vector<llama::ChosenToken> chosen(FLAGS_batch * rows);
  std::vector<std::unique_ptr<llama::grammar::TokenMatcher>> matchers(FLAGS_batch);
  std::vector<std::shared_ptr<const llama::grammar::TokenMask>> masks(FLAGS_batch);
  std::chrono::steady_clock::time_point start;
  // Step 0 is a warm-up, untimed (max_seq_len has room for it).
  for (int step = 0; step <= FLAGS_decode_tokens; ++step) {
    if (step == 1) start = std::chrono::steady_clock::now();
    for (int b = 0; b < FLAGS_batch; ++b) {
      std::fill(fed[b].begin(), fed[b].end(), next[b]);
      chunks[b] = {tables[b], FLAGS_prefill_tokens + step, fed[b], false, rows - 1};
      if (constraint == nullptr) continue;
      if (matchers[b] == nullptr || matchers[b]->complete()) {
        ASSIGN_OR_RETURN(matchers[b], llama::grammar::TokenMatcher::Start(constraint->automaton));
      }
      masks[b] = matchers[b]->Allowed();
      choices[b].allowed = masks[b]->data();
      choices[b].also_allowed = matchers[b]->accepting() ? absl::MakeConstSpan(constraint->stop_ids)
                                                         : absl::Span<const int>();
    }
    RETURN_IF_ERROR(model.ForwardAndChoose(chunks, choices, absl::MakeSpan(chosen)));
    for (int b = 0; b < FLAGS_batch; ++b) {
      next[b] = chosen[b * rows].token;
      if (constraint == nullptr) continue;
      const std::vector<int>& stops = constraint->stop_ids;
      if (std::find(stops.begin(), stops.end(), next[b]) != stops.end()) {
        matchers[b].reset();
      } else {
        RETURN_IF_ERROR(matchers[b]->Accept(next[b]));
      }
    }
  }
  return Seconds(start);
}

absl::StatusOr<StepTimes> TimeSteps(llama::LanguageModel& model, const Constraint* constraint) {
  StepTimes times;
  std::vector<int> prompt(FLAGS_prefill_tokens);
  for (int i = 0; i < FLAGS_prefill_tokens; ++i) prompt[i] = (i * 7919) % model.limits().vocab_size;
  const std::vector<std::vector<int32_t>> tables = llama::SlotBlockTables(model, FLAGS_batch);
  // Warm-up, untimed: one prefill of sequence 0 (the timed one overwrites
  // its cache) allocates the kernels' per-thread buffers and faults in pages.
  RETURN_IF_ERROR(model.Forward({{tables[0], 0, prompt, false}}).status());
  // Prefill: one prompt in one pass (sequence 0); then the others. Each
  // repeat overwrites the same cache positions.
  std::vector<double> prefills;
  for (int repeat = 0; repeat < FLAGS_prefill_repeats; ++repeat) {
    auto start = std::chrono::steady_clock::now();
    for (int b = 0; b < FLAGS_batch; ++b) {
      RETURN_IF_ERROR(model.Forward({{tables[b], 0, prompt, false}}).status());
    }
    prefills.push_back(Seconds(start));
  }
  std::sort(prefills.begin(), prefills.end());
  times.prefill_seconds = prefills[prefills.size() / 2];
  times.prefill_fastest = prefills.front();
  times.prefill_slowest = prefills.back();

  ASSIGN_OR_RETURN(times.decode_seconds, TimeDecode(model, tables, nullptr));
  if (constraint != nullptr) {
    // Side by side: rounds alternate, each side's median kept.
    std::vector<double> plain = {times.decode_seconds}, constrained;
    for (int round = 0; round < 3; ++round) {
      ASSIGN_OR_RETURN(const double c, TimeDecode(model, tables, constraint));
      constrained.push_back(c);
      if (round < 2) {
        ASSIGN_OR_RETURN(const double p, TimeDecode(model, tables, nullptr));
        plain.push_back(p);
      }
    }
    std::sort(plain.begin(), plain.end());
    std::sort(constrained.begin(), constrained.end());
    times.decode_seconds = plain[1];
    times.constrained_decode_seconds = constrained[1];
  }
  if (FLAGS_verify_rows > 0) {
    // Side by side as above.
    std::vector<double> plain, verify;
    for (int round = 0; round < 3; ++round) {
      ASSIGN_OR_RETURN(const double p, TimeDecode(model, tables, nullptr));
      plain.push_back(p);
      ASSIGN_OR_RETURN(const double v, TimeDecode(model, tables, nullptr, FLAGS_verify_rows));
      verify.push_back(v);
    }
    std::sort(plain.begin(), plain.end());
    std::sort(verify.begin(), verify.end());
    times.decode_seconds = plain[1];
    times.verify_seconds = verify[1];
  }
  return times;
}

// What the weights are, counted before the model takes them: their bytes as
// stored (a GGUF import mixes q4_k and f16 layers), and the embedding's.
struct BenchWeights {
  llama::DType dtype;  // The first layer's wq: what a synthetic model was asked for.
  double bytes;
  double embedding_bytes;
};

// The model, how it ran (device, threads, kernels) and its KV cache.
void PrintSetup(const llama::RankPlan& plan, llama::Device device, const BenchWeights& weights) {
  const llama::DType weight_dtype = weights.dtype;
  const llama::ModelConfig& config = plan.config();
  std::printf("model:    dim %lld, %lld layers, %lld/%lld heads, FFN %lld, vocab %lld, %.2f GB of weights per rank (%s)\n",
              (long long)config.dim, (long long)config.n_layers, (long long)config.n_heads,
              (long long)config.n_kv_heads, (long long)config.ffn_hidden_dim(), (long long)config.vocab_size,
              weights.bytes / 1e9,
              FLAGS_shard.empty() ? absl::StrCat("synthetic ", llama::DTypeName(weight_dtype)).c_str() : FLAGS_shard.c_str());
  if (device == llama::Device::kCuda) {
    std::printf("device:   cuda (one GPU), CUDA graphs %s\n", plan.cuda_graphs ? "on" : "off");
  } else {
    std::printf("ranks:    %d%s, %d thread(s) each, %s prefill kernel, %s int8 kernel, %s q4_k and %s q6_k kernels\n",
                FLAGS_world_size, FLAGS_world_size > 1 ? " (tensor parallel over the TCP collective)" : "",
                plan.threads, std::string(llama::cpu::PrefillKernel()).c_str(),
                std::string(llama::cpu::Int8Kernel()).c_str(), std::string(llama::cpu::Q4KKernel()).c_str(),
                std::string(llama::cpu::Q6KKernel()).c_str());
    const int64_t ahead = llama::cpu::WeightPrefetchBytes();
    std::printf("          integer kernels prefetch weights %s\n",
                ahead == 0 ? "not at all" : absl::StrCat(ahead, " bytes ahead").c_str());
    if (plan.bf16_activations && weight_dtype == llama::DType::kBF16) {
      std::printf("          activations rounded to bf16 (--bf16_activations), %s kernel\n",
                  std::string(llama::cpu::Bf16ActivationsKernel()).c_str());
    }
    if (llama::IsBlockDType(weight_dtype)) {
      // The order ops/cpu/linear.h gives them: the tiles, then int8.
      const bool tiles = plan.bf16_activations && llama::cpu::AmxBf16Usable();
      std::printf("          prefill of %s weights: %s%s\n", llama::DTypeName(weight_dtype).data(),
                  tiles               ? "through AMX-BF16 tiles, x and the decoded weights rounded to bf16 "
                                        "(--bf16_activations)"
                  : plan.int8_prefill ? "activations quantized to int8 per row (--int8_prefill)"
                                      : "f32 activations, the weights widened into f32 panels (--int8_prefill=false)",
                  plan.bf16_activations && !tiles ? "; --bf16_activations changes nothing (no AMX-BF16 here)" : "");
    }
  }
  const llama::ModelLimits& l = plan.limits;
  std::printf("KV cache: %.2f GB per rank (%s, %lld blocks of %lld positions: batch %d x %lld positions)\n",
              llama::KvCacheBytes(plan) / 1e9, llama::DTypeName(plan.kv_cache_dtype).data(), (long long)l.kv_blocks,
              (long long)l.kv_block_size, l.max_batch_size, (long long)l.max_seq_len);
}

// Throughput, and the decode's weight stream against the memory limit.
void PrintTimes(const llama::RankPlan& plan, llama::Device device, const BenchWeights& weights,
                const StepTimes& times) {
  const double step_ms = 1000 * times.decode_seconds / FLAGS_decode_tokens;
  // The embedding table is read a row per token, not streamed.
  const double streamed_bytes = weights.bytes - weights.embedding_bytes;
  const double gbps = streamed_bytes / (times.decode_seconds / FLAGS_decode_tokens) / 1e9;
  const double prefill_tokens = static_cast<double>(FLAGS_batch) * FLAGS_prefill_tokens;
  std::printf("prefill:  %d x %d tokens in %.2f s = %.1f tokens/s", FLAGS_batch, FLAGS_prefill_tokens,
              times.prefill_seconds, prefill_tokens / times.prefill_seconds);
  if (FLAGS_prefill_repeats > 1) {
    std::printf(" (median of %d, %.1f-%.1f)", FLAGS_prefill_repeats, prefill_tokens / times.prefill_slowest,
                prefill_tokens / times.prefill_fastest);
  }
  std::printf("\n");
  std::printf("decode:   batch %d, %.1f ms/step = %.2f tokens/s\n", FLAGS_batch, step_ms,
              FLAGS_batch * 1000 / step_ms);
  if (times.constrained_decode_seconds > 0) {
    const double constrained_ms = 1000 * times.constrained_decode_seconds / FLAGS_decode_tokens;
    std::printf("decode with --json_schema: batch %d, %.1f ms/step (%.3f x plain decode; medians of 3 rounds each, "
                "interleaved)\n",
                FLAGS_batch, constrained_ms, constrained_ms / step_ms);
  }
  if (times.verify_seconds > 0) {
    const double verify_ms = 1000 * times.verify_seconds / FLAGS_decode_tokens;
    std::printf("verify:   batch %d, %d rows a sequence, %.1f ms/step (%.3f x plain decode; medians of 3 rounds each, "
                "interleaved)\n",
                FLAGS_batch, FLAGS_verify_rows, verify_ms, verify_ms / step_ms);
  }
  std::printf("weights streamed per decode step: %.2f GB/s (all ranks)", gbps * FLAGS_world_size);
  double limit = FLAGS_mem_gbps;
  if (limit <= 0 && device == llama::Device::kCpu) {
    absl::StatusOr<double> read = MeasureReadBandwidth(plan.threads * FLAGS_world_size);
    if (read.ok()) {
      limit = *read;
    } else {
      std::printf(" (the memory bandwidth could not be measured: %s)", std::string(read.status().message()).c_str());
    }
  }
#if LLAMA_WITH_CUDA
  if (limit <= 0 && device == llama::Device::kCuda) {
    absl::StatusOr<double> copy = llama::cuda::MeasureCopyBandwidth();
    if (copy.ok()) limit = *copy;
  }
#endif
  if (limit > 0) {
    std::printf(" = %.0f%% of the %.1f GB/s memory limit%s", 100 * gbps * FLAGS_world_size / limit, limit,
                FLAGS_mem_gbps > 0 ? "" : " (measured here)");
  }
}

absl::Status RunRank(const llama::RendezvousOptions& join) {
  const int rank = join.rank;
  const llama::JobFlags flags = llama::JobFlagsFromCommandLine();
  ASSIGN_OR_RETURN(const llama::Device device, llama::ChooseRankDevice(flags.device));
  ASSIGN_OR_RETURN(llama::ModelWeights weights, llama::BenchModelWeights(rank, FLAGS_world_size));
  const BenchWeights stats = {weights.layers[0].wq.dtype(), llama::StoredWeightBytes(weights),
                              static_cast<double>(weights.tok_embeddings.bytes())};
  ASSIGN_OR_RETURN(const llama::RankPlan plan, BenchPlan(flags, weights, rank));
  ASSIGN_OR_RETURN(llama::RankPeers peers, llama::JoinPeers(join, rank));
  ASSIGN_OR_RETURN(llama::RankModel made, llama::CreateRankModel(device, peers, std::move(weights), plan,
                                                                 std::chrono::seconds(600)));
  ASSIGN_OR_RETURN(const std::unique_ptr<Constraint> constraint,
                   ConstraintFromFlags(flags, made.model->limits().vocab_size));
  ASSIGN_OR_RETURN(const StepTimes times, TimeSteps(*made.model, constraint.get()));
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  if (peers.rendezvous) RETURN_IF_ERROR(peers.rendezvous->Finish());
  if (rank != 0) return absl::OkStatus();
  PrintSetup(plan, device, stats);
  PrintTimes(plan, device, stats, times);
  std::printf("\npeak RSS: %.2f GB\n", usage.ru_maxrss / 1e6);
  return absl::OkStatus();
}

}  // namespace

// The job's flags the bench takes: the model's, and structured output's.
std::vector<std::string> BenchJobFlags() {
  std::vector<std::string> names = llama::JobFlagNames(llama::JobFlagGroup::kRankModel);
  names.insert(names.end(), {"json_schema", "tokenizer_path"});
  return names;
}

int main(int argc, char** argv) {
  return llama::ToolMain(argc, argv, "bench", "Measures prefill and decode tokens/s of one model.",
                         [](const std::vector<std::string>&) -> absl::Status {
    // Checked once, before any rank starts.
    const llama::JobFlags job_flags = llama::JobFlagsFromCommandLine();
    RETURN_IF_ERROR(llama::CheckJobFlags(job_flags, /*need_input=*/false));
    ASSIGN_OR_RETURN(const llama::Device device, llama::ChooseRankDevice(FLAGS_device));
    for (const auto& [name, value] : {std::pair<const char*, int>{"prefill_tokens", FLAGS_prefill_tokens},
                                      {"prefill_repeats", FLAGS_prefill_repeats},
                                      {"decode_tokens", FLAGS_decode_tokens},
                                      {"batch", FLAGS_batch},
                                      {"world_size", FLAGS_world_size}}) {
      if (value < 1) return absl::InvalidArgumentError(absl::StrFormat("--%s=%d: expected at least 1", name, value));
    }
    if (FLAGS_verify_rows < 0 || FLAGS_verify_rows > 17) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--verify_rows=%d: expected 0 (not timed) to 17 (16 guesses)", FLAGS_verify_rows));
    }
    if (FLAGS_verify_rows > 0 && !job_flags.json_schema.empty()) {
      // Each is timed interleaved with its own plain decodes.
      return absl::InvalidArgumentError("--verify_rows and --json_schema are measured one at a time: give one");
    }
    if (FLAGS_weight_prefetch_bytes < -1 || FLAGS_weight_prefetch_bytes > (1 << 20)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--weight_prefetch_bytes=%d: expected 0 to 1048576, or -1 for this CPU's default",
          FLAGS_weight_prefetch_bytes));
    }
    if (FLAGS_weight_prefetch_bytes >= 0) llama::cpu::SetWeightPrefetchBytes(FLAGS_weight_prefetch_bytes);
    if (device == llama::Device::kCuda && FLAGS_world_size != 1) {
      return absl::InvalidArgumentError("--device=cuda runs one rank (--world_size=1)");
    }
    if (FLAGS_world_size > 1 && !FLAGS_shard.empty()) {
      return absl::InvalidArgumentError("--world_size > 1 runs the synthetic model only");
    }
    return llama::RanksEnded(llama::RunLocalRanks(
        FLAGS_world_size, "bench", [](const llama::RendezvousOptions& join) {
          return llama::ReportFailure("bench", RunRank(join));
        }));
  }, BenchJobFlags(), {llama::BenchModelFlags()});
}
