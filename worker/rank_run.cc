#include "worker/rank_run.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <glog/logging.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/durable_file.h"
#include "base/progress_line.h"
#include "base/status_macros.h"
#include "checkpoint/shard_format.h"
#include "ops/device.h"
#include "ops/dtype.h"
#include "third_party/cuda/cuda_build_info.h"
#include "tokenizer/tokenizer.h"
#include "worker/collectives/environment.h"
#include "worker/collectives/rendezvous.h"
#include "worker/engine/engine.h"
#include "worker/engine/lockstep.h"
#include "worker/engine_flags.h"
#include "worker/batch_job.h"
#include "worker/job.h"
#include "worker/model/model_weights.h"
#include "worker/model/rank_plan.h"
#include "worker/rank_model.h"
#include "worker/results.h"
#include "worker/serving_flags.h"
#include "worker/serve/run_server.h"

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

absl::StatusOr<std::shared_ptr<const ShardReader>> OpenShard(const JobFlags& flags, const WorkerEnvironment& env) {
  const std::string path = absl::StrCat(flags.shard_dir, "/", ShardFileName(env.rank, env.world_size));
  if (access(path.c_str(), R_OK) != 0) {
    return absl::NotFoundError(absl::StrFormat(
        "no shard for rank %d of %d: %s does not exist. Convert the checkpoint for this world size: bazel run "
        "//tools:convert -- --ckpt_dir=<checkpoint> --out_dir=%s --world_size=%d",
        env.rank, env.world_size, path, flags.shard_dir, env.world_size));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ShardReader> shard, ShardReader::Open(path));
  return std::shared_ptr<const ShardReader>(std::move(shard));
}

// The server's settings from the flags.
absl::StatusOr<RunServerOptions> ServingOptions(const JobFlags& flags) {
  RunServerOptions o;
  o.api.host = flags.host;
  o.api.port = flags.port;
  o.api.model = flags.served_model_name.empty() ? "llama" : flags.served_model_name;
  o.api.max_queue = flags.max_queue;
  ASSIGN_OR_RETURN(ServingHttpOptions http, ServingHttpOptionsFromFlags(flags));
  o.api.limits = http.limits;
  o.api.access_log = http.access_log;
  o.api.api_keys = std::move(http.api_keys);
  o.heartbeat = std::max<std::chrono::milliseconds>(std::chrono::seconds(1),
                                                    std::chrono::seconds(flags.collective_timeout) / 4);
  o.drain_timeout = std::chrono::seconds(flags.drain_timeout);
  return o;
}

// The prompts or dialogs: read by rank 0, which hands them to the others
// through the store. None for a server: requests come over HTTP.
absl::StatusOr<Job> ShareJob(const JobFlags& flags, const WorkerEnvironment& env, RankPeers& peers) {
  Job job;
  if (flags.serve) return job;
  if (env.rank == 0) {
    ASSIGN_OR_RETURN(job, ReadJob(flags.prompt, flags.prompts_file, flags.dialogs_file));
    if (peers.rendezvous) RETURN_IF_ERROR(peers.rendezvous->store().Set("job", SerializeJob(job)));
    return job;
  }
  ASSIGN_OR_RETURN(const std::string text,
                   peers.rendezvous->store().Get("job", std::chrono::seconds(flags.rendezvous_timeout)));
  return DeserializeJob(text);
}

// What a rank has once it has loaded.
struct LoadedRank {
  std::unique_ptr<Tokenizer> tokenizer;
  RankModel model;
  double load_seconds = 0;
  // Rank 0's --draft_shard_dir model (its own one-rank peers first: the
  // model uses them).
  std::optional<RankPeers> draft_peers;
  RankModel draft;
};

