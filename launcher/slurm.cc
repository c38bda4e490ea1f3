#include "launcher/slurm.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace llama {
namespace {

constexpr size_t kMaxNodes = 1 << 20;

absl::Status BadList(absl::string_view list, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrFormat("SLURM node list \"%s\": %s", list, why));
}

// Expands the inside of one bracket: "01-04,07" -> {"01","02","03","04","07"}.
absl::StatusOr<std::vector<std::string>> ExpandRanges(absl::string_view ranges, absl::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view range : absl::StrSplit(ranges, ',')) {
    const std::vector<absl::string_view> bounds = absl::StrSplit(range, '-');
    if (bounds.empty() || bounds.size() > 2 || bounds[0].empty() || (bounds.size() == 2 && bounds[1].empty())) {
      return BadList(list, absl::StrFormat("bad range \"%s\"", range));
    }
    for (absl::string_view b : bounds) {
      for (char c : b) {
        if (!absl::ascii_isdigit(c)) return BadList(list, absl::StrFormat("\"%s\" is not a number", b));
      }
    }
    uint64_t low = 0, high = 0;
    if (!absl::SimpleAtoi(bounds[0], &low) || !absl::SimpleAtoi(bounds.back(), &high)) {
      return BadList(list, absl::StrFormat("bad range \"%s\"", range));
    }
    if (low > high) return BadList(list, absl::StrFormat("range \"%s\" runs backwards", range));
    if (high - low >= kMaxNodes) return BadList(list, "too many nodes");
    const int width = bounds[0].size();
    for (uint64_t n = low; n <= high; ++n) out.push_back(absl::StrFormat("%0*d", width, n));
  }
  return out;
}

// Expands one host expression (no top-level commas).
absl::StatusOr<std::vector<std::string>> ExpandHost(absl::string_view host, absl::string_view list) {
  std::vector<std::string> names = {""};
  while (!host.empty()) {
    const size_t open = host.find('[');
    const size_t stray = host.find(']');
    if (stray != absl::string_view::npos && (open == absl::string_view::npos || stray < open)) {
      return BadList(list, "unbalanced ']'");
    }
    const absl::string_view literal = host.substr(0, open);
    for (std::string& n : names) absl::StrAppend(&n, literal);
    if (open == absl::string_view::npos) break;
    const size_t close = host.find(']', open);
    if (close == absl::string_view::npos) return BadList(list, "unbalanced '['");
    ASSIGN_OR_RETURN(const std::vector<std::string> numbers,
                     ExpandRanges(host.substr(open + 1, close - open - 1), list));
    if (names.size() * numbers.size() > kMaxNodes) return BadList(list, "too many nodes");
    std::vector<std::string> product;
    for (const std::string& n : names) {
      for (const std::string& number : numbers) product.push_back(n + number);
    }
    names = std::move(product);
    host.remove_prefix(close + 1);
  }
  return names;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandNodeList(absl::string_view list) {
  if (list.empty()) return BadList(list, "empty");
  std::vector<std::string> nodes;
  // Split at commas outside brackets.
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size() && list[i] == '[') ++depth;
    if (i < list.size() && list[i] == ']') --depth;
    if (depth < 0) return BadList(list, "unbalanced ']'");
    if (depth > 1) return BadList(list, "nested brackets");
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      const absl::string_view host = list.substr(start, i - start);
      if (host.empty()) return BadList(list, "empty host name");
      ASSIGN_OR_RETURN(const std::vector<std::string> expanded, ExpandHost(host, list));
      nodes.insert(nodes.end(), expanded.begin(), expanded.end());
      start = i + 1;
    }
  }
  if (depth != 0) return BadList(list, "unbalanced '['");
  return nodes;
}

