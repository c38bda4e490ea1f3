#include "launcher/usage.h"

#include "launcher/launcher_flags.h"
#include "worker/job_flags.h"

namespace llama {

const char kLauncherUsage[] = R"(Runs Llama 2 inference: converts the checkpoint to shards for the world size,
starts one worker per rank, supervises them, and prints rank 0's results.

Chatting in the terminal (the answer streams; /reset, /exit; Ctrl-C stops
an answer; with stdin not a terminal, one user turn per line):
  launcher chat --ckpt_dir=llama-2-7b-chat [--system_prompt="Answer briefly."]

Serving the OpenAI API (rank 0 listens; the same flags choose the model and
the ranks; Ctrl-C or SIGTERM drains the requests in flight, then exits 0):
  launcher serve --ckpt_dir=llama-2-7b-chat --nproc_per_node=2 --port=8000 [--api_key=...]
  curl localhost:8000/v1/chat/completions -d '{"model": "llama-2-7b-chat", "messages": [...]}'

Single node (here: 2 workers, tensor parallel over TCP):
  launcher --ckpt_dir=llama-2-7b --nproc_per_node=2 --prompt="I believe the meaning of life is"
  launcher --ckpt_dir=llama-2-7b-chat --dialogs_file=dialogs.json --max_seq_len=512
With no --ckpt_dir, runs the demo job: a small random-weight checkpoint made
on the spot (the text is meaningless; it shows the machinery working).

Several nodes (the same command on each, node_rank 0..nnodes-1; all nodes
share RENDEZVOUS_TOKEN, from the environment or --token_file):
  RENDEZVOUS_TOKEN=... launcher --nnodes=2 --node_rank=0 --master_addr=node0 --master_port=29500 \
      --nproc_per_node=8 --ckpt_dir=/data/llama-2-70b --prompts_file=prompts.jsonl

SLURM: inside `srun --ntasks-per-node=1 launcher ...` the node rank, node
count, master host (first of SLURM_JOB_NODELIST) and port come from SLURM.
To write and submit the batch script:
  launcher sbatch --nodes=2 --gpus_per_node=8 --partition=gpu --time=1:00:00 \
      --launcher_path=/shared/llama/launcher --ckpt_dir=/data/llama-2-70b --prompt="..."
  (--dry_run prints the script without submitting it)

Download (download.sh's job: same files and layout, resumable, parallel,
MD5-checked while downloading; the URL is read from --url, --url_file,
$PRESIGNED_URL or typed at the terminal, and never printed):
  launcher download --models=7B,13B-chat --target_dir=$HOME/llama
  launcher download --models=Llama3.1-8B-Instruct --target_dir=$HOME/llama   (llama-stack's ids)

Exit status (the worker's and the tools' too), after one line saying why:
  0    success (and after a server's drain)
  1    the run failed: a rank (named, with how it ended, its last error and
       its log), I/O, a deadline, memory or disk; also a job whose prompts
       could not all run (the others' answers are kept). Retrying may help.
  2    the input is wrong: a flag, a path, a file's contents. Fix it.
  130  interrupted (Ctrl-C or SIGTERM stop every worker; a second one kills
       them at once)
)";

namespace {

using Job = JobFlagGroup;
using Launcher = LauncherFlagGroup;

FlagGroup ModelGroup(bool with_input) {
  std::vector<std::string> flags = FlagList({LauncherFlagNames(Launcher::kModel), JobFlagNames(Job::kModelFiles),
                                             LauncherFlagNames(Launcher::kConversion)});
  if (with_input) flags = FlagList({flags, JobFlagNames(Job::kInput)});
  return {with_input ? "The model and the job" : "The model", flags};
}

// What every command that starts ranks reads after the model.
std::vector<FlagGroup> RankGroups() {
  return {{"The engine", JobFlagNames(Job::kEngine)},
          {"Each rank's model", JobFlagNames(Job::kRankModel)},
          {"Ranks and nodes (torchrun's flags)",
           FlagList({LauncherFlagNames(Launcher::kTopology), JobFlagNames(Job::kDeadlines)})},
          {"Running", FlagList({LauncherFlagNames(Launcher::kRunning), {"log_dir"}})}};
}

FlagGroup ReplicasGroup() {
  return {"launcher serve: replicas behind one endpoint", LauncherFlagNames(Launcher::kReplicas)};
}

const FlagGroup kSbatchGroup = {"launcher sbatch",
                                {"nodes", "gpus_per_node", "partition", "time", "account", "launcher_path", "dry_run"}};
const FlagGroup kDownloadGroup = {"launcher download", {"models", "target_dir", "url", "url_file", "connections"}};

std::vector<FlagGroup> Concat(std::vector<FlagGroup> head, const std::vector<FlagGroup>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

}  // namespace

std::vector<FlagGroup> LauncherFlagGroups() {
  std::vector<FlagGroup> groups = {ModelGroup(/*with_input=*/true),
                                   {"Generation", JobFlagNames(Job::kGeneration)}};
  const std::vector<FlagGroup> ranks = RankGroups();
  groups.push_back(ranks[0]);
  groups.push_back({"launcher chat", LauncherFlagNames(Launcher::kChat)});
  groups.push_back({"launcher serve", JobFlagNames(Job::kServing)});
  groups.push_back(ReplicasGroup());
  groups.insert(groups.end(), ranks.begin() + 1, ranks.end());
  groups.push_back(kSbatchGroup);
  groups.push_back(kDownloadGroup);
  return groups;
}

LauncherHelp HelpFor(const std::string& subcommand) {
  if (subcommand == "serve") {
    return {"launcher serve: serves the OpenAI API (/v1/completions, /v1/chat/completions, /v1/models) from the\n"
            "model the flags choose, on the same ranks as a job; rank 0 listens. Ctrl-C or SIGTERM drains the\n"
            "requests in flight, then exits 0.\n"
            "  launcher serve --ckpt_dir=llama-2-7b-chat --nproc_per_node=2 --port=8000 [--api_key=...]\n",
            Concat({ModelGroup(false), {"launcher serve", JobFlagNames(Job::kServing)}, ReplicasGroup()}, RankGroups())};
  }
  if (subcommand == "chat") {
    return {"launcher chat: chats with the model in the terminal (the answer streams; /reset clears the history,\n"
            "/exit leaves; Ctrl-C stops an answer; with stdin not a terminal, one user turn per line). Exits 1\n"
            "when the last turn failed.\n"
            "  launcher chat --ckpt_dir=llama-2-7b-chat [--system_prompt=\"Answer briefly.\"]\n",
            Concat({ModelGroup(false), {"Generation", {"temperature", "top_p", "max_gen_len"}},
                    {"launcher chat", LauncherFlagNames(Launcher::kChat)}},
                   RankGroups())};
  }
  if (subcommand == "download") {
    return {"launcher download: downloads Meta's checkpoints (download.sh's job: same files and layout,\n"
            "resumable, parallel, MD5-checked while downloading; the URL is read from --url, --url_file,\n"
            "$PRESIGNED_URL or typed at the terminal, and never printed).\n"
            "  launcher download --models=7B,13B-chat --target_dir=$HOME/llama\n",
            {kDownloadGroup}};
  }
  if (subcommand == "sbatch") {
    return {"launcher sbatch: writes the Slurm batch script that runs this launcher on each node, and submits\n"
            "it (--dry_run prints it instead); the job's own flags go into the script.\n"
            "  launcher sbatch --nodes=2 --gpus_per_node=8 --partition=gpu --time=1:00:00 \\\n"
            "      --launcher_path=/shared/llama/launcher --ckpt_dir=/data/llama-2-70b --prompt=\"...\"\n",
            Concat({kSbatchGroup, ModelGroup(true), {"Generation", JobFlagNames(Job::kGeneration)}}, RankGroups())};
  }
  return {kLauncherUsage, LauncherFlagGroups()};
}

std::string SubcommandOf(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (!arg.empty() && arg[0] != '-') return arg;
  }
  return "";
}

}  // namespace llama