// --draft_shard_dir's one-rank shard, opened and checked against the
// model's vocabulary before the model loads (a draft that cannot serve is
// refused in seconds).
absl::StatusOr<std::shared_ptr<const ShardReader>> OpenDraft(const JobFlags& flags, const ShardReader& model) {
  const std::string path = absl::StrCat(flags.draft_shard_dir, "/", ShardFileName(0, 1));
  if (access(path.c_str(), R_OK) != 0) {
    return absl::NotFoundError(absl::StrFormat(
        "--draft_shard_dir=%s: no %s; convert the draft for one rank: bazel run //tools:convert -- "
        "--ckpt_dir=<draft checkpoint> --out_dir=%s --world_size=1",
        flags.draft_shard_dir, ShardFileName(0, 1), flags.draft_shard_dir));
  }
  absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(path);
  if (!reader.ok()) {
    return absl::Status(reader.status().code(),
                        absl::StrCat("--draft_shard_dir=", flags.draft_shard_dir, ": ", reader.status().message()));
  }
  const int64_t draft_vocab = (*reader)->index().config().vocab_size();
  const int64_t vocab = model.index().config().vocab_size();
  if (draft_vocab != vocab) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "--draft_shard_dir=%s: the draft's vocabulary has %d tokens, the model's %d; a draft must speak the "
        "model's tokenizer",
        flags.draft_shard_dir, draft_vocab, vocab));
  }
  return std::shared_ptr<const ShardReader>(*std::move(reader));
}

// The draft's model on rank 0, alone (on its GPU, or every core: the other
// ranks wait while it drafts). Its context is the model's, and its KV cache
// holds as many positions as the model's plus each request's guesses (not
// --kv_cache_gb's size, which is the model's).
absl::Status LoadDraft(const JobFlags& flags, const WorkerEnvironment& env, Device device,
                       std::shared_ptr<const ShardReader> shard, LoadedRank& loaded) {
  const auto start = std::chrono::steady_clock::now();
  const auto named = [&](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat("--draft_shard_dir=", flags.draft_shard_dir, ": ",
                                                    status.message()));
  };
  if (flags.verify_shards) {
    if (absl::Status verified = shard->VerifyChecksums(); !verified.ok()) return named(verified);
  }
  absl::StatusOr<ModelWeights> weights = LoadModelWeights(shard);
  if (!weights.ok()) return named(weights.status());
  const ModelLimits& target = loaded.model.model->limits();
  RendezvousOptions alone;
  alone.world_size = 1;
  ASSIGN_OR_RETURN(loaded.draft_peers, JoinPeers(alone, env.local_rank));
  ASSIGN_OR_RETURN(TransformerOptions options, TransformerOptionsFromFlags(flags, /*local_world_size=*/1));
  options.max_seq_len = target.max_seq_len;
  options.kv_cache_bytes = 0;
  options.kv_blocks = target.kv_blocks + KvBlocksFor(int64_t{flags.max_batch_size} * flags.num_speculative_tokens,
                                                     target.kv_block_size);
  absl::StatusOr<RankPlan> plan = PlanRank(*weights, 0, 1, options);
  if (!plan.ok()) return named(plan.status());
  absl::StatusOr<RankModel> draft = CreateRankModel(device, *loaded.draft_peers, *std::move(weights), *plan,
                                                    std::chrono::seconds(flags.collective_timeout));
  if (!draft.ok()) return named(draft.status());
  loaded.draft = *std::move(draft);
  LOG(INFO) << absl::StrFormat(
      "rank 0: draft model %s (dim %d, %d layers) loaded in %.2f s, KV cache of %d blocks, for speculative decoding",
      shard->path(), plan->config().dim, plan->config().n_layers,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), plan->limits.kv_blocks);
  return absl::OkStatus();
}

