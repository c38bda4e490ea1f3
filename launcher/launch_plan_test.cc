#include "launcher/launch_plan.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>


namespace llama {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

LaunchContext Context() {
  LaunchContext context;
  context.cache_dir = "/home/me/.cache/llama2-cpp";
  context.run_stamp = "20261201-231000";
  context.pid = 42;
  context.chat_api_key = "fresh-key";
  return context;
}

// Node 1 of a 2-node srun step.
LaunchContext SrunStep() {
  LaunchContext context = Context();
  context.getenv = [](const char* name) -> const char* {
    static const std::map<std::string, std::string> env = {
        {"SLURM_JOB_ID", "1234"},         {"SLURM_STEP_ID", "0"},         {"SLURM_PROCID", "1"},
        {"SLURM_STEP_NUM_NODES", "2"},    {"SLURM_STEP_NUM_TASKS", "2"},  {"SLURM_NNODES", "2"},
        {"SLURM_NTASKS", "2"},            {"SLURM_JOB_NODELIST", "gpu[01-02]"}};
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  return context;
}

LauncherFlags Checkpoint(const std::string& dir) {
  LauncherFlags flags;
  flags.ckpt_dir = dir;
  flags.job.prompt = "I believe the meaning of life is";
  return flags;
}

TEST(PlanLaunchTest, TheDemoRunsTwoRanksOnItsOwnPrompts) {
  absl::StatusOr<LaunchPlan> plan = PlanLaunch({}, LauncherFlags(), Context());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->command, LaunchCommand::kJob);
  EXPECT_TRUE(plan->demo);
  EXPECT_FALSE(plan->download);
  EXPECT_EQ(plan->demo_dir, "/home/me/.cache/llama2-cpp/demo");
  EXPECT_TRUE(plan->demo_prompts);
  EXPECT_EQ(plan->job.max_gen_len, 32);
  EXPECT_EQ(plan->world.nproc_per_node, 2);
  EXPECT_EQ(plan->world_size, 2);
  EXPECT_EQ(plan->device, "cpu");
  EXPECT_TRUE(plan->bind_store);
  EXPECT_EQ(plan->world.master_port, 0);  // Any free port, bound by Execute.
  EXPECT_EQ(plan->convert.world_size, 2);
  EXPECT_EQ(plan->convert.world_size_flag, "--nproc_per_node=2 x --nnodes=1");
  EXPECT_EQ(plan->supervise.log_dir, "/home/me/.cache/llama2-cpp/logs/20261201-231000-node0-42");
  EXPECT_EQ(plan->summary_path, plan->supervise.log_dir + "/summary.json");
  EXPECT_EQ(plan->supervise.grace, std::chrono::seconds(5));
}

TEST(PlanLaunchTest, TheDemoKeepsTheJobsOwnPromptAndRankCount) {
  LauncherFlags flags;
  flags.job.prompt = "Hello";
  flags.nproc_per_node = 1;
  flags.nproc_per_node_given = true;
  absl::StatusOr<LaunchPlan> plan = PlanLaunch({}, flags, Context());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->demo_prompts);
  EXPECT_EQ(plan->job.max_gen_len, -1);
  EXPECT_EQ(plan->world_size, 1);
}

TEST(PlanLaunchTest, ACheckpointOnLocalRanks) {
  LauncherFlags flags = Checkpoint("/data/llama-2-7b/");
  flags.nproc_per_node = 4;
  flags.weights_dtype = "int8";
  absl::StatusOr<LaunchPlan> plan = PlanLaunch({}, flags, Context());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->demo);
  EXPECT_EQ(plan->ckpt_dir, "/data/llama-2-7b");  // The folder itself, without the slash.
  EXPECT_EQ(plan->world_size, 4);
  EXPECT_TRUE(plan->convert.dtype.has_value());
  EXPECT_TRUE(plan->convert.out_dir.empty());  // Chosen beside the checkpoint or in the cache.
  EXPECT_EQ(plan->shard_cache_dir, "/home/me/.cache/llama2-cpp/shards");
  EXPECT_FALSE(plan->job.serve);
}

