// Includes no Abseil header: see sentencepiece_model.h.
#include "tokenizer/sentencepiece_model.h"

#include <sentencepiece_processor.h>

namespace llama::internal_tokenizer {

class SentencePieceModel::Impl {
 public:
  sentencepiece::SentencePieceProcessor processor;
};

SentencePieceModel::SentencePieceModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SentencePieceModel::~SentencePieceModel() = default;

std::unique_ptr<SentencePieceModel> SentencePieceModel::FromSerialized(
    std::string_view serialized, std::string* error) {
  auto impl = std::make_unique<Impl>();
  const auto status = impl->processor.LoadFromSerializedProto(serialized);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  return std::unique_ptr<SentencePieceModel>(new SentencePieceModel(std::move(impl)));
}

int SentencePieceModel::piece_size() const { return impl_->processor.GetPieceSize(); }
int SentencePieceModel::bos_id() const { return impl_->processor.bos_id(); }
int SentencePieceModel::eos_id() const { return impl_->processor.eos_id(); }
int SentencePieceModel::pad_id() const { return impl_->processor.pad_id(); }
int SentencePieceModel::unk_id() const { return impl_->processor.unk_id(); }
std::string SentencePieceModel::IdToPiece(int id) const { return impl_->processor.IdToPiece(id); }
float SentencePieceModel::Score(int id) const { return impl_->processor.GetScore(id); }
bool SentencePieceModel::IsByte(int id) const { return impl_->processor.IsByte(id); }
bool SentencePieceModel::IsControl(int id) const { return impl_->processor.IsControl(id); }
bool SentencePieceModel::IsUnknown(int id) const { return impl_->processor.IsUnknown(id); }
bool SentencePieceModel::IsUnused(int id) const { return impl_->processor.IsUnused(id); }

bool SentencePieceModel::Encode(std::string_view text, std::vector<int>* ids,
                                std::string* error) const {
  const auto status = impl_->processor.Encode(text, ids);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

bool SentencePieceModel::Decode(const std::vector<int>& ids, std::string* text,
                                std::string* error) const {
  const auto status = impl_->processor.Decode(ids, text);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

}  // namespace llama::internal_tokenizer
