#include "checkpoint/shard_format.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/durable_file.h"
#include "base/status_macros.h"

namespace llama {
namespace {

void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void PutU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

absl::Status NotAShard(const std::string& source, absl::string_view what) {
  return absl::DataLossError(absl::StrFormat("%s: not a valid shard: %s", source, what));
}

// Checks one index entry against the file; `data_end` is where the index starts.
absl::Status ValidateEntry(const shard::TensorEntry& e, uint64_t data_end, const std::string& source) {
  const std::string what = absl::StrFormat("%s: tensor \"%s\"", source, e.name());
  if (e.name().empty()) return absl::DataLossError(absl::StrFormat("%s: a tensor has an empty name", source));
  if (!IsKnownDType(e.dtype())) {
    return absl::DataLossError(absl::StrFormat("%s: unknown dtype %d", what, e.dtype()));
  }
  const std::vector<int64_t> shape(e.shape().begin(), e.shape().end());
  absl::StatusOr<int64_t> numel = NumElements(shape, what);
  if (!numel.ok()) return absl::DataLossError(numel.status().message());
  const DType dtype = static_cast<DType>(e.dtype());
  if (IsBlockDType(dtype) && (shape.empty() || shape.back() % BlockElements(dtype) != 0)) {
    return absl::DataLossError(absl::StrFormat("%s: %s rows of %d elements; expected a multiple of %d", what,
                                               DTypeName(dtype), shape.empty() ? 0 : shape.back(),
                                               BlockElements(dtype)));
  }
  // 8: the widest element, so TensorBytes cannot overflow.
  if (static_cast<uint64_t>(*numel) > UINT64_MAX / 8 || TensorBytes(dtype, *numel) != e.size()) {
    return absl::DataLossError(absl::StrFormat("%s: %d bytes for shape [%s] of %s", what, e.size(),
                                               absl::StrJoin(shape, ", "), DTypeName(static_cast<DType>(e.dtype()))));
  }
  if (e.offset() % kShardAlignment != 0 || e.offset() < kShardAlignment || e.offset() > data_end ||
      e.size() > data_end - e.offset()) {
    return absl::DataLossError(absl::StrFormat(
        "%s: bytes [%d, +%d) are misaligned or outside the data region [%d, %d)", what, e.offset(),
        e.size(), kShardAlignment, data_end));
  }
  return absl::OkStatus();
}

}  // namespace

std::string ShardFileName(int rank, int world_size) {
  return absl::StrFormat("rank-%d-of-%d.shard", rank, world_size);
}

shard::ModelConfig ModelConfigToProto(const ModelConfig& c) {
  shard::ModelConfig p;
  p.set_dim(c.dim);
  p.set_n_layers(c.n_layers);
  p.set_n_heads(c.n_heads);
  p.set_n_kv_heads(c.n_kv_heads);
  p.set_vocab_size(c.vocab_size);
  p.set_multiple_of(c.multiple_of);
  if (c.ffn_dim_multiplier.has_value()) p.set_ffn_dim_multiplier(*c.ffn_dim_multiplier);
  if (c.hidden_dim.has_value()) p.set_hidden_dim(*c.hidden_dim);
  if (c.rope_scaling.has_value()) {
    shard::RopeScaling* r = p.mutable_rope_scaling();
    r->set_factor(c.rope_scaling->factor);
    r->set_low_freq_factor(c.rope_scaling->low_freq_factor);
    r->set_high_freq_factor(c.rope_scaling->high_freq_factor);
    r->set_original_context(c.rope_scaling->original_context);
  }
  p.set_norm_eps(c.norm_eps);
  p.set_rope_theta(c.rope_theta);
  p.set_max_seq_len(c.max_seq_len);
  return p;
}

ModelConfig ModelConfigFromProto(const shard::ModelConfig& p) {
  ModelConfig c;
  c.dim = p.dim();
  c.n_layers = p.n_layers();
  c.n_heads = p.n_heads();
  c.n_kv_heads = p.n_kv_heads();
  c.vocab_size = p.vocab_size();
  c.multiple_of = p.multiple_of();
  if (p.has_ffn_dim_multiplier()) c.ffn_dim_multiplier = p.ffn_dim_multiplier();
  if (p.has_hidden_dim()) c.hidden_dim = p.hidden_dim();
  if (p.has_rope_scaling()) {
    const shard::RopeScaling& r = p.rope_scaling();
    c.rope_scaling = RopeScaling{r.factor(), r.low_freq_factor(), r.high_freq_factor(), r.original_context()};
  }
  c.norm_eps = p.norm_eps();
  c.rope_theta = p.rope_theta();
  c.max_seq_len = p.max_seq_len();
  return c;
}

// ---- Reader

absl::StatusOr<std::unique_ptr<ShardReader>> ShardReader::Open(const std::string& path) {
  return OpenMapped<ShardReader>(path);
}

absl::StatusOr<std::unique_ptr<ShardReader>> ShardReader::FromBytes(absl::Span<const uint8_t> bytes,
                                                                    const std::string& source) {
  if (bytes.size() < kShardHeaderSize || std::memcmp(bytes.data(), kShardMagic, sizeof kShardMagic) != 0) {
    return NotAShard(source, "bad magic (expected a file written by //tools:convert)");
  }
  const uint32_t version = GetU32(bytes.data() + 8);
  if (version != kShardFormatVersion) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: shard format version %d; this build reads version %d. Re-run //tools:convert", source,
        version, kShardFormatVersion));
  }
  const uint64_t index_offset = GetU64(bytes.data() + 16), index_size = GetU64(bytes.data() + 24);
  if (GetU32(bytes.data() + 12) != kShardHeaderSize || index_size > kMaxShardIndexBytes ||
      index_offset < kShardHeaderSize || index_offset > bytes.size() ||
      index_size > bytes.size() - index_offset) {
    return NotAShard(source, absl::StrFormat("index [%d, +%d) is outside the file (%d bytes) or too large; truncated?",
                                             index_offset, index_size, bytes.size()));
  }
  const uint8_t* index_bytes = bytes.data() + index_offset;
  if (XXH3_64bits(index_bytes, index_size) != GetU64(bytes.data() + 32)) {
    return NotAShard(source, "index checksum mismatch");
  }
  auto reader = std::unique_ptr<ShardReader>(new ShardReader(source));
  if (!reader->index_.ParseFromArray(index_bytes, static_cast<int>(index_size))) {
    return NotAShard(source, "index does not parse");
  }
  const shard::ShardIndex& index = reader->index_;
  if (index.world_size() < 1 || index.rank() < 0 || index.rank() >= index.world_size()) {
    return NotAShard(source, absl::StrFormat("rank %d of world size %d", index.rank(), index.world_size()));
  }
  if (index.tensors_size() > kMaxShardTensors) {
    return NotAShard(source, absl::StrFormat("%d tensors (limit %d)", index.tensors_size(), kMaxShardTensors));
  }
  RETURN_IF_ERROR(ValidateModelConfig(ModelConfigFromProto(index.config()), source + ": index config"));
  RETURN_IF_ERROR(reader->AddEntries(bytes, index_offset));
  return reader;
}

