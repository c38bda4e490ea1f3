#include "worker/job_identity.h"

#include <map>
#include <utility>

#include <xxhash.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/durable_file.h"
#include "base/status_macros.h"
#include "ops/dtype.h"

namespace llama {
namespace {

constexpr char kContext[] = "context";

std::string Digest(const std::string& bytes) {
  return absl::StrFormat("%016x", XXH3_64bits(bytes.data(), bytes.size()));
}

// The checkpoint the shards were converted from, whatever the world size:
// its config, rotary layout and source files. A source is named by its
// checklist MD5 where the checkpoint has one, else by its modification time
// as well (a file rewritten in place keeps its name and size).
std::string ModelDigest(const shard::ShardIndex& index) {
  shard::ShardIndex checkpoint;
  *checkpoint.mutable_config() = index.config();
  checkpoint.set_rope_layout(index.rope_layout());
  for (const shard::SourceFile& source : index.sources()) {
    shard::SourceFile* named = checkpoint.add_sources();
    named->set_name(source.name());
    named->set_size(source.size());
    if (source.md5().empty()) {
      named->set_mtime_ns(source.mtime_ns());
    } else {
      named->set_md5(source.md5());
    }
  }
  return Digest(checkpoint.SerializeAsString());
}

// Each tensor's stored type, which a conversion chose: "f32 x 20" for an
// f32 conversion, "f32 x 5, q8_0 x 15" for int8, plus a digest of which
// tensor has which type (two Q4_K_M mixes differ only there). Slices of a
// tensor have the same name and type on every rank.
std::string WeightTypes(const shard::ShardIndex& index) {
  std::map<std::string, int> counts;
  std::map<std::string, std::string> types;
  for (const shard::TensorEntry& tensor : index.tensors()) {
    const std::string type(DTypeName(static_cast<DType>(tensor.dtype())));
    ++counts[type];
    types[tensor.name()] = type;
  }
  std::string by_tensor;
  for (const auto& [name, type] : types) absl::StrAppend(&by_tensor, name, "=", type, "\n");
  return absl::StrCat(absl::StrJoin(counts, ", ", [](std::string* out, const std::pair<const std::string, int>& c) {
                        absl::StrAppend(out, c.first, " x ", c.second);
                      }),
                      " (", Digest(by_tensor), ")");
}

// How a refusal names each field (fields() keys, in their order).
const std::map<std::string, std::string>& FieldNames() {
  static const auto* names = new std::map<std::string, std::string>{
      {"model", "model shards"},
      {"weights", "weight dtypes"},
      {"tokenizer", "tokenizers"},
      {"chat_format", "chat formats"},
      {"device", "devices"},
      {"kv_cache_dtype", "--kv_cache_dtype values"},
      {"int8_prefill", "--int8_prefill values"},
      {"bf16_activations", "--bf16_activations values"},
      {"inputs", "prompts or dialogs"},
      {"temperature", "--temperature values"},
      {"top_p", "--top_p values"},
      {"typical_p", "--typical_p values"},
      {"context", "contexts (--max_seq_len, or the model's own as the KV cache holds it)"},
      {"max_gen_len", "--max_gen_len values"},
      {"seed", "--seed values"},
      {"logprobs", "--logprobs values"},
      {"echo", "--echo values"},
      {"json_schema", "JSON schemas (--json_schema)"},
  };
  return *names;
}

std::string Shown(const nlohmann::ordered_json& fields, const std::string& key) {
  const auto it = fields.find(key);
  return it == fields.end() ? "not recorded" : it->dump();
}

}  // namespace

absl::StatusOr<JobIdentity> JobIdentity::Of(const JobInputs& in) {
  ASSIGN_OR_RETURN(const std::string tokenizer, ReadFileToString(in.tokenizer_path));
  const size_t answers = in.job->chat ? in.job->dialogs.size() : in.job->prompts.size();
  nlohmann::ordered_json f;
  f["model"] = ModelDigest(*in.shard_index);
  f["weights"] = WeightTypes(*in.shard_index);
  f["tokenizer"] = Digest(tokenizer);
  if (in.job->chat) f["chat_format"] = in.chat_format;
  f["device"] = in.device;
  f["kv_cache_dtype"] = in.kv_cache_dtype;
  f["int8_prefill"] = in.int8_prefill;
  f["bf16_activations"] = in.bf16_activations;
  f["inputs"] = absl::StrFormat("%d %s (%s)", answers, in.job->chat ? "dialogs" : "prompts",
                                Digest(SerializeJob(*in.job)));
  f["temperature"] = in.temperature;
  f["top_p"] = in.top_p;
  f["typical_p"] = in.typical_p;
  f["max_gen_len"] = in.max_gen_len;
  f["seed"] = in.seed;
  f["logprobs"] = in.logprobs;
  f["echo"] = in.echo;
  f["json_schema"] = in.grammar.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(Digest(in.grammar));
  return JobIdentity(std::move(f));
}

absl::StatusOr<JobIdentity> JobIdentity::FromJson(const nlohmann::json& recorded) {
  if (!recorded.is_object()) {
    return absl::InvalidArgumentError(recorded.is_string()
                                          ? "names its job by a bare key, as older workers wrote it"
                                          : "has a \"job\" that is not an object of the job's inputs");
  }
  return JobIdentity(nlohmann::ordered_json(recorded));
}

JobIdentity JobIdentity::WithContext(int64_t positions) const {
  nlohmann::ordered_json fields = fields_;
  fields[kContext] = positions;
  return JobIdentity(std::move(fields));
}

std::string JobIdentity::FirstDifference(const JobIdentity& other) const {
  const auto describe = [&](const std::string& key) {
    const auto name = FieldNames().find(key);
    return absl::StrFormat("%s differ (this job: %s; the file's: %s)",
                           name != FieldNames().end() ? name->second : "\"" + key + "\"", Shown(fields_, key),
                           Shown(other.fields_, key));
  };
  for (const auto& [key, value] : fields_.items()) {
    const auto theirs = other.fields_.find(key);
    if (theirs == other.fields_.end() || *theirs != value) return describe(key);
  }
  for (const auto& [key, value] : other.fields_.items()) {
    if (!fields_.contains(key) && key != kContext) return describe(key);
  }
  return "";
}

}  // namespace llama