absl::StatusOr<std::optional<SlurmPlacement>> ReadSlurmPlacement(const std::function<const char*(const char*)>& get) {
  if (get("SLURM_JOB_ID") == nullptr || get("SLURM_STEP_ID") == nullptr) return std::nullopt;
  const auto read_int = [&](const char* name, int* out) -> absl::Status {
    const char* value = get(name);
    if (value == nullptr || !absl::SimpleAtoi(value, out) || *out < 0) {
      return absl::InvalidArgumentError(absl::StrFormat("SLURM variable %s=\"%s\": expected a non-negative integer",
                                                        name, value == nullptr ? "(unset)" : value));
    }
    return absl::OkStatus();
  };
  // The step's own counts; SLURM_NTASKS and SLURM_NNODES are the job's
  // where the step is not the whole allocation. Slurm before 20.11 set only
  // those.
  const auto step_or_job = [&](const char* step, const char* job) { return get(step) != nullptr ? step : job; };
  SlurmPlacement p;
  int tasks = 0, nodes = 0, job = 0;
  for (const auto& [name, out] :
       {std::pair<const char*, int*>{"SLURM_PROCID", &p.node_rank},
        {step_or_job("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"), &tasks},
        {step_or_job("SLURM_STEP_NUM_NODES", "SLURM_NNODES"), &nodes},
        {"SLURM_JOB_ID", &job}}) {
    RETURN_IF_ERROR(read_int(name, out));
  }
  if (tasks != nodes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "SLURM step has %d tasks on %d nodes; run one launcher per node (srun --ntasks-per-node=1), it starts "
        "--nproc_per_node workers itself",
        tasks, nodes));
  }
  p.nnodes = nodes;
  p.job_id = get("SLURM_JOB_ID");
  const char* list = get("SLURM_STEP_NODELIST") != nullptr ? get("SLURM_STEP_NODELIST") : get("SLURM_JOB_NODELIST");
  if (list == nullptr) return absl::InvalidArgumentError("SLURM_JOB_NODELIST is not set");
  ASSIGN_OR_RETURN(const std::vector<std::string> hosts, ExpandNodeList(list));
  p.master_addr = hosts.front();
  // A port per job, so jobs sharing a node do not collide: 20000-31999,
  // below Linux's ephemeral range (32768-60999), so no outgoing
  // connection's local port can already hold it.
  p.master_port = 20000 + job % 12000;
  return p;
}

std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string SbatchScript(const SbatchOptions& o, const std::string& launcher, const std::vector<std::string>& args) {
  std::string script = "#!/bin/bash\n";
  // --exclusive: every CPU of each node (the launcher's workers and, on CPU
  // nodes, the model use them all). --output: one log per job in the folder
  // sbatch was run from.
  absl::StrAppend(&script, "#SBATCH --job-name=", o.job_name, "\n#SBATCH --nodes=", o.nodes,
                  "\n#SBATCH --ntasks-per-node=1\n");
  if (o.gpus_per_node > 0) absl::StrAppend(&script, "#SBATCH --gpus-per-node=", o.gpus_per_node, "\n");
  absl::StrAppend(&script, "#SBATCH --exclusive\n#SBATCH --output=", o.job_name, "-%j.out\n");
  if (!o.partition.empty()) absl::StrAppend(&script, "#SBATCH --partition=", o.partition, "\n");
  if (!o.time.empty()) absl::StrAppend(&script, "#SBATCH --time=", o.time, "\n");
  if (!o.account.empty()) absl::StrAppend(&script, "#SBATCH --account=", o.account, "\n");
  for (const std::string& option : o.extra) absl::StrAppend(&script, "#SBATCH ", option, "\n");
  // --kill-on-bad-exit: a node that fails ends the others at once, instead
  // of leaving them waiting out --rendezvous_timeout for it. --label: each
  // line of the job's output says which node wrote it.
  absl::StrAppend(&script,
                  "set -euo pipefail\n"
                  "# One secret per job, shared by every node's launcher through the environment.\n"
                  "export RENDEZVOUS_TOKEN=\"$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n')\"\n"
                  "# Node 0's address as Slurm itself reaches it (its NodeAddr; the node's name when\n"
                  "# none is set or scontrol cannot say), so the job runs where node names do not\n"
                  "# resolve. sed reads all its input: scontrol never dies of SIGPIPE under pipefail.\n"
                  "node0=\"$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | sed -n 1p)\"\n"
                  "node0_addr=\"$(scontrol show node \"$node0\" -o | sed -n 's/.* NodeAddr=\\([^ ]*\\).*/\\1/p' || true)\"\n"
                  "srun --ntasks-per-node=1 --kill-on-bad-exit=1 --label ",
                  ShellQuote(launcher), " --nproc_per_node=", o.workers_per_node,
                  " --master_addr=\"${node0_addr:-$node0}\"");
  for (const std::string& arg : args) absl::StrAppend(&script, " ", ShellQuote(arg));
  absl::StrAppend(&script, "\n");
  return script;
}

}  // namespace llama
