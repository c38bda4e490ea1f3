// //worker: one rank of a Llama 2 job.
//
// Reads its place in the job from torchrun's variables (RANK, WORLD_SIZE,
// MASTER_ADDR, ...; none means a single rank), maps its shard, joins its
// peers, and runs text or chat completion; rank 0 prints the results as the
// reference's example scripts do and writes --output as JSON Lines.
//
//   worker --shard_dir=DIR --tokenizer_path=tokenizer.model --prompt="I believe the meaning of life is"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "checkpoint/io/durable_file.h"
#include "checkpoint/rank_geometry.h"
#include "checkpoint/shard_format.h"
#include "ops/device.h"
#include "ops/dtype.h"
#include "ops/status_macros.h"
#include "third_party/cuda/cuda_build_info.h"
#include "tokenizer/tokenizer.h"
#include "worker/dist/environment.h"
#include "worker/dist/rendezvous.h"
#include "worker/flag_help.h"
#include "worker/job.h"
#include "worker/job_flags.h"
#include "worker/engine/engine.h"
#include "worker/batch/generator.h"
#include "worker/engine/lockstep.h"
#include "worker/model/model_options.h"
#include "worker/serve/run_server.h"
#include "worker/model/model_weights.h"
#include "worker/progress_line.h"
#include "worker/rank_model.h"
#include "worker/results.h"

DEFINE_string(summary_file, "", "Rank 0 writes the run's numbers here as JSON (ranks, load and generation time, tokens).");

namespace llama {
namespace {

// What every rank must agree on: config and the conversion it came from.
std::string Fingerprint(const ShardReader& shard) {
  shard::ShardIndex identity;
  *identity.mutable_config() = shard.index().config();
  identity.set_world_size(shard.index().world_size());
  *identity.mutable_sources() = shard.index().sources();
  const std::string bytes = identity.SerializeAsString();
  return absl::StrFormat("%016x", XXH3_64bits(bytes.data(), bytes.size()));
}

absl::StatusOr<std::shared_ptr<const ShardReader>> OpenShard(const WorkerEnvironment& env) {
  const std::string path = absl::StrCat(FLAGS_shard_dir, "/", ShardFileName(env.rank, env.world_size));
  if (access(path.c_str(), R_OK) != 0) {
    return absl::NotFoundError(absl::StrFormat(
        "no shard for rank %d of %d: %s does not exist. Convert the checkpoint for this world size: bazel run "
        "//tools:convert -- --ckpt_dir=<checkpoint> --out_dir=%s --world_size=%d",
        env.rank, env.world_size, path, FLAGS_shard_dir, env.world_size));
  }
  absl::StatusOr<std::unique_ptr<ShardReader>> shard = ShardReader::Open(path);
  if (!shard.ok()) return shard.status();
  return std::shared_ptr<const ShardReader>(*std::move(shard));
}

// --kv_cache_free_share: the blocks that share of this rank's free memory
// holds once its weights (a copy: the CPU packs them, a GPU uploads them)
// and work buffers are counted; the smallest over the ranks, since rank 0
// hands out block ids that every rank's pool must have.
absl::StatusOr<int64_t> KvBlocksFromFreeMemory(const JobFlags& flags, Device device, const WorkerEnvironment& env,
                                               const ModelWeights& weights, const TransformerOptions& options,
                                               RankPeers& peers) {
  ASSIGN_OR_RETURN(const RankGeometry geometry, ComputeRankGeometry(weights.config, env.rank, env.world_size));
  ASSIGN_OR_RETURN(const double free, FreeMemoryBytes(device, env.local_rank));
  const double taken = geometry.WeightBytes(weights.layers[0].wq.dtype()) + geometry.WorkBytes(options.max_step_tokens);
  int64_t blocks = KvBlocksInBytes(geometry, options, flags.kv_cache_free_share * std::max(0.0, free - taken));
  if (peers.rendezvous == nullptr) return blocks;
  auto& store = peers.rendezvous->store();
  RETURN_IF_ERROR(store.Set(absl::StrCat("kv_blocks/", env.rank), absl::StrCat(blocks)));
  for (int r = 0; r < env.world_size; ++r) {
    ASSIGN_OR_RETURN(const std::string theirs,
                     store.Get(absl::StrCat("kv_blocks/", r), std::chrono::seconds(flags.load_timeout)));
    int64_t n = 0;
    if (!absl::SimpleAtoi(theirs, &n)) {
      return absl::DataLossError(absl::StrFormat("rank %d's KV block count \"%s\" is not a number", r, theirs));
    }
    blocks = std::min(blocks, n);
  }
  return blocks;
}

// The server's settings from the flags: keys from --api_key, $LLAMA_API_KEY
// and --api_key_file (one per line).
absl::StatusOr<RunServerOptions> ServingOptions(const JobFlags& flags) {
  RunServerOptions o;
  o.api.host = flags.host;
  o.api.port = flags.port;
  o.api.model = flags.served_model_name.empty() ? "llama" : flags.served_model_name;
  o.api.max_queue = flags.max_queue;
  o.api.limits.max_connections = flags.max_connections;
  o.api.limits.max_header_bytes = flags.max_header_bytes;
  o.api.limits.max_headers = flags.max_headers;
  o.api.limits.max_body_bytes = flags.max_body_bytes;
  o.api.limits.request_timeout = absl::Seconds(flags.request_timeout);
  o.api.limits.keep_alive_timeout = absl::Seconds(flags.keep_alive_timeout);
  const char* variable = std::getenv(kApiKeyVariable);
  for (const std::string& key : {flags.api_key, std::string(variable != nullptr ? variable : "")}) {
    if (!key.empty()) o.api.api_keys.push_back(key);
  }
  if (!flags.api_key_file.empty()) {
    ASSIGN_OR_RETURN(const std::string text, ReadFileToString(flags.api_key_file));
    for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
      o.api.api_keys.push_back(std::string(absl::StripAsciiWhitespace(line)));
    }
    if (o.api.api_keys.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("--api_key_file=%s holds no key", flags.api_key_file));
    }
  }
  o.engine.prefix_caching = flags.enable_prefix_caching;
  o.heartbeat = std::max<std::chrono::milliseconds>(std::chrono::seconds(1),
                                                    std::chrono::seconds(flags.collective_timeout) / 4);
  o.drain_timeout = std::chrono::seconds(flags.drain_timeout);
  return o;
}

