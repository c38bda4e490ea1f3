// Runs a tool's ranks as local processes: rank 0 in this process, the
// others forked, all sharing a free rendezvous port on 127.0.0.1.

#ifndef LLAMA_TOOLS_LOCAL_RANKS_H_
#define LLAMA_TOOLS_LOCAL_RANKS_H_

#include <functional>

namespace llama {

// Calls run(rank, port) in `world_size` processes; returns 0 if every rank
// returned 0. Call before starting any thread (fork).
int RunLocalRanks(int world_size, const std::function<int(int rank, int port)>& run);

}  // namespace llama

#endif  // LLAMA_TOOLS_LOCAL_RANKS_H_