TEST(PlanLaunchTest, NodesBeyondTheFirstJoinNodeZerosStore) {
  LauncherFlags flags = Checkpoint("/data/llama-2-70b");
  flags.nnodes = 2;
  flags.node_rank = 1;
  flags.nproc_per_node = 8;
  flags.master_addr = "node0";
  flags.token_file = "/shared/token";
  flags.job.rendezvous_timeout = 60;
  absl::StatusOr<LaunchPlan> plan = PlanLaunch({}, flags, Context());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->bind_store);
  EXPECT_EQ(plan->world.master_port, kDefaultMasterPort);
  EXPECT_EQ(plan->world_size, 16);
  EXPECT_EQ(plan->preparation.node_rank, 1);
  EXPECT_EQ(plan->preparation.nnodes, 2);
  EXPECT_EQ(plan->preparation.deadline, std::chrono::seconds(60));
  EXPECT_EQ(plan->token_file, "/shared/token");
  EXPECT_EQ(plan->supervise.log_dir, "/home/me/.cache/llama2-cpp/logs/20261201-231000-node1-42");
  flags.node_local_shards = true;
  plan = PlanLaunch({}, flags, Context());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->preparation.node_rank, 0);  // Each node converts its own.
}

TEST(PlanLaunchTest, SlurmPlacesTheNode) {
  LaunchContext context = SrunStep();
  absl::StatusOr<LaunchPlan> plan = PlanLaunch({}, Checkpoint("/data/m"), context);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->world.nnodes, 2);
  EXPECT_EQ(plan->world.node_rank, 1);
  EXPECT_EQ(plan->world.master_addr, "gpu01");
  EXPECT_THAT(plan->master_addr_origin, HasSubstr("SLURM_JOB_NODELIST"));
  EXPECT_GT(plan->world.master_port, 0);
  // A taken port is reported as Slurm's choice, not as a flag never given.
  EXPECT_THAT(plan->master_port_origin,
              HasSubstr(absl::StrFormat("the job's port %d (from SLURM_JOB_ID", plan->world.master_port)));
  LauncherFlags flags = Checkpoint("/data/m");
  flags.master_port = 29600;
  plan = PlanLaunch({}, flags, context);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->master_port_origin, "--master_port=29600");
}

// Where node names do not resolve (Slurm's NodeAddr), the user's address wins.
TEST(PlanLaunchTest, MasterAddrOverridesTheFirstNodesName) {
  LauncherFlags flags = Checkpoint("/data/m");
  flags.master_addr = "10.0.0.1";
  flags.master_addr_given = true;
  absl::StatusOr<LaunchPlan> plan = PlanLaunch({}, flags, SrunStep());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->world.master_addr, "10.0.0.1");
  EXPECT_EQ(plan->master_addr_origin, "--master_addr=10.0.0.1");
  EXPECT_EQ(plan->world.nnodes, 2);
}

// `sbatch -N2 --wrap "launcher ..."`: the batch script is not node 0 of a step.
TEST(PlanLaunchTest, ABatchScriptIsAPlainLauncher) {
  LaunchContext context = Context();
  context.getenv = [](const char* name) -> const char* {
    static const std::map<std::string, std::string> env = {
        {"SLURM_JOB_ID", "1234"}, {"SLURM_PROCID", "0"}, {"SLURM_NNODES", "2"}, {"SLURM_JOB_NODELIST", "n[1-2]"}};
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  absl::StatusOr<LaunchPlan> plan = PlanLaunch({}, Checkpoint("/data/m"), context);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->world.nnodes, 1);
  EXPECT_EQ(plan->world.master_addr, "127.0.0.1");
}

TEST(PlanLaunchTest, ServeSetsTheWorkersServingAndLongerGrace) {
  LauncherFlags flags;
  flags.ckpt_dir = "/data/llama-2-7b-chat";
  flags.job.drain_timeout = 30;
  absl::StatusOr<LaunchPlan> plan = PlanLaunch({"serve"}, flags, Context());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->command, LaunchCommand::kServe);
  EXPECT_TRUE(plan->job.serve);
  EXPECT_EQ(plan->job.served_model_name, "llama-2-7b-chat");
  EXPECT_EQ(plan->job.host, "127.0.0.1");
  EXPECT_EQ(plan->job.port, 8000);
  EXPECT_EQ(plan->supervise.grace, std::chrono::seconds(40));
  EXPECT_EQ(PlanLaunch({"serve"}, LauncherFlags(), Context())->job.served_model_name, "demo");
}

