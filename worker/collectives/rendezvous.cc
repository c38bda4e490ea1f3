#include "worker/collectives/rendezvous.h"

#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace llama {

namespace {

absl::StatusOr<std::unique_ptr<TcpStoreServer>> HostStore(const RendezvousOptions& options) {
  if (options.listen_fd < 0) {
    // Only where the other ranks reach us (MASTER_ADDR), not on every network.
    ASSIGN_OR_RETURN(const std::string address, net::AddressReaching(options.master_addr));
    return TcpStoreServer::Start(address, options.master_port, options.token);
  }
  ASSIGN_OR_RETURN(net::Socket listener, net::AdoptListener(options.listen_fd));
  ASSIGN_OR_RETURN(const int port, net::LocalPort(listener));
  if (port != options.master_port) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the listening socket RENDEZVOUS_LISTEN_FD=%d is on port %d, not MASTER_PORT", options.listen_fd, port));
  }
  return TcpStoreServer::Start(std::move(listener), options.token);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Rendezvous>> Rendezvous::Join(const RendezvousOptions& options) {
  if (options.world_size > 1 && options.token.empty()) {
    return absl::InvalidArgumentError(
        "RENDEZVOUS_TOKEN is not set: jobs of more than one rank need a shared secret (the launcher sets it)");
  }
  if (options.listen_fd >= 0 && options.rank != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", options.rank, " was given a listening socket (RENDEZVOUS_LISTEN_FD): only rank 0 hosts the store"));
  }
  std::unique_ptr<TcpStoreServer> server;
  if (options.rank == 0) {
    absl::StatusOr<std::unique_ptr<TcpStoreServer>> started = HostStore(options);
    if (!started.ok()) {
      return Annotate(started.status(),
                      absl::StrCat("rank 0 cannot host the rendezvous store (MASTER_PORT=", options.master_port, ")"));
    }
    server = *std::move(started);
  }
  // Rank 0 connects to the port its store took (master_port may be 0 there).
  const int port = server ? server->port() : options.master_port;
  absl::StatusOr<std::unique_ptr<TcpStoreClient>> client = TcpStoreClient::Connect(
      options.master_addr, port, options.token, options.rank, net::After(options.join_timeout));
  if (!client.ok()) {
    return Annotate(client.status(), absl::StrCat("rank ", options.rank, " could not join the job"));
  }
  auto rendezvous = std::unique_ptr<Rendezvous>(new Rendezvous(options, std::move(server), *std::move(client)));
  RETURN_IF_ERROR(rendezvous->store().Set(absl::StrCat("joined/", options.rank), "1"));
  RETURN_IF_ERROR(rendezvous->WaitForAll("joined/", options.join_timeout, "ranks joined"));
  return rendezvous;
}

Rendezvous::~Rendezvous() { client_->Close().IgnoreError(); }

absl::Status Rendezvous::WaitForAll(const std::string& prefix, std::chrono::milliseconds timeout,
                                    const std::string& what) {
  const auto start = net::Clock::now();
  const auto deadline = start + timeout;
  std::vector<bool> seen(options_.world_size, false);
  int count = 0;
  while (true) {
    for (int r = 0; r < options_.world_size; ++r) {
      if (seen[r]) continue;
      ASSIGN_OR_RETURN(bool present, client_->Check(absl::StrCat(prefix, r)));
      if (present) {
        seen[r] = true;
        ++count;
        continue;
      }
      ASSIGN_OR_RETURN(bool lost, client_->Check(absl::StrCat("lost/", r)));
      if (lost) {
        return absl::UnavailableError(absl::StrFormat(
            "rank %d disconnected before it was ready (%s: %d/%d); see its log", r, what, count,
            options_.world_size));
      }
    }
    if (count == options_.world_size) return absl::OkStatus();
    if (net::Clock::now() >= deadline) {
      std::vector<int> missing;
      for (int r = 0; r < options_.world_size; ++r) {
        if (!seen[r]) missing.push_back(r);
      }
      return absl::DeadlineExceededError(absl::StrFormat(
          "%d/%d %s after %.0f s; missing: %s", count, options_.world_size, what,
          std::chrono::duration<double>(net::Clock::now() - start).count(), absl::StrJoin(missing, ", ")));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

absl::Status Rendezvous::AgreeOnModel(const std::string& fingerprint) {
  RETURN_IF_ERROR(client_->Set(absl::StrCat("model/", options_.rank), fingerprint));
  RETURN_IF_ERROR(WaitForAll("model/", options_.load_timeout, "ranks loaded their shard"));
  for (int r = 0; r < options_.world_size; ++r) {
    ASSIGN_OR_RETURN(std::string theirs, client_->Get(absl::StrCat("model/", r), std::chrono::seconds(10)));
    if (theirs != fingerprint) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "rank %d loaded a different model than rank %d (%s vs %s); every rank must use shards of one "
          "conversion",
          r, options_.rank, theirs, fingerprint));
    }
  }
  return absl::OkStatus();
}

absl::Status Rendezvous::Finish() {
  RETURN_IF_ERROR(client_->Set(absl::StrCat("finished/", options_.rank), "1"));
  if (options_.rank != 0) return absl::OkStatus();
  // Keep the store up until every rank is done with it.
  return WaitForAll("finished/", std::chrono::minutes(5), "ranks finished");
}

}  // namespace llama
