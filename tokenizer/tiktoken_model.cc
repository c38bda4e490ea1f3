#include "tokenizer/tiktoken_model.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <functional>
#include <queue>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tokenizer/utf8.h"

namespace llama::internal_tokenizer {
namespace {

// The reference's limits (llama/tokenizer.py): characters per encode call,
// and per run of whitespace or of non-whitespace.
constexpr size_t kMaxEncodeChars = 400'000;
constexpr size_t kMaxRunChars = 25'000;
constexpr int kNumSpecialTokens = 256;

}  // namespace

const std::vector<std::string>& Llama3SpecialTokens() {
  static const std::vector<std::string>* const kNames = [] {
    auto* names = new std::vector<std::string>{
        "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
        "<|reserved_special_token_2|>", "<|reserved_special_token_3|>", "<|start_header_id|>", "<|end_header_id|>",
        "<|reserved_special_token_4|>", "<|eot_id|>",
    };
    for (int i = 5; i < kNumSpecialTokens - 5; ++i) {
      names->push_back(absl::StrFormat("<|reserved_special_token_%d|>", i));
    }
    return names;
  }();
  return *kNames;
}

bool TiktokenModel::LooksLikeRanksFile(absl::string_view contents) {
  const absl::string_view line = contents.substr(0, contents.find('\n'));
  const size_t space = line.find(' ');
  if (space == absl::string_view::npos || space == 0) return false;
  for (char c : line.substr(0, space)) {
    if (!absl::ascii_isalnum(c) && c != '+' && c != '/' && c != '=') return false;
  }
  int rank;
  return absl::SimpleAtoi(absl::StripTrailingAsciiWhitespace(line.substr(space + 1)), &rank);
}

absl::StatusOr<std::unique_ptr<TiktokenModel>> TiktokenModel::Parse(absl::string_view contents,
                                                                     absl::string_view source) {
  auto model = std::unique_ptr<TiktokenModel>(new TiktokenModel());
  std::vector<std::pair<int, std::string>> entries;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(contents, '\n')) {
    ++line_number;
    line = absl::StripTrailingAsciiWhitespace(line);
    if (line.empty()) continue;
    const std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    std::string bytes;
    int rank;
    if (fields.size() != 2 || !absl::Base64Unescape(fields[0], &bytes) || bytes.empty() ||
        !absl::SimpleAtoi(fields[1], &rank) || rank < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tokenizer model \"%s\", line %d: expected \"<base64 token> <rank>\" (a tiktoken ranks file)", source,
          line_number));
    }
    entries.emplace_back(rank, std::move(bytes));
  }
  model->tokens_.resize(entries.size());
  for (auto& [rank, bytes] : entries) {
    if (rank >= static_cast<int>(entries.size()) || !model->tokens_[rank].empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tokenizer model \"%s\": rank %d is repeated or beyond the %d tokens; expected ranks 0..%d, each once",
          source, rank, entries.size(), entries.size() - 1));
    }
    if (!model->ranks_.emplace(bytes, rank).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("tokenizer model \"%s\": rank %d repeats the bytes of rank %d", source, rank,
                          model->ranks_[bytes]));
    }
    model->tokens_[rank] = std::move(bytes);
  }
  for (int b = 0; b < 256; ++b) {
    if (!model->ranks_.contains(std::string(1, static_cast<char>(b)))) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tokenizer model \"%s\": byte 0x%02x has no token; every byte needs one for byte-level BPE", source, b));
    }
  }
  model->specials_ = Llama3SpecialTokens();
  int error_code;
  PCRE2_SIZE error_offset;
  pcre2_code* regex = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kLlama3Pattern), PCRE2_ZERO_TERMINATED,
                                    PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error_code, &error_offset, nullptr);
  if (regex == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof message);
    return absl::InternalError(absl::StrFormat("pre-tokenizer pattern at %d: %s", error_offset,
                                               reinterpret_cast<const char*>(message)));
  }
  pcre2_jit_compile(regex, PCRE2_JIT_COMPLETE);  // Where JIT is unavailable, matching is interpreted.
  model->regex_ = regex;
  return model;
}

TiktokenModel::~TiktokenModel() { pcre2_code_free(static_cast<pcre2_code*>(regex_)); }

int TiktokenModel::SpecialId(absl::string_view name) const {
  for (size_t i = 0; i < specials_.size(); ++i) {
    if (specials_[i] == name) return num_base_tokens() + static_cast<int>(i);
  }
  return -1;
}

absl::string_view TiktokenModel::TokenBytes(int id) const {
  return id < num_base_tokens() ? absl::string_view(tokens_[id]) : absl::string_view(specials_[id - num_base_tokens()]);
}