// `tokenizer` and `shard` are opened, not yet read past the shard's index.
absl::StatusOr<LoadedRank> LoadRank(const JobFlags& flags, const WorkerEnvironment& env, Device device,
                                    RankPeers& peers, std::unique_ptr<Tokenizer> tokenizer,
                                    std::shared_ptr<const ShardReader> shard) {
  const auto start = std::chrono::steady_clock::now();
  LoadedRank loaded;
  loaded.tokenizer = std::move(tokenizer);
  // The launcher finds shards up to date by their index alone (the sources'
  // names, sizes and times): a byte changed since would run as a wrong model.
  if (flags.verify_shards) RETURN_IF_ERROR(shard->VerifyChecksums());
  const std::string fingerprint = Fingerprint(*shard);
  ASSIGN_OR_RETURN(ModelWeights weights, LoadModelWeights(shard));
  if (weights.config.vocab_size != loaded.tokenizer->vocab_size()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the tokenizer %s has %d tokens but the model's vocabulary is %d; use the checkpoint's own tokenizer",
        flags.tokenizer_path, loaded.tokenizer->vocab_size(), weights.config.vocab_size));
  }
  if (peers.rendezvous) RETURN_IF_ERROR(peers.rendezvous->AgreeOnModel(fingerprint));
  ASSIGN_OR_RETURN(const RankPlan plan, PlanRankModel(flags, weights, device, peers, env.local_world_size));
  ASSIGN_OR_RETURN(loaded.model, CreateRankModel(device, peers, std::move(weights), plan,
                                                 std::chrono::seconds(flags.collective_timeout)));
  loaded.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  LOG(INFO) << absl::StrFormat(
      "rank %d of %d: loaded %s and %s in %.2f s; context %d positions%s, %s KV cache of %d blocks of %d positions",
      env.rank, env.world_size, shard->path(), flags.tokenizer_path, loaded.load_seconds, plan.limits.max_seq_len,
      flags.max_seq_len == 0 ? " (the model's own, or what memory holds of it)" : "", DTypeName(plan.kv_cache_dtype),
      plan.limits.kv_blocks, plan.limits.kv_block_size);
  return loaded;
}

absl::Status Serve(const JobFlags& flags, const WorkerEnvironment& env, LoadedRank& loaded, RankPeers& peers) {
  ASSIGN_OR_RETURN(RunServerOptions serving, ServingOptions(flags));
  const ModelLimits& limits = loaded.model.model->limits();
  serving.engine = EngineOptionsFromFlags(flags, loaded.draft.model.get());
  serving.on_ready = [&](int port) {
    // Listening everywhere: the address clients use is the node's name.
    std::string host = flags.host;
    if (char name[256] = {}; (host == "0.0.0.0" || host == "::") && gethostname(name, sizeof name - 1) == 0) {
      host = name;
    }
    std::fprintf(stderr, "%sserving %s on http://%s:%d/v1 (%d rank(s), KV cache of %lld positions)\n",
                 kProgressPrefix, serving.api.model.c_str(), host.c_str(), port, env.world_size,
                 static_cast<long long>(limits.kv_blocks * limits.kv_block_size));
    std::fflush(stderr);
  };
  return RunServer(*loaded.model.model, *peers.host, *loaded.tokenizer, serving);
}

absl::Status WriteSummary(const std::string& summary_file, int ranks, double load_seconds, const BatchJobRun& run) {
  const double rate = run.tokens / std::max(run.seconds, 1e-9);
  const EngineStats& e = run.engine;
  const std::string speculation = e.DescribeSpeculation();
  LOG(INFO) << absl::StrFormat("%d ranks, load %.2f s, %d tokens generated in %.2f s (%.1f tokens/s)%s", ranks,
                               load_seconds, run.tokens, run.seconds, rate,
                               speculation.empty() ? "" : "; " + speculation);
  if (summary_file.empty()) return absl::OkStatus();
  nlohmann::json summary = {{"ranks", ranks},
                            {"load_seconds", load_seconds},
                            {"tokens", run.tokens},
                            {"generate_seconds", run.seconds},
                            {"tokens_per_second", rate},
                            {"speculative_proposed_tokens", e.proposed_tokens},
                            {"speculative_accepted_tokens", e.accepted_tokens},
                            {"tokens_per_request_step", e.tokens_per_request_step()}};
  return WriteLinesAtomically(summary_file, {summary.dump()});
}

RendezvousOptions JoinOptions(const JobFlags& flags, const WorkerEnvironment& env) {
  RendezvousOptions join;
  join.master_addr = env.master_addr;
  join.master_port = env.master_port;
  join.rank = env.rank;
  join.world_size = env.world_size;
  join.token = env.token;
  join.listen_fd = env.listen_fd;
  join.join_timeout = std::chrono::seconds(flags.rendezvous_timeout);
  join.load_timeout = std::chrono::seconds(flags.load_timeout);
  return join;
}

}  // namespace

