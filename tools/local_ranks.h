// Runs a tool's ranks as local processes: rank 0 in this process, the
// others forked, meeting at a store rank 0 hosts on 127.0.0.1.

#ifndef LLAMA_TOOLS_LOCAL_RANKS_H_
#define LLAMA_TOOLS_LOCAL_RANKS_H_

#include <functional>
#include <string>

#include "worker/collectives/rendezvous.h"

namespace llama {

// Calls run(options) in `world_size` processes, with options filled in for
// that rank's rendezvous (the store's socket is bound before any fork, so no
// other program can take its port); returns the job's exit status: rank
// 0's, or when it returned 0 the first other rank's that did not (1 for one
// a signal ended), so a flag every rank refuses still exits 2. Call before
// starting any thread (fork).
int RunLocalRanks(int world_size, const std::string& token,
                  const std::function<int(const RendezvousOptions& options)>& run);

}  // namespace llama

#endif  // LLAMA_TOOLS_LOCAL_RANKS_H_
