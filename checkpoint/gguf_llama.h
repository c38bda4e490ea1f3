// Llama models in GGUF as llama.cpp reads them: its "llama" architecture's
// metadata keys and tensor names, and the SentencePiece vocabulary as
// tokenizer.ggml.* arrays. llama.cpp's llama architecture rotates adjacent
// pairs (its "normal" RoPE), Meta's interleaved layout, so query and key
// weights are written as our shards hold them.

#ifndef LLAMA_CHECKPOINT_GGUF_LLAMA_H_
#define LLAMA_CHECKPOINT_GGUF_LLAMA_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/gguf_writer.h"
#include "checkpoint/model_config.h"
#include "ops/dtype.h"
#include "tokenizer/tokenizer.h"

namespace llama {

// llama.cpp's name for one of our tensors (llama_layout.h's names):
// "layers.3.attention.wq.weight" -> "blk.3.attn_q.weight".
absl::StatusOr<std::string> GgufTensorName(absl::string_view name);

// general.*, llama.* and tokenizer.ggml.* for `config` with `tokenizer`'s
// vocabulary, which must have config.vocab_size pieces: SentencePiece as
// llama.cpp's "llama" tokenizer (pieces, scores, types), Llama 3's tiktoken
// BPE as its "gpt2" tokenizer with the "llama-bpe" pre-tokenizer (tokens in
// GPT-2's byte-to-character mapping, the merge list recovered from the
// ranks), and the family's chat template (tokenizer.chat_template, from
// tokenizer/chat_template.h). `weights` is the type of the 2-D tensors
// (general.file_type); `name` is general.name.
absl::StatusOr<GgufMetadata> LlamaGgufMetadata(const ModelConfig& config, const Tokenizer& tokenizer,
                                               const std::string& name, DType weights);

// llama.cpp's rope_freqs.weight for a model with Llama 3.1's scaled RoPE:
// per frequency, the factor llama.cpp divides it by (plain / scaled). Empty
// for plain RoPE.
std::vector<float> GgufRopeFactors(const ModelConfig& config);

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_GGUF_LLAMA_H_