absl::Status RunRank(const JobFlags& flags, const std::string& summary_file) {
  if (flags.shard_dir.empty() || flags.tokenizer_path.empty()) {
    return absl::InvalidArgumentError("--shard_dir and --tokenizer_path are required (see --help)");
  }
  // Checked before minutes of joining and loading.
  RETURN_IF_ERROR(CheckJobFlags(flags, /*need_input=*/false));
  ASSIGN_OR_RETURN(const WorkerEnvironment env, ReadWorkerEnvironment());
  const bool leader = env.rank == 0;
  if (!leader) FLAGS_minloglevel = google::GLOG_WARNING;  // Other ranks speak only of problems.
  ASSIGN_OR_RETURN(const Device device, ChooseRankDevice(flags.device));
  // Chosen, the device says why: ChooseDevice takes CUDA when the backend
  // is built in and a GPU is visible.
  const char* why = !flags.device.empty()              ? (BuiltWithCuda() ? "asked: this binary has the CUDA backend"
                                                                          : "asked: this binary has no CUDA backend")
                    : device == Device::kCuda ? "chosen: a GPU is visible"
                    : BuiltWithCuda()         ? "chosen: no GPU visible"
                                              : "chosen: this binary has no CUDA backend";
  LOG(INFO) << "rank " << env.rank << ": device " << DeviceName(device) << " (" << why << ")";

  // Join first: loading can take minutes and has its own deadline.
  ASSIGN_OR_RETURN(RankPeers peers, JoinPeers(JoinOptions(flags, env), env.local_rank));
  if (env.listen_fd >= 0) close(env.listen_fd);  // The store has its own copy, if it needed one.
  ASSIGN_OR_RETURN(const Job job, ShareJob(flags, env, peers));
  ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, Tokenizer::Load(flags.tokenizer_path));
  ASSIGN_OR_RETURN(std::shared_ptr<const ShardReader> shard, OpenShard(flags, env));
  const bool batch_job = leader && !flags.serve;
  std::string grammar;  // GBNF, from --json_schema.
  std::optional<JobIdentity> identity;
  if (batch_job) {
    if (!flags.json_schema.empty()) {
      ASSIGN_OR_RETURN(grammar, ReadJsonSchemaGrammar(flags.json_schema));
    }
    ASSIGN_OR_RETURN(identity, BatchJobIdentity(flags, job, grammar, shard->index(), *tokenizer, device));
    // Another job's --output is refused in seconds, not after loading.
    RETURN_IF_ERROR(CheckBatchOutput(flags, *identity, job));
  }
  std::shared_ptr<const ShardReader> draft_shard;
  if (leader && !flags.draft_shard_dir.empty()) {
    ASSIGN_OR_RETURN(draft_shard, OpenDraft(flags, *shard));
  }
  ASSIGN_OR_RETURN(LoadedRank loaded, LoadRank(flags, env, device, peers, std::move(tokenizer), std::move(shard)));
  if (draft_shard != nullptr) RETURN_IF_ERROR(LoadDraft(flags, env, device, std::move(draft_shard), loaded));
  // Rank 0 runs the engine; the others run the steps it sends them.
  absl::Status failed_prompts;
  if (!leader) {
    RETURN_IF_ERROR(FollowLeader(*loaded.model.model, *peers.host));
  } else if (flags.serve) {
    RETURN_IF_ERROR(Serve(flags, env, loaded, peers));
  } else {
    ASSIGN_OR_RETURN(BatchOutput output,
                     OpenBatchOutput(flags, identity->WithContext(loaded.model.model->limits().max_seq_len), job));
    LeaderModel leader_model(loaded.model.model.get(), peers.host.get());
    ASSIGN_OR_RETURN(const BatchJobRun run,
                     RunBatchJob(flags, job, grammar, std::move(output), leader_model, *loaded.tokenizer,
                                 loaded.draft.model.get()));
    RETURN_IF_ERROR(leader_model.Stop());
    RETURN_IF_ERROR(WriteSummary(summary_file, env.world_size, loaded.load_seconds, run));
    failed_prompts = run.failed_prompts;
  }
  if (peers.rendezvous) RETURN_IF_ERROR(peers.rendezvous->Finish());
  return failed_prompts;
}

}  // namespace llama
