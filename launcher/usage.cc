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

Exit status: 0 on success (and after a server's drain); 1 with one line
naming the rank that failed, how, its last error and its log; 130 when a
job is interrupted (Ctrl-C or SIGTERM stop every worker; a second one kills
them at once).
)";

std::vector<FlagGroup> LauncherFlagGroups() {
  using Job = JobFlagGroup;
  using Launcher = LauncherFlagGroup;
  return {
      {"The model and the job",
       FlagList({LauncherFlagNames(Launcher::kModel), JobFlagNames(Job::kModelFiles),
                 LauncherFlagNames(Launcher::kConversion), JobFlagNames(Job::kInput)})},
      {"Generation", JobFlagNames(Job::kGeneration)},
      {"The engine", JobFlagNames(Job::kEngine)},
      {"launcher chat", LauncherFlagNames(Launcher::kChat)},
      {"launcher serve", JobFlagNames(Job::kServing)},
      {"Each rank's model", JobFlagNames(Job::kRankModel)},
      {"Ranks and nodes (torchrun's flags)",
       FlagList({LauncherFlagNames(Launcher::kTopology), JobFlagNames(Job::kDeadlines)})},
      {"Running", FlagList({LauncherFlagNames(Launcher::kRunning), {"log_dir"}})},
      {"launcher sbatch", {"nodes", "gpus_per_node", "partition", "time", "account", "launcher_path", "dry_run"}},
      {"launcher download", {"models", "target_dir", "url", "url_file", "connections"}},
  };
}

}  // namespace llama