std::vector<int> TiktokenModel::Encode(absl::string_view text) const {
  const std::string valid = SanitizeUtf8(text);
  std::vector<int> ids;
  // The reference's cuts, in characters: every kMaxEncodeChars, then where a
  // run of whitespace or of non-whitespace exceeds kMaxRunChars.
  size_t chunk_start = 0, chunk_chars = 0, slice_start = 0, run = 0;
  bool run_is_space = false;
  for (size_t at = 0; at <= valid.size();) {
    if (at == valid.size() || chunk_chars == kMaxEncodeChars) {
      EncodeChunk(absl::string_view(valid).substr(slice_start, at - slice_start), &ids);
      if (at == valid.size()) break;
      chunk_start = slice_start = at;
      chunk_chars = run = 0;
    }
    const auto [cp, length] = DecodeUtf8(valid, at);
    const bool space = IsPythonWhitespace(cp);
    if (at == chunk_start) run_is_space = space;
    if (space != run_is_space) {
      run = 1;
      run_is_space = space;
    } else if (++run > kMaxRunChars) {
      EncodeChunk(absl::string_view(valid).substr(slice_start, at - slice_start), &ids);
      slice_start = at;
      run = 1;
    }
    at += length;
    ++chunk_chars;
  }
  return ids;
}

void TiktokenModel::EncodeChunk(absl::string_view chunk, std::vector<int>* ids) const {
  auto* regex = static_cast<pcre2_code*>(regex_);
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(regex, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(chunk.data());
  for (size_t offset = 0; offset < chunk.size();) {
    const int found = pcre2_match(regex, subject, chunk.size(), offset, PCRE2_NO_UTF_CHECK, match, nullptr);
    if (found < 0) break;  // Nothing more matches (the pattern covers every character).
    const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match);
    if (span[1] == span[0]) {  // Cannot happen with this pattern; never loop.
      ++offset;
      continue;
    }
    const absl::string_view piece = chunk.substr(span[0], span[1] - span[0]);
    if (auto it = ranks_.find(piece); it != ranks_.end()) {
      ids->push_back(it->second);
    } else {
      BytePairEncode(piece, ids);
    }
    offset = span[1];
  }
  pcre2_match_data_free(match);
}

absl::StatusOr<std::pair<int, int>> TiktokenModel::MergeOf(int id) const {
  if (id < 0 || id >= num_base_tokens() || tokens_[id].size() < 2) {
    return absl::InvalidArgumentError(absl::StrFormat("token %d is not made by a merge", id));
  }
  std::vector<int> parts;
  BytePairEncode(tokens_[id], &parts, id);
  if (parts.size() != 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "token %d is not the merge of two lower-ranked tokens (its bytes encode to %d)", id, parts.size()));
  }
  return std::make_pair(parts[0], parts[1]);
}

// Merges the adjacent pair whose bytes have the lowest rank, leftmost first,
// until no adjacent pair is a token: tiktoken's merge, with a heap instead
// of a scan per merge (a 25,000-letter word stays fast).
void TiktokenModel::BytePairEncode(absl::string_view piece, std::vector<int>* ids, int max_rank) const {
  constexpr int kNone = -1;
  const int n = static_cast<int>(piece.size());
  std::vector<int> next(n), prev(n), pair_rank(n, kNone);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? i + 1 : kNone;
    prev[i] = i - 1;
  }
  const auto end_of = [&](int part) { return next[part] == kNone ? n : next[part]; };
  using Entry = std::tuple<int, int>;  // (rank, part start = part index)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  const auto rank_pair = [&](int part) {
    pair_rank[part] = kNone;
    if (next[part] == kNone) return;
    auto it = ranks_.find(piece.substr(part, end_of(next[part]) - part));
    if (it == ranks_.end() || it->second >= max_rank) return;
    pair_rank[part] = it->second;
    heap.emplace(it->second, part);
  };
  for (int i = 0; i < n; ++i) rank_pair(i);
  while (!heap.empty()) {
    const auto [rank, part] = heap.top();
    heap.pop();
    if (!alive[part] || pair_rank[part] != rank) continue;  // Stale.
    const int absorbed = next[part];
    alive[absorbed] = false;
    next[part] = next[absorbed];
    if (next[part] != kNone) prev[next[part]] = part;
    rank_pair(part);
    if (prev[part] >= 0) rank_pair(prev[part]);
  }
  for (int part = 0; part != kNone; part = next[part]) {
    ids->push_back(ranks_.at(piece.substr(part, end_of(part) - part)));
  }
}

}  // namespace llama::internal_tokenizer