TEST(PlanLaunchTest, ServeRefusesPrompts) {
  LauncherFlags flags = Checkpoint("/data/m");
  EXPECT_EQ(PlanLaunch({"serve"}, flags, Context()).status().message(),
            "serve takes its prompts over HTTP: drop --prompt, --prompts_file and --dialogs_file");
}

TEST(PlanLaunchTest, ChatRefusesPromptsNamingChat) {
  EXPECT_EQ(PlanLaunch({"chat"}, Checkpoint("/data/m"), Context()).status().message(),
            "chat takes its turns from the terminal (or stdin): drop --prompt, --prompts_file and --dialogs_file");
}

TEST(PlanLaunchTest, ChatIsAPrivateServerAndItsClient) {
  LauncherFlags flags;
  flags.ckpt_dir = "/data/llama-2-7b-chat";
  flags.system_prompt = "Answer briefly.";
  flags.job.port = 9000;
  flags.job.temperature = 0.2;
  flags.job.typical_p = 0.5;
  flags.job.seed = 7;
  absl::StatusOr<LaunchPlan> plan = PlanLaunch({"chat"}, flags, Context());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->command, LaunchCommand::kChat);
  EXPECT_TRUE(plan->job.serve);
  EXPECT_EQ(plan->job.host, "127.0.0.1");
  EXPECT_EQ(plan->job.port, 0);
  EXPECT_EQ(plan->job.api_key, "fresh-key");
  EXPECT_EQ(plan->chat.model, "llama-2-7b-chat");
  EXPECT_EQ(plan->chat.api_key, "fresh-key");
  EXPECT_EQ(plan->chat.system_prompt, "Answer briefly.");
  // The job's whole sampling, each turn's request fields.
  EXPECT_EQ(plan->chat.sampling.token.temperature, 0.2f);
  EXPECT_EQ(plan->chat.sampling.token.typical_p, 0.5f);
  EXPECT_EQ(plan->chat.sampling.seed, 7u);
  EXPECT_EQ(plan->chat.max_tokens, -1);
}

TEST(PlanLaunchTest, SubcommandsAndStrayWords) {
  absl::StatusOr<LaunchPlan> download = PlanLaunch({"download"}, LauncherFlags(), Context());
  ASSERT_TRUE(download.ok());
  EXPECT_EQ(download->command, LaunchCommand::kDownload);
  EXPECT_EQ(PlanLaunch({"download", "7B"}, LauncherFlags(), Context()).status().message(),
            "download: unexpected argument \"7B\"");
  absl::StatusOr<LaunchPlan> sbatch = PlanLaunch({"--prompt=hi", "sbatch", "serve"}, LauncherFlags(), Context());
  ASSERT_TRUE(sbatch.ok());
  EXPECT_EQ(sbatch->command, LaunchCommand::kSbatch);
  EXPECT_THAT(sbatch->sbatch_args, ElementsAre("--prompt=hi", "serve"));
  EXPECT_EQ(PlanLaunch({"generate"}, LauncherFlags(), Context()).status().message(),
            "unexpected argument \"generate\" (see --help)");
}

TEST(PlanLaunchTest, ModelsWithoutACheckpointDownloadFirst) {
  LauncherFlags flags;
  flags.job.prompt = "hi";
  flags.download_models = "7B,13B";
  flags.download_target_dir = "/data/llama";
  absl::StatusOr<LaunchPlan> plan = PlanLaunch({}, flags, Context());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->download);
  EXPECT_FALSE(plan->demo);
  // A real model, as with --ckpt_dir: one rank, not the demo's two.
  EXPECT_EQ(plan->world.nproc_per_node, 1);
  EXPECT_EQ(plan->world_size, 1);
  absl::StatusOr<std::string> dir = DownloadedCheckpointDir(plan->download_models, plan->download_target_dir);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, "/data/llama/llama-2-7b");
}

