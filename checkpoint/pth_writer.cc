#include "checkpoint/pth_writer.h"

#include <zlib.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/durable_file.h"
#include "base/status_macros.h"
#include "checkpoint/torch_storage.h"

namespace llama {
namespace {

constexpr uint64_t kZip32Max = 0xFFFFFFFF;

// Little-endian byte appenders.
void U16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v));
  out->push_back(static_cast<char>(v >> 8));
}
void U32(std::string* out, uint32_t v) {
  U16(out, static_cast<uint16_t>(v));
  U16(out, static_cast<uint16_t>(v >> 16));
}
void U64(std::string* out, uint64_t v) {
  U32(out, static_cast<uint32_t>(v));
  U32(out, static_cast<uint32_t>(v >> 32));
}

// Protocol-2 pickle pieces.
void PickleString(std::string* p, const std::string& s) {
  p->push_back('X');
  U32(p, static_cast<uint32_t>(s.size()));
  p->append(s);
}
void PickleInt(std::string* p, int64_t v) {
  if (v >= INT32_MIN && v <= INT32_MAX) {
    p->push_back('J');
    U32(p, static_cast<uint32_t>(v));
  } else {
    p->push_back('\x8a');  // LONG1, 8 bytes two's complement.
    p->push_back(8);
    U64(p, static_cast<uint64_t>(v));
  }
}
void PickleIntTuple(std::string* p, const std::vector<int64_t>& values) {
  p->push_back('(');
  for (int64_t v : values) PickleInt(p, v);
  p->push_back('t');
}

}  // namespace

absl::StatusOr<std::unique_ptr<PthWriter>> PthWriter::Create(const std::string& path, const std::string& archive_name) {
  FILE* file = std::fopen((path + ".tmp").c_str(), "wb");
  if (file == nullptr) {
    return absl::PermissionDeniedError(absl::StrFormat("cannot create \"%s.tmp\": %s", path, std::strerror(errno)));
  }
  return std::unique_ptr<PthWriter>(new PthWriter(path, archive_name, file));
}

PthWriter::~PthWriter() {
  if (file_ != nullptr) std::fclose(file_);
  if (!finished_) std::remove((path_ + ".tmp").c_str());
}

absl::Status PthWriter::Write(const void* data, size_t size) {
  if (size > 0 && std::fwrite(data, 1, size, file_) != size) {
    return absl::ResourceExhaustedError(absl::StrFormat("write to \"%s.tmp\" failed: %s", path_, std::strerror(errno)));
  }
  position_ += size;
  return absl::OkStatus();
}

absl::Status PthWriter::WriteEntry(const std::string& name, absl::Span<const uint8_t> data) {
  const std::string full = absl::StrCat(archive_, "/", name);
  uLong running = crc32(0L, Z_NULL, 0);
  for (size_t done = 0; done < data.size();) {  // zlib takes 32-bit lengths.
    const size_t n = std::min<size_t>(data.size() - done, 1u << 30);
    running = crc32(running, data.data() + done, static_cast<uInt>(n));
    done += n;
  }
  const bool zip64 = data.size() >= kZip32Max || position_ >= kZip32Max;
  std::string header;
  U32(&header, 0x04034B50);
  U16(&header, zip64 ? 45 : 20);
  U16(&header, 0x0800);  // UTF-8 names, sizes known up front.
  U16(&header, 0);       // Stored.
  U16(&header, 0);
  U16(&header, 0x21);    // 1980-01-01, as torch.save.
  U32(&header, static_cast<uint32_t>(running));
  U32(&header, zip64 ? 0xFFFFFFFF : static_cast<uint32_t>(data.size()));
  U32(&header, zip64 ? 0xFFFFFFFF : static_cast<uint32_t>(data.size()));
  U16(&header, static_cast<uint16_t>(full.size()));
  // Extra field: zip64 sizes when needed, then padding (id "FB", as
  // torch.save) so the data starts on a 64-byte boundary.
  std::string extra;
  if (zip64) {
    U16(&extra, 0x0001);
    U16(&extra, 16);
    U64(&extra, data.size());
    U64(&extra, data.size());
  }
  const uint64_t unpadded = position_ + 30 + full.size() + extra.size() + 4;
  const uint64_t padding = (64 - unpadded % 64) % 64;
  U16(&extra, 0x4246);
  U16(&extra, static_cast<uint16_t>(padding));
  extra.append(padding, 'Z');
  U16(&header, static_cast<uint16_t>(extra.size()));
  entries_.push_back({full, position_, data.size(), static_cast<uint32_t>(running)});
  RETURN_IF_ERROR(Write(header.data(), header.size()));
  RETURN_IF_ERROR(Write(full.data(), full.size()));
  RETURN_IF_ERROR(Write(extra.data(), extra.size()));
  return Write(data.data(), data.size());
}

absl::Status PthWriter::Add(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                            absl::Span<const uint8_t> bytes) {
  if (IsBlockDType(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor \"%s\": %s has no PyTorch storage type", name, DTypeName(dtype)));
  }
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (numel * static_cast<int64_t>(DTypeSize(dtype)) != static_cast<int64_t>(bytes.size())) {
    return absl::InvalidArgumentError(absl::StrFormat("tensor \"%s\": %d bytes for %d elements of %s", name,
                                                      bytes.size(), numel, DTypeName(dtype)));
  }
  RETURN_IF_ERROR(WriteEntry(absl::StrCat("data/", tensors_.size()), bytes));
  tensors_.push_back({name, dtype, shape});
  return absl::OkStatus();
}