absl::Status Run() {
  if (FLAGS_shard_dir.empty() || FLAGS_tokenizer_path.empty()) {
    return absl::InvalidArgumentError("--shard_dir and --tokenizer_path are required (see --help)");
  }
  // Checked before minutes of joining and loading.
  const JobFlags flags = JobFlagsFromCommandLine();
  RETURN_IF_ERROR(CheckJobFlags(flags, /*need_input=*/false));
  ASSIGN_OR_RETURN(const WorkerEnvironment env, ReadWorkerEnvironment());
  const bool leader = env.rank == 0;
  if (!leader) FLAGS_minloglevel = google::GLOG_WARNING;  // Other ranks speak only of problems.
  ASSIGN_OR_RETURN(const Device device, ChooseDevice(flags.device));
  LOG(INFO) << "rank " << env.rank << ": device " << DeviceName(device)
            << (flags.device.empty() ? " (chosen: " : " (asked: ")
            << (BuiltWithCuda() ? "this binary has the CUDA backend" : "this binary has no CUDA backend") << ")";

  // Join first: loading can take minutes and has its own deadline.
  RendezvousOptions join;
  join.master_addr = env.master_addr;
  join.master_port = env.master_port;
  join.rank = env.rank;
  join.world_size = env.world_size;
  join.token = env.token;
  join.listen_fd = env.listen_fd;
  join.join_timeout = std::chrono::seconds(flags.rendezvous_timeout);
  join.load_timeout = std::chrono::seconds(flags.load_timeout);
  ASSIGN_OR_RETURN(RankPeers peers, JoinPeers(join, env.local_rank));
  if (env.listen_fd >= 0) close(env.listen_fd);  // The store has its own copy, if it needed one.

  Job job;
  if (flags.serve) {
    // No job: requests come over HTTP.
  } else if (leader) {
    ASSIGN_OR_RETURN(job, ReadJob(flags.prompt, flags.prompts_file, flags.dialogs_file));
    if (peers.rendezvous) RETURN_IF_ERROR(peers.rendezvous->store().Set("job", SerializeJob(job)));
  } else {
    ASSIGN_OR_RETURN(const std::string text,
                     peers.rendezvous->store().Get("job", std::chrono::seconds(flags.rendezvous_timeout)));
    ASSIGN_OR_RETURN(job, DeserializeJob(text));
  }

  const auto load_start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, Tokenizer::Load(FLAGS_tokenizer_path));
  ASSIGN_OR_RETURN(std::shared_ptr<const ShardReader> shard, OpenShard(env));
  const std::string fingerprint = Fingerprint(*shard);
  ASSIGN_OR_RETURN(ModelWeights weights, LoadModelWeights(shard));
  if (weights.config.vocab_size != tokenizer->vocab_size()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the tokenizer %s has %d tokens but the model's vocabulary is %d; use the checkpoint's own tokenizer",
        FLAGS_tokenizer_path, tokenizer->vocab_size(), weights.config.vocab_size));
  }
  if (peers.rendezvous) RETURN_IF_ERROR(peers.rendezvous->AgreeOnModel(fingerprint));
  ASSIGN_OR_RETURN(TransformerOptions options, TransformerOptionsFromFlags(flags, weights.config, env.rank,
                                                                          env.world_size, env.local_world_size));
  if (flags.kv_cache_free_share > 0) {
    ASSIGN_OR_RETURN(options.kv_blocks, KvBlocksFromFreeMemory(flags, device, env, weights, options, peers));
  }
  ASSIGN_OR_RETURN(RankModel model, CreateRankModel(device, peers, std::move(weights), options,
                                                    std::chrono::seconds(flags.collective_timeout)));
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  LOG(INFO) << absl::StrFormat("rank %d of %d: loaded %s and %s in %.2f s; %s KV cache of %d blocks of %d positions",
                               env.rank, env.world_size, shard->path(), FLAGS_tokenizer_path, load_seconds,
                               DTypeName(options.kv_cache_dtype), model.model->kv_blocks(),
                               model.model->kv_block_size());
  // Rank 0 runs the engine; the others run the steps it sends them.
  if (!leader) {
    RETURN_IF_ERROR(FollowLeader(*model.model, *peers.host));
    return peers.rendezvous->Finish();
  }
  if (flags.serve) {
    ASSIGN_OR_RETURN(RunServerOptions serving, ServingOptions(flags));
    serving.on_ready = [&](int port) {
      std::fprintf(stderr, "%sserving %s on http://%s:%d/v1 (%d rank(s), KV cache of %lld positions)\n",
                   kProgressPrefix, serving.api.model.c_str(), flags.host.c_str(), port, env.world_size,
                   static_cast<long long>(model.model->kv_blocks() * model.model->kv_block_size()));
      std::fflush(stderr);
    };
    RETURN_IF_ERROR(RunServer(*model.model, *peers.host, *tokenizer, serving));
    if (peers.rendezvous) return peers.rendezvous->Finish();
    return absl::OkStatus();
  }
  LeaderModel leader_model(model.model.get(), peers.host.get());
  EngineOptions engine_options;
  engine_options.prefix_caching = flags.enable_prefix_caching;
  Generator generator(&leader_model, tokenizer.get(), tokenizer->stop_ids(), engine_options);
  SamplingOptions sampling;
  sampling.temperature = static_cast<float>(flags.temperature);
  sampling.top_p = static_cast<float>(flags.top_p);
  if (flags.max_gen_len >= 0) sampling.max_gen_len = flags.max_gen_len;
  sampling.logprobs = flags.logprobs;
  sampling.echo = flags.echo;
  sampling.seed = flags.seed;
  const size_t total = job.chat ? job.dialogs.size() : job.prompts.size();
  LOG(INFO) << "generating for " << total << (job.chat ? " dialog(s)" : " prompt(s)");
  // Rank 0 prints and writes each batch as it finishes: Ctrl-C or a later
  // failure keeps what is done, and a long job shows its progress.
  std::unique_ptr<ResultsFile> output;
  if (!flags.output.empty()) {
    ASSIGN_OR_RETURN(output, ResultsFile::Create(flags.output));
  }
  const auto start = std::chrono::steady_clock::now();
  size_t tokens = 0;
  const auto keep_batch = [&](size_t first, absl::Span<const Completion> batch) -> absl::Status {
    std::vector<std::string> lines;
    for (size_t i = 0; i < batch.size(); ++i) {
      const Completion& c = batch[i];
      tokens += c.token_ids.size();
      std::fputs((job.chat ? FormatChatCompletion(job.dialogs[first + i], c)
                           : FormatTextCompletion(job.prompts[first + i], c))
                     .c_str(),
                 stdout);
      lines.push_back(CompletionJson(c, job.chat, flags.logprobs));
    }
    std::fflush(stdout);
    if (output) RETURN_IF_ERROR(output->Append(lines));
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "%s%zu/%zu %s done, %zu tokens generated, %.1f tokens/s\n", kProgressPrefix,
                 first + batch.size(), total, job.chat ? "dialogs" : "prompts", tokens,
                 tokens / std::max(elapsed, 1e-9));
    std::fflush(stderr);
    return absl::OkStatus();
  };
  RETURN_IF_ERROR((job.chat ? generator.ChatCompletion(job.dialogs, sampling, keep_batch)
                            : generator.TextCompletion(job.prompts, sampling, keep_batch))
                      .status());
  RETURN_IF_ERROR(leader_model.Stop());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  LOG(INFO) << absl::StrFormat("%d ranks, load %.2f s, %d tokens generated in %.2f s (%.1f tokens/s)",
                               env.world_size, load_seconds, tokens, seconds, tokens / std::max(seconds, 1e-9));
  if (!FLAGS_summary_file.empty()) {
    nlohmann::json summary = {{"ranks", env.world_size},       {"load_seconds", load_seconds},
                              {"tokens", tokens},               {"generate_seconds", seconds},
                              {"tokens_per_second", tokens / std::max(seconds, 1e-9)}};
    RETURN_IF_ERROR(WriteLinesAtomically(FLAGS_summary_file, {summary.dump()}));
  }
  if (peers.rendezvous) return peers.rendezvous->Finish();
  return absl::OkStatus();
}

}  // namespace
}  // namespace llama