// --draft_weights_dtype: a one-rank conversion of the same checkpoint to
// q4_k or int8 for the draft, on CPUs, with no other source of guesses.
TEST(PlanLaunchTest, ASelfDraftIsAOneRankConversionOnCpus) {
  LauncherFlags flags = Checkpoint("/data/m");
  flags.nproc_per_node = 2;
  flags.draft_weights_dtype = "q4_k";
  absl::StatusOr<LaunchPlan> plan = PlanLaunch({}, flags, Context());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->draft_convert.has_value());
  EXPECT_EQ(plan->draft_convert->world_size, 1);
  EXPECT_EQ(plan->draft_convert->dtype, DType::kQ4_K);
  EXPECT_EQ(plan->convert.world_size, 2);
  flags.draft_weights_dtype = "bf16";
  EXPECT_EQ(PlanLaunch({}, flags, Context()).status().message(), "--draft_weights_dtype=bf16: expected q4_k or int8");
  flags.draft_weights_dtype = "int8";
  flags.job.speculative_ngram = true;
  EXPECT_THAT(std::string(PlanLaunch({}, flags, Context()).status().message()),
              HasSubstr("give one source of speculative guesses"));
  flags.job.speculative_ngram = false;
  flags.job.device = "cuda";
  LaunchContext gpus = Context();
  gpus.built_with_cuda = true;
  gpus.visible_gpus = {"0", "1"};
  EXPECT_THAT(std::string(PlanLaunch({}, flags, gpus).status().message()),
              HasSubstr("--draft_weights_dtype=int8: q4_k and int8 weights run on CPUs only"));
}

// --draft_ckpt_dir: another model's checkpoint, converted for one rank like
// the model (its --weights_dtype), or to --draft_weights_dtype, which may
// then be any type; one source of guesses at a time.
TEST(PlanLaunchTest, ADraftCheckpointIsConvertedForOneRankLikeTheModel) {
  LauncherFlags flags = Checkpoint("/data/8b");
  flags.nproc_per_node = 2;
  flags.weights_dtype = "int8";
  flags.draft_ckpt_dir = "/data/1b";
  absl::StatusOr<LaunchPlan> plan = PlanLaunch({}, flags, Context());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->draft_convert.has_value());
  EXPECT_EQ(plan->draft_convert->ckpt_dir, "/data/1b");
  EXPECT_EQ(plan->draft_convert->world_size, 1);
  EXPECT_EQ(plan->draft_convert->dtype, DType::kQ8_0);
  EXPECT_EQ(plan->convert.world_size, 2);
  flags.draft_weights_dtype = "bf16";
  plan = PlanLaunch({}, flags, Context());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->draft_convert->dtype, DType::kBF16);
  flags.job.draft_shard_dir = "/data/1b-shards";
  EXPECT_THAT(std::string(PlanLaunch({}, flags, Context()).status().message()),
              HasSubstr("give one source of speculative guesses"));
  // Without --draft_ckpt_dir the draft is the model's own checkpoint.
  flags = Checkpoint("/data/8b");
  flags.draft_weights_dtype = "q4_k";
  plan = PlanLaunch({}, flags, Context());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->draft_convert->ckpt_dir, "");
}

TEST(PlanLaunchTest, ADownloadOnCudaNeedsOneGpuAndTheJobsPrompts) {
  LauncherFlags flags;
  flags.job.prompt = "hi";
  flags.job.device = "cuda";
  flags.download_models = "7B";
  LaunchContext one_gpu = Context();
  one_gpu.built_with_cuda = true;
  one_gpu.visible_gpus = {"0"};
  absl::StatusOr<LaunchPlan> plan = PlanLaunch({}, flags, one_gpu);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->gpus, ElementsAre("0"));
  flags.job.prompt.clear();
  absl::StatusOr<LaunchPlan> serve = PlanLaunch({"serve"}, flags, one_gpu);
  ASSERT_TRUE(serve.ok()) << serve.status();
  EXPECT_EQ(serve->job.served_model_name, "llama-2-7b");  // The download's, not "demo".
  // No prompt: refused before downloading, not after (the demo has its own).
  EXPECT_THAT(std::string(PlanLaunch({}, flags, one_gpu).status().message()), HasSubstr("give exactly one of"));
}