std::string PthWriter::StateDictPickle() const {
  // {name: _rebuild_tensor_v2(storage, 0, shape, strides, False, OrderedDict())}.
  std::string p = "\x80\x02}(";
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    std::vector<int64_t> strides(t.shape.size());
    int64_t stride = 1;
    for (size_t d = t.shape.size(); d-- > 0;) {
      strides[d] = stride;
      stride *= t.shape[d];
    }
    PickleString(&p, t.name);
    p += "ctorch._utils\n_rebuild_tensor_v2\n((";
    PickleString(&p, "storage");
    p += absl::StrCat("ctorch\n", TorchStorageClassName(t.dtype), "\n");  // Add refused q8_0.
    PickleString(&p, absl::StrCat(i));
    PickleString(&p, "cpu");
    PickleInt(&p, numel);
    p += "tQ";  // The persistent id tuple, then BINPERSID.
    PickleInt(&p, 0);
    PickleIntTuple(&p, t.shape);
    PickleIntTuple(&p, strides);
    p += "\x89" "ccollections\nOrderedDict\n)Rt" "R";
  }
  p += "u.";
  return p;
}

std::string PthWriter::CentralDirectory(bool& zip64) const {
  std::string directory;
  for (const Entry& e : entries_) {
    const bool big_size = e.size >= kZip32Max, big_offset = e.offset >= kZip32Max;
    zip64 |= big_size || big_offset;
    std::string extra;
    if (big_size || big_offset) {
      U16(&extra, 0x0001);
      U16(&extra, (big_size ? 16 : 0) + (big_offset ? 8 : 0));
      if (big_size) {
        U64(&extra, e.size);
        U64(&extra, e.size);
      }
      if (big_offset) U64(&extra, e.offset);
    }
    U32(&directory, 0x02014B50);
    U16(&directory, 45);
    U16(&directory, big_size || big_offset ? 45 : 20);
    U16(&directory, 0x0800);
    U16(&directory, 0);
    U16(&directory, 0);
    U16(&directory, 0x21);
    U32(&directory, e.crc);
    U32(&directory, big_size ? 0xFFFFFFFF : static_cast<uint32_t>(e.size));
    U32(&directory, big_size ? 0xFFFFFFFF : static_cast<uint32_t>(e.size));
    U16(&directory, static_cast<uint16_t>(e.name.size()));
    U16(&directory, static_cast<uint16_t>(extra.size()));
    U16(&directory, 0);
    U16(&directory, 0);
    U16(&directory, 0);
    U32(&directory, 0);
    U32(&directory, big_offset ? 0xFFFFFFFF : static_cast<uint32_t>(e.offset));
    directory += e.name;
    directory += extra;
  }
  return directory;
}

std::string PthWriter::EndOfDirectory(uint64_t directory_offset, uint64_t directory_size, bool zip64) const {
  std::string end;
  if (zip64) {
    const uint64_t record = position_;
    U32(&end, 0x06064B50);
    U64(&end, 44);
    U16(&end, 45);
    U16(&end, 45);
    U32(&end, 0);
    U32(&end, 0);
    U64(&end, entries_.size());
    U64(&end, entries_.size());
    U64(&end, directory_size);
    U64(&end, directory_offset);
    U32(&end, 0x07064B50);
    U32(&end, 0);
    U64(&end, record);
    U32(&end, 1);
  }
  U32(&end, 0x06054B50);
  U16(&end, 0);
  U16(&end, 0);
  U16(&end, zip64 ? 0xFFFF : static_cast<uint16_t>(entries_.size()));
  U16(&end, zip64 ? 0xFFFF : static_cast<uint16_t>(entries_.size()));
  U32(&end, zip64 ? 0xFFFFFFFF : static_cast<uint32_t>(directory_size));
  U32(&end, zip64 ? 0xFFFFFFFF : static_cast<uint32_t>(directory_offset));
  U16(&end, 0);
  return end;
}

absl::Status PthWriter::Commit() {
  if (std::fflush(file_) != 0 || fsync(fileno(file_)) != 0) {
    return absl::ResourceExhaustedError(absl::StrFormat("flush \"%s.tmp\": %s", path_, std::strerror(errno)));
  }
  std::fclose(file_);
  file_ = nullptr;
  RETURN_IF_ERROR(RenameDurably(path_ + ".tmp", path_));
  finished_ = true;
  return absl::OkStatus();
}

absl::Status PthWriter::Finish() {
  const auto bytes = [](const std::string& s) {
    return absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  for (const auto& [name, content] : {std::pair<std::string, std::string>{"data.pkl", StateDictPickle()},
                                      {"byteorder", "little"},
                                      {"version", "3\n"}}) {
    RETURN_IF_ERROR(WriteEntry(name, bytes(content)));
  }
  const uint64_t directory_offset = position_;
  bool zip64 = false;
  const std::string directory = CentralDirectory(zip64);
  RETURN_IF_ERROR(Write(directory.data(), directory.size()));
  zip64 |= directory_offset >= kZip32Max || entries_.size() >= 0xFFFF;
  const std::string end = EndOfDirectory(directory_offset, directory.size(), zip64);
  RETURN_IF_ERROR(Write(end.data(), end.size()));
  return Commit();
}

}  // namespace llama
