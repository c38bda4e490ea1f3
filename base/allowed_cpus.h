// The CPUs this process may run on: its affinity mask (what Slurm, taskset
// or a container's cpuset allow), not the machine's count, so that ranks
// sharing an allocation do not oversubscribe it.

#ifndef LLAMA_BASE_ALLOWED_CPUS_H_
#define LLAMA_BASE_ALLOWED_CPUS_H_

#include <vector>

namespace llama {

// sched_getaffinity's count; the machine's where it cannot be read. At least 1.
int AllowedCpuCount();

// The CPUs of that mask, ascending; empty where it cannot be read.
std::vector<int> AllowedCpus();

}  // namespace llama

#endif  // LLAMA_BASE_ALLOWED_CPUS_H_