TEST(PlanLaunchTest, WorkerEnvNeedsANameAndAValue) {
  LauncherFlags flags = Checkpoint("/data/m");
  flags.worker_environment = {"NOVALUE"};
  EXPECT_EQ(PlanLaunch({}, flags, Context()).status().message(), "--worker_env=NOVALUE: expected NAME=value");
}

TEST(PlanLaunchTest, BadFlagsAreRefusedBeforeAnyWork) {
  LauncherFlags flags = Checkpoint("/data/m");
  flags.nproc_per_node = 0;
  EXPECT_EQ(PlanLaunch({}, flags, Context()).status().message(), "--nproc_per_node=0: expected at least 1");
  flags = Checkpoint("/data/m");
  flags.job.top_p = 0;
  EXPECT_EQ(PlanLaunch({}, flags, Context()).status().message(), "--top_p=0: expected a value in (0, 1]");
  flags = Checkpoint("/data/m");
  flags.job.prompt.clear();
  EXPECT_THAT(std::string(PlanLaunch({}, flags, Context()).status().message()), HasSubstr("give exactly one of"));
  flags = Checkpoint("/data/m");
  flags.weights_dtype = "int4";
  EXPECT_THAT(std::string(PlanLaunch({}, flags, Context()).status().message()), HasSubstr("weights_dtype"));
  flags = Checkpoint("/data/m");
  flags.nproc_per_node = 2;
  flags.job.device = "cuda";
  LaunchContext one_gpu = Context();
  one_gpu.visible_gpus = {"3"};
  EXPECT_EQ(PlanLaunch({}, flags, one_gpu).status().message(),
            "--nproc_per_node=2 needs 2 GPUs on this node; 1 visible");
}

// serve --data_parallel_size=N: replicas with their shares of the CPUs
// (contiguous, sizes differing by at most one), or of the GPUs; every
// store their own.
TEST(PlanLaunchTest, ReplicasShareOutTheCpusOrTheGpus) {
  LauncherFlags flags = Checkpoint("/data/m");
  flags.job.prompt.clear();
  flags.data_parallel_size = 3;
  LaunchContext context = Context();
  context.allowed_cpus = {0, 1, 2, 3, 4, 5, 6, 8};
  absl::StatusOr<LaunchPlan> plan = PlanLaunch({"serve"}, flags, context);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->data_parallel_size, 3);
  EXPECT_EQ(plan->routing, RoutingPolicy::kPrefix);
  EXPECT_EQ(plan->max_restarts, 3);
  EXPECT_FALSE(plan->bind_store);
  EXPECT_THAT(plan->replica_cpus, ElementsAre(ElementsAre(0, 1, 2), ElementsAre(3, 4, 5), ElementsAre(6, 8)));

  flags.routing = "round_robin";
  flags.nproc_per_node = 2;
  flags.job.device = "cuda";
  context.built_with_cuda = true;
  context.visible_gpus = {"0", "1", "2", "3", "4", "5", "6"};
  plan = PlanLaunch({"serve"}, flags, context);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->routing, RoutingPolicy::kRoundRobin);
  EXPECT_TRUE(plan->replica_cpus.empty());
  flags.data_parallel_size = 4;
  EXPECT_EQ(PlanLaunch({"serve"}, flags, context).status().message(),
            "--nproc_per_node=2 x 4 replica(s) needs 8 GPUs on this node; 7 visible");
}