absl::Status ShardReader::AddEntries(absl::Span<const uint8_t> bytes, uint64_t index_offset) {
  uint64_t previous_end = kShardAlignment;
  for (const shard::TensorEntry& e : index_.tensors()) {
    RETURN_IF_ERROR(ValidateEntry(e, index_offset, path()));
    if (e.offset() < previous_end) {
      return NotAShard(path(), absl::StrFormat("tensor \"%s\" overlaps the previous one or is out of order", e.name()));
    }
    previous_end = e.offset() + e.size();
    if (Find(e.name()) != nullptr) {
      return NotAShard(path(), absl::StrFormat("tensor \"%s\" appears twice", e.name()));
    }
    AddTensor({e.name(), static_cast<DType>(e.dtype()), std::vector<int64_t>(e.shape().begin(), e.shape().end()),
               bytes.subspan(e.offset(), e.size())});
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardTensor> ShardReader::Tensor(absl::string_view name) const {
  const FileTensor* tensor = Find(name);
  if (tensor == nullptr) {
    return absl::NotFoundError(absl::StrFormat("%s: no tensor \"%s\"", path(), name));
  }
  // Tensors are added in index order, one per entry.
  const shard::TensorEntry& e = index_.tensors(static_cast<int>(tensor - tensors().data()));
  return ShardTensor{&e, tensor->dtype, tensor->bytes};
}

absl::Status ShardReader::VerifyChecksums() const {
  for (int i = 0; i < index_.tensors_size(); ++i) {
    const shard::TensorEntry& e = index_.tensors(i);
    const absl::Span<const uint8_t> bytes = tensors()[i].bytes;
    if (XXH3_64bits(bytes.data(), bytes.size()) != e.xxh3_64()) {
      return absl::DataLossError(absl::StrFormat(
          "%s: tensor \"%s\" fails its checksum (bytes [%d, +%d)); the file is corrupt, re-run "
          "//tools:convert",
          path(), e.name(), e.offset(), e.size()));
    }
  }
  return absl::OkStatus();
}

// ---- Writer

ShardWriter::ShardWriter(std::unique_ptr<StagedFile> file) : file_(std::move(file)), hash_(XXH3_createState()) {}

ShardWriter::~ShardWriter() { XXH3_freeState(hash_); }

absl::StatusOr<std::unique_ptr<ShardWriter>> ShardWriter::Create(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<StagedFile> file, StagedFile::Create(path, ".tmp"));
  // Header placeholder; the real one is written by Finish.
  RETURN_IF_ERROR(file->PadTo(kShardAlignment));
  return std::unique_ptr<ShardWriter>(new ShardWriter(std::move(file)));
}

absl::Status ShardWriter::BeginTensor(const std::string& name, DType dtype,
                                      const std::vector<int64_t>& shape, const shard::TensorSplit& split) {
  RETURN_IF_ERROR(EndTensor());
  ASSIGN_OR_RETURN(const int64_t numel, NumElements(shape, name));
  RETURN_IF_ERROR(file_->PadTo((file_->position() + kShardAlignment - 1) / kShardAlignment * kShardAlignment));
  shard::TensorEntry entry;
  entry.set_name(name);
  entry.set_dtype(static_cast<int>(dtype));
  for (int64_t d : shape) entry.add_shape(d);
  entry.set_offset(file_->position());
  entry.set_size(TensorBytes(dtype, numel));
  *entry.mutable_split() = split;
  entries_.push_back(std::move(entry));
  pending_ = entries_.back().size();
  tensor_open_ = true;
  XXH3_64bits_reset(hash_);
  return absl::OkStatus();
}

absl::Status ShardWriter::Append(absl::Span<const uint8_t> bytes) {
  if (!tensor_open_ || bytes.size() > pending_) {
    return absl::InternalError(absl::StrFormat(
        "%s: %d bytes appended beyond the open tensor's size", file_->partial_path(), bytes.size()));
  }
  XXH3_64bits_update(hash_, bytes.data(), bytes.size());
  pending_ -= bytes.size();
  return file_->Write(bytes.data(), bytes.size());
}

absl::Status ShardWriter::EndTensor() {
  if (!tensor_open_) return absl::OkStatus();
  if (pending_ != 0) {
    return absl::InternalError(absl::StrFormat(
        "%s: tensor \"%s\" is missing %d bytes", file_->partial_path(), entries_.back().name(), pending_));
  }
  entries_.back().set_xxh3_64(XXH3_64bits_digest(hash_));
  tensor_open_ = false;
  return absl::OkStatus();
}

absl::Status ShardWriter::Finish(shard::ShardIndex index) {
  RETURN_IF_ERROR(EndTensor());
  index.clear_tensors();
  for (shard::TensorEntry& e : entries_) *index.add_tensors() = std::move(e);
  std::string serialized;
  if (!index.SerializeToString(&serialized)) {
    return absl::InternalError(absl::StrFormat("%s: index serialization failed", file_->partial_path()));
  }
  const uint64_t index_offset = file_->position();
  RETURN_IF_ERROR(file_->Write(serialized.data(), serialized.size()));

  uint8_t header[kShardHeaderSize] = {};
  std::memcpy(header, kShardMagic, sizeof kShardMagic);
  PutU32(header + 8, kShardFormatVersion);
  PutU32(header + 12, kShardHeaderSize);
  PutU64(header + 16, index_offset);
  PutU64(header + 24, serialized.size());
  PutU64(header + 32, XXH3_64bits(serialized.data(), serialized.size()));
  RETURN_IF_ERROR(file_->WriteAt(0, header, sizeof header));
  return file_->Commit();
}

}  // namespace llama
