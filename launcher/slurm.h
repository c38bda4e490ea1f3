// SLURM support: the compressed node-list syntax, and the mapping from an
// srun step's variables to our job layout.

#ifndef LLAMA_LAUNCHER_SLURM_H_
#define LLAMA_LAUNCHER_SLURM_H_

#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llama {

// Expands SLURM's node list syntax: "gpu[01-04,07]", "a1,b[2-3]",
// "rack[1-2]-n[1-2]" (each bracket multiplies), zero padding kept from the
// lower bound. Errors quote the list and say what is wrong.
absl::StatusOr<std::vector<std::string>> ExpandNodeList(absl::string_view list);

struct SlurmPlacement {
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr;  // First node of the job's node list.
  int master_port = 0;      // Derived from the job id.
  std::string job_id;
};

// Inside an srun step (SLURM_JOB_ID and SLURM_STEP_ID set) returns where
// this launcher stands: one launcher task per node (the step's
// SLURM_STEP_NUM_TASKS must equal its SLURM_STEP_NUM_NODES). Outside SLURM,
// and in a batch script (which has SLURM_PROCID but no SLURM_STEP_ID: the
// script itself, not a step's task), returns nullopt: a plain launcher.
absl::StatusOr<std::optional<SlurmPlacement>> ReadSlurmPlacement(
    const std::function<const char*(const char*)>& get = [](const char* name) { return std::getenv(name); });

// The sbatch script for a job of `nodes` nodes with `workers_per_node`
// workers and `gpus_per_node` GPUs (0: no GPU request, for partitions
// without GPUs), running `launcher` with `launcher_args` through srun (one
// task per node, every output line labelled with its node, the whole step
// ended as soon as one node fails). It makes a fresh RENDEZVOUS_TOKEN for
// the job. `extra` are more sbatch options ("--qos=high"), one #SBATCH
// line each.
struct SbatchOptions {
  int nodes = 1;
  int workers_per_node = 1;
  int gpus_per_node = 0;
  std::string partition, time, account, job_name = "llama2";
  std::vector<std::string> extra;
};

// `text` single-quoted for the shell: a space or quote stays in one word.
std::string ShellQuote(const std::string& text);
std::string SbatchScript(const SbatchOptions& options, const std::string& launcher,
                         const std::vector<std::string>& launcher_args);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_SLURM_H_