// $LLAMA_API_KEY is the server's key (rank 0 and the replicas get it from
// the launcher: workers never inherit the variable itself); --api_key wins.
TEST(PlanLaunchTest, TheKeyInTheEnvironmentIsTheServers) {
  LauncherFlags flags = Checkpoint("/data/m");
  flags.job.prompt.clear();
  LaunchContext context = Context();
  context.getenv = [](const char* name) -> const char* {
    return std::string(name) == "LLAMA_API_KEY" ? "from-shell" : nullptr;
  };
  EXPECT_EQ(PlanLaunch({"serve"}, flags, context)->job.api_key, "from-shell");
  flags.job.api_key = "given";
  EXPECT_EQ(PlanLaunch({"serve"}, flags, context)->job.api_key, "given");
}

TEST(PlanLaunchTest, ReplicasAreAServersAndEveryNodeRunsAsMany) {
  LauncherFlags flags = Checkpoint("/data/m");
  flags.data_parallel_size = 2;
  LaunchContext context = Context();
  context.allowed_cpus = {0, 1};
  EXPECT_EQ(PlanLaunch({}, flags, context).status().message(),
            "--data_parallel_size=2: replicas are for launcher serve; a batch job or a chat runs one engine");
  flags.job.prompt.clear();
  EXPECT_EQ(PlanLaunch({"chat"}, flags, context).status().message(),
            "--data_parallel_size=2: replicas are for launcher serve; a batch job or a chat runs one engine");
  // Across nodes: as many replicas on each, node 0 binds the registry's
  // port, and the shards are a replica's.
  flags.nnodes = 2;
  flags.data_parallel_size = 4;
  absl::StatusOr<LaunchPlan> across = PlanLaunch({"serve"}, flags, context);
  ASSERT_TRUE(across.ok()) << across.status();
  EXPECT_EQ(across->replicas_per_node, 2);
  EXPECT_TRUE(across->bind_store);
  EXPECT_EQ(across->world_size, 1);
  EXPECT_EQ(across->convert.world_size, 1);
  flags.node_rank = 1;
  EXPECT_FALSE(PlanLaunch({"serve"}, flags, context)->bind_store);
  flags.node_rank = 0;
  flags.data_parallel_size = 3;
  EXPECT_EQ(PlanLaunch({"serve"}, flags, context).status().message(),
            "--data_parallel_size=3 on 2 nodes: give each node as many replicas (a multiple of the node count)");
  flags.nnodes = 1;
  flags.data_parallel_size = 2;
  flags.data_parallel_size = 3;
  EXPECT_EQ(PlanLaunch({"serve"}, flags, context).status().message(),
            "--data_parallel_size=3 x --nproc_per_node=1 needs a CPU per rank; this process may run on 2");
  flags.data_parallel_size = 2;
  flags.nproc_per_node = 2;
  EXPECT_EQ(PlanLaunch({"serve"}, flags, context).status().message(),
            "--data_parallel_size=2 x --nproc_per_node=2 needs a CPU per rank; this process may run on 2");
  flags.nproc_per_node = 1;
  flags.data_parallel_size = 0;
  EXPECT_EQ(PlanLaunch({"serve"}, flags, context).status().message(), "--data_parallel_size=0: expected at least 1");
  flags.data_parallel_size = 2;
  flags.routing = "random";
  EXPECT_EQ(PlanLaunch({"serve"}, flags, context).status().message(),
            "--routing=random: expected prefix, least_loaded or round_robin");
  flags.routing = "prefix";
  flags.max_restarts = -1;
  EXPECT_EQ(PlanLaunch({"serve"}, flags, context).status().message(), "--max_restarts=-1: expected at least 0");
}

TEST(PlanLaunchTest, CudaWhenBuiltInAndAGpuIsVisible) {
  LauncherFlags flags = Checkpoint("/data/m");
  flags.nproc_per_node = 2;
  LaunchContext context = Context();
  context.built_with_cuda = true;
  context.visible_gpus = {"4", "5", "6"};
  absl::StatusOr<LaunchPlan> plan = PlanLaunch({}, flags, context);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->device, "cuda");
  EXPECT_THAT(plan->gpus, ElementsAre("4", "5", "6"));
  context.visible_gpus.clear();
  EXPECT_EQ(PlanLaunch({}, flags, context)->device, "cpu");
}

