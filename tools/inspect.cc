// //tools:inspect: lists the tensors and model config of a .pth file or a
// shard: name, dtype, shape, split and checksum.
//
//   inspect llama-2-7b/consolidated.00.pth
//   inspect --verify llama-2-7b/shards/tp1/rank-0-of-1.shard

#include <cstdio>
#include <string>
#include <vector>

#include <gflags/gflags.h>
#include <xxhash.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "checkpoint/pth_reader.h"
#include "checkpoint/shard_format.h"
#include "tools/tool_main.h"

DEFINE_bool(verify, false, "For a shard: recompute every tensor's checksum.");

namespace {

absl::Status InspectPth(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<llama::PthFile> pth, llama::PthFile::Open(path));
  std::printf("%s: PyTorch checkpoint, %zu tensors\n", path.c_str(), pth->tensors().size());
  std::printf("%-40s %-5s %-16s %s\n", "name", "dtype", "shape", "xxh3_64");
  for (const llama::FileTensor& t : pth->tensors()) {
    std::printf("%-40s %-5s %-16s %016llx\n", t.name.c_str(), std::string(llama::DTypeName(t.dtype)).c_str(),
                absl::StrCat("[", absl::StrJoin(t.shape, ", "), "]").c_str(),
                static_cast<unsigned long long>(XXH3_64bits(t.bytes.data(), t.bytes.size())));
  }
  return absl::OkStatus();
}

absl::Status InspectShard(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<llama::ShardReader> reader, llama::ShardReader::Open(path));
  const llama::shard::ShardIndex& index = reader->index();
  const llama::shard::ModelConfig& c = index.config();
  std::printf("%s: shard for rank %d of %d (%s), %d tensors\n", path.c_str(), index.rank(), index.world_size(),
              index.converter_version().c_str(), index.tensors_size());
  std::printf("config: dim=%lld n_layers=%lld n_heads=%lld n_kv_heads=%lld vocab_size=%lld multiple_of=%lld",
              (long long)c.dim(), (long long)c.n_layers(), (long long)c.n_heads(), (long long)c.n_kv_heads(),
              (long long)c.vocab_size(), (long long)c.multiple_of());
  if (c.has_ffn_dim_multiplier()) std::printf(" ffn_dim_multiplier=%g", c.ffn_dim_multiplier());
  if (c.has_hidden_dim()) std::printf(" hidden_dim=%lld", (long long)c.hidden_dim());
  if (c.has_rope_scaling()) {
    std::printf(" rope_scaling={factor=%g low_freq_factor=%g high_freq_factor=%g original_context=%g}",
                c.rope_scaling().factor(), c.rope_scaling().low_freq_factor(), c.rope_scaling().high_freq_factor(),
                c.rope_scaling().original_context());
  }
  std::printf(" norm_eps=%g rope_theta=%g ffn_hidden=%lld\n", c.norm_eps(), c.rope_theta(),
              (long long)llama::ModelConfigFromProto(c).ffn_hidden_dim());
  for (const llama::shard::SourceFile& s : index.sources()) {
    std::printf("source: %s (%llu bytes%s%s)\n", s.name().c_str(), (unsigned long long)s.size(),
                s.md5().empty() ? "" : ", md5 ", s.md5().c_str());
  }
  std::printf("%-40s %-5s %-16s %-22s %s\n", "name", "dtype", "shape", "split (dim: range/full)", "xxh3_64");
  for (const llama::shard::TensorEntry& e : index.tensors()) {
    const std::string split = e.split().dim() < 0
                                  ? std::string("replicated")
                                  : absl::StrFormat("%d: [%d, %d) of %d", e.split().dim(), e.split().begin(),
                                                    e.split().end(), e.split().full_extent());
    std::printf("%-40s %-5s %-16s %-22s %016llx\n", e.name().c_str(),
                std::string(llama::DTypeName(static_cast<llama::DType>(e.dtype()))).c_str(),
                absl::StrCat("[", absl::StrJoin(e.shape(), ", "), "]").c_str(), split.c_str(),
                static_cast<unsigned long long>(e.xxh3_64()));
  }
  if (FLAGS_verify) {
    RETURN_IF_ERROR(reader->VerifyChecksums());
    std::printf("checksums: all %d tensors OK\n", index.tensors_size());
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  return llama::ToolMain(argc, argv, "inspect",
                         "inspect [--verify] PATH: lists a .pth file's or a shard's tensors and config.",
                         [](const std::vector<std::string>& args) {
                           if (args.size() != 1) {
                             return absl::InvalidArgumentError("expected one PATH (a .pth file or a .shard file)");
                           }
                           return absl::EndsWith(args[0], ".shard") ? InspectShard(args[0]) : InspectPth(args[0]);
                         });
}