int main(int argc, char** argv) {
  const char* usage =
      "One rank of a Llama 2 job. Alone:\n"
      "  worker --shard_dir=DIR --tokenizer_path=tokenizer.model --prompt=\"...\"\n"
      "Under //launcher (or torchrun-style RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT/RENDEZVOUS_TOKEN),\n"
      "each rank maps DIR/rank-R-of-N.shard and rank 0 prints the results.";
  llama::HandleHelpAndVersion(
      argc, argv, "worker", usage,
      {{"The model and the job", {"shard_dir", "tokenizer_path", "prompt", "prompts_file", "dialogs_file", "output",
                                  "summary_file"}},
       {"Generation", {"temperature", "top_p", "max_seq_len", "max_gen_len", "max_batch_size", "seed", "logprobs",
                       "echo"}},
       {"The engine", {"max_num_batched_tokens", "kv_cache_gb", "kv_cache_free_share", "kv_block_size", "enable_prefix_caching"}},
       {"Serving", {"serve", "host", "port", "served_model_name", "api_key", "api_key_file", "max_queue",
                    "max_connections", "max_header_bytes", "max_headers", "max_body_bytes", "request_timeout",
                    "keep_alive_timeout", "drain_timeout"}},
       {"This rank's model", {"device", "kv_cache_dtype", "cuda_graphs", "int8_prefill", "bf16_activations", "threads"}},
       {"Deadlines between ranks", {"rendezvous_timeout", "load_timeout", "collective_timeout"}},
       {"Logging", {"log_dir"}}});
  gflags::SetUsageMessage(usage);
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  if (FLAGS_serve) {
    // Every thread inherits the mask: rank 0 takes SIGTERM and SIGINT as a
    // drain (sigtimedwait), the other ranks as nothing (they end when rank 0
    // tells them, or dies).
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
  }
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  absl::Status status = llama::Run();
  if (!status.ok()) {
    const char* rank = std::getenv("RANK");
    std::fprintf(stderr, "worker rank %s: %s\n", rank != nullptr ? rank : "0", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