TEST(WorkerLaunchesTest, CommandLinesAndEnvironment) {
  LauncherFlags flags;
  flags.ckpt_dir = "/data/m";
  flags.nproc_per_node = 2;
  flags.job.api_key = "s3cret";
  LaunchContext context = Context();
  context.built_with_cuda = true;
  context.visible_gpus = {"4", "5"};
  context.environment = {"NCCL_SOCKET_IFNAME=ib0", "OMP_PROC_BIND=false", "RANK=99", "CUDA_VISIBLE_DEVICES=0,1,2",
                         "RENDEZVOUS_LISTEN_FD=3", "LLAMA_API_KEY=from-shell"};
  flags.worker_environment = {"OMP_PROC_BIND=close", "EXTRA=a=b"};
  absl::StatusOr<LaunchPlan> plan = PlanLaunch({"serve"}, flags, context);
  ASSERT_TRUE(plan.ok()) << plan.status();
  PreparedJob prepared;
  prepared.worker_binary = "/bin/worker";
  prepared.shard_dir = "/data/m/shards/tp2";
  prepared.tokenizer_path = "/data/tokenizer.model";
  prepared.token = "job-token";
  prepared.store_fd = 7;
  WorldOptions world = plan->world;
  world.master_port = 29501;
  for (int local_rank = 0; local_rank < 2; ++local_rank) {
    WorkerEnvironment env;
    env.rank = env.local_rank = local_rank;
    env.world_size = env.local_world_size = 2;
    env.master_port = world.master_port;
    env.distributed = true;
    prepared.ranks.push_back(env);
  }
  const std::vector<WorkerLaunch> launches = WorkerLaunches(*plan, prepared);
  ASSERT_EQ(launches.size(), 2u);
  for (const WorkerLaunch& launch : launches) {
    const std::vector<std::string>& argv = launch.process.argv;
    ASSERT_GE(argv.size(), 5u);
    EXPECT_EQ(argv[0], "/bin/worker");
    EXPECT_EQ(argv[1], "--shard_dir=/data/m/shards/tp2");
    EXPECT_EQ(argv[2], "--tokenizer_path=/data/tokenizer.model");
    EXPECT_THAT(argv, Contains("--serve=true"));
    EXPECT_EQ(argv[argv.size() - 2], "--device=cuda");
    EXPECT_EQ(argv.back(), "--summary_file=" + plan->summary_path);
    for (const std::string& arg : argv) EXPECT_THAT(arg, Not(HasSubstr("s3cret")));
    EXPECT_THAT(launch.process.env, Contains("RENDEZVOUS_TOKEN=job-token"));
    EXPECT_THAT(launch.process.env, Contains(absl::StrCat("CUDA_VISIBLE_DEVICES=", 4 + launch.rank)));
  }
  EXPECT_EQ(launches[0].process.inherit_fd, 7);
  // Inherited (NCCL_SOCKET_IFNAME), overridden by --worker_env, added by it;
  // what the launcher sets is never inherited.
  for (const WorkerLaunch& launch : launches) {
    EXPECT_THAT(launch.process.env, Contains("NCCL_SOCKET_IFNAME=ib0"));
    EXPECT_THAT(launch.process.env, Contains("OMP_PROC_BIND=close"));
    EXPECT_THAT(launch.process.env, Not(Contains("OMP_PROC_BIND=false")));
    EXPECT_THAT(launch.process.env, Contains("EXTRA=a=b"));
    EXPECT_THAT(launch.process.env, Not(Contains("RANK=99")));
    EXPECT_THAT(launch.process.env, Not(Contains("CUDA_VISIBLE_DEVICES=0,1,2")));
    EXPECT_THAT(launch.process.env, Not(Contains("RENDEZVOUS_LISTEN_FD=3")));
    EXPECT_THAT(launch.process.env, Not(Contains("LLAMA_API_KEY=from-shell")));
  }
  EXPECT_THAT(launches[0].process.env, Contains("LLAMA_API_KEY=s3cret"));
  EXPECT_THAT(launches[1].process.env, Not(Contains("LLAMA_API_KEY=s3cret")));
  EXPECT_NE(launches[1].process.inherit_fd, 7);
}

}  // namespace
}  // namespace llama
