// //tools:comm_bench: the TCP collective's all-reduce between local
// processes: latency and bandwidth for buffers from 4 KB to 64 MB.
//
//   bazel run //tools:comm_bench -- --world_size=2
//
// "algbw" is buffer bytes / time; "busbw" scales it by 2 (n - 1) / n, the
// bytes each rank actually sends in a ring all-reduce (NCCL's convention),
// so it is comparable with the link's bandwidth.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <gflags/gflags.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "tools/local_ranks.h"
#include "tools/tool_main.h"
#include "worker/collectives/rendezvous.h"
#include "worker/collectives/tcp_communicator.h"

DEFINE_int32(world_size, 2, "Processes (ranks) on this machine.");
DEFINE_double(seconds_per_size, 0.3, "Time spent measuring each size.");

namespace {

absl::Status RunRank(llama::RendezvousOptions options) {
  const int rank = options.rank;
  options.join_timeout = std::chrono::seconds(30);
  ASSIGN_OR_RETURN(std::unique_ptr<llama::Rendezvous> rendezvous, llama::Rendezvous::Join(options));
  ASSIGN_OR_RETURN(std::unique_ptr<llama::TcpCommunicator> comm,
                   llama::TcpCommunicator::Create(rendezvous.get(), std::chrono::seconds(60)));
  if (rank == 0) {
    std::printf("all-reduce (sum, f32) over TCP on 127.0.0.1, %d ranks\n", FLAGS_world_size);
    std::printf("%10s %12s %12s %12s\n", "bytes", "latency us", "algbw GB/s", "busbw GB/s");
  }
  for (size_t bytes = 4 << 10; bytes <= (64 << 20); bytes *= 4) {
    std::vector<float> data(bytes / sizeof(float), 1.0f);
    // Everyone agrees on the iteration count: rank 0's, broadcast.
    int iterations = 0;
    if (rank == 0) {
      const auto start = std::chrono::steady_clock::now();
      comm->AllReduceSum(data.data(), data.size()).IgnoreError();
      const double once = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      iterations = std::clamp(static_cast<int>(FLAGS_seconds_per_size / std::max(once, 1e-6)), 3, 10000);
    } else {
      comm->AllReduceSum(data.data(), data.size()).IgnoreError();
    }
    RETURN_IF_ERROR(comm->Broadcast(&iterations, sizeof iterations, 0));
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) {
      RETURN_IF_ERROR(comm->AllReduceSum(data.data(), data.size()));
    }
    const double each = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iterations;
    if (rank == 0) {
      const double algbw = bytes / each / 1e9;
      std::printf("%10zu %12.1f %12.3f %12.3f\n", bytes, each * 1e6, algbw,
                  algbw * 2 * (FLAGS_world_size - 1) / FLAGS_world_size);
    }
  }
  return rendezvous->Finish();
}

}  // namespace

int main(int argc, char** argv) {
  return llama::ToolMain(argc, argv, "comm_bench", "Measures the TCP all-reduce between local processes.",
                         [](const std::vector<std::string>&) {
                           if (FLAGS_world_size < 2) return absl::InvalidArgumentError("--world_size must be at least 2");
                           return llama::RanksEnded(llama::RunLocalRanks(
                               FLAGS_world_size, "comm-bench", [](const llama::RendezvousOptions& join) {
                                 return llama::ReportFailure(absl::StrCat("comm_bench rank ", join.rank).c_str(),
                                                             RunRank(join));
                               }));
                         });
}
