#include "worker/grammar/token_matcher.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace llama::grammar {

std::shared_ptr<const TokenTrie> TokenTrie::Build(std::vector<std::string> bytes) {
  auto trie = std::make_shared<TokenTrie>();
  trie->bytes_ = std::move(bytes);
  const std::vector<std::string>& b = trie->bytes_;
  std::vector<int32_t> order;
  for (int32_t t = 0; t < static_cast<int32_t>(b.size()); ++t) {
    if (!b[t].empty()) order.push_back(t);
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return b[x] < b[y]; });
  // Sorted byte strings come in depth-first order: a token's prefixes come
  // before it, and its extensions right after.
  std::vector<Node>& nodes = trie->nodes_;
  nodes.push_back({0, 0, 0, 0, 0});
  std::vector<int32_t> path = {0};  // Node indices from the root.
  const std::string* previous = nullptr;
  for (const int32_t t : order) {
    const std::string& s = b[t];
    if (previous == nullptr || s != *previous) {
      size_t common = 0;
      if (previous != nullptr) {
        while (common < previous->size() && common < s.size() && (*previous)[common] == s[common]) ++common;
      }
      while (path.size() - 1 > common) {
        nodes[path.back()].subtree_end = static_cast<int32_t>(nodes.size());
        path.pop_back();
      }
      for (size_t d = common; d < s.size(); ++d) {
        const int32_t at = static_cast<int32_t>(trie->token_ids_.size());
        nodes.push_back({0, at, at, static_cast<uint16_t>(d + 1), static_cast<uint8_t>(s[d])});
        path.push_back(static_cast<int32_t>(nodes.size() - 1));
      }
      trie->max_depth_ = std::max<int>(trie->max_depth_, static_cast<int>(s.size()));
      previous = &s;
    }
    trie->token_ids_.push_back(t);
    nodes[path.back()].tokens_end = static_cast<int32_t>(trie->token_ids_.size());
  }
  for (const int32_t n : path) nodes[n].subtree_end = static_cast<int32_t>(nodes.size());
  return trie;
}

std::shared_ptr<const TokenTrie> TokenTrie::ForTokenizer(const Tokenizer& tokenizer) {
  std::vector<std::string> bytes(tokenizer.vocab_size());
  const bool sentencepiece = tokenizer.family() == Tokenizer::Family::kSentencePiece;
  for (int t = 0; t < tokenizer.vocab_size(); ++t) {
    const Tokenizer::Piece piece = tokenizer.GetPiece(t);
    if (piece.kind == Tokenizer::PieceKind::kByte) {
      bytes[t] = std::string(1, static_cast<char>(tokenizer.ByteValue(t)));
    } else if (piece.kind == Tokenizer::PieceKind::kNormal) {
      bytes[t] = sentencepiece ? absl::StrReplaceAll(piece.text, {{"\xE2\x96\x81", " "}})
                               : std::string(tokenizer.TokenBytes(t));
    }
  }
  return Build(std::move(bytes));
}

TokenAutomaton::TokenAutomaton(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie)
    : grammar_(std::move(grammar)), trie_(std::move(trie)), parser_(*grammar_), initial_(parser_.initial()) {}

void TokenAutomaton::Walk(int32_t begin, int32_t end, TokenMask& mask, std::vector<Exit>* exits) {
  const std::vector<TokenTrie::Node>& nodes = trie_->nodes();
  const std::vector<int32_t>& ids = trie_->token_ids();
  int64_t visited = 0;
  for (int32_t i = begin; i < end;) {
    const TokenTrie::Node& n = nodes[i];
    ++visited;
    const StateId to = parser_.Next(path_[n.depth - 1], n.byte);
    if (to == ByteParser::kDead) {
      i = n.subtree_end;
      continue;
    }
    if (exits != nullptr) {
      bytes_path_[n.depth] = static_cast<char>(n.byte);
      if (parser_.accepting(to)) {
        exits->push_back({i, bytes_path_.substr(1, n.depth)});
        i = n.subtree_end;
        continue;
      }
    }
    path_[n.depth] = to;
    for (int32_t k = n.tokens_begin; k < n.tokens_end; ++k) mask[ids[k] >> 6] |= uint64_t{1} << (ids[k] & 63);
    ++i;
  }
  stats_.nodes_visited += visited;
}

const TokenAutomaton::TopSplit& TokenAutomaton::SplitOf(int32_t top) {
  std::unique_ptr<const TopSplit>& split = splits_[top];
  if (split == nullptr) {
    auto made = std::make_unique<TopSplit>();
    made->within.assign((trie_->vocab_size() + 63) / 64, 0);
    path_[0] = parser_.StateOfStack(top);
    Walk(1, static_cast<int32_t>(trie_->nodes().size()), made->within, &made->exits);
    mask_bytes_ += static_cast<int64_t>(made->within.size() * sizeof(uint64_t));
    ++stats_.splits;
    split = std::move(made);
  }
  return *split;
}

void TokenAutomaton::WalkExits(StateId state, const std::vector<Exit>& exits, TokenMask& mask) {
  const std::vector<TokenTrie::Node>& nodes = trie_->nodes();
  const std::vector<int32_t>& ids = trie_->token_ids();
  // Exits come in trie order, so each shares its prefix's first states
  // with the one before: path_[d] holds the state after d bytes of
  // `walked` for d <= known.
  std::string walked;
  size_t known = 0;
  path_[0] = state;
  for (const Exit& exit : exits) {
    size_t common = 0;
    while (common < known && common < exit.prefix.size() && walked[common] == exit.prefix[common]) ++common;
    walked = exit.prefix;
    known = common;
    while (known < walked.size() && path_[known] != ByteParser::kDead) {
      path_[known + 1] = parser_.Next(path_[known], static_cast<uint8_t>(walked[known]));
      ++known;
    }
    if (known < walked.size() || path_[known] == ByteParser::kDead) continue;
    const TokenTrie::Node& n = nodes[exit.node];
    for (int32_t k = n.tokens_begin; k < n.tokens_end; ++k) mask[ids[k] >> 6] |= uint64_t{1} << (ids[k] & 63);
    Walk(exit.node + 1, n.subtree_end, mask, nullptr);
  }
}

std::shared_ptr<TokenMask> TokenAutomaton::Compute(StateId state) {
  auto mask = std::make_shared<TokenMask>((trie_->vocab_size() + 63) / 64, 0);
  path_.resize(trie_->max_depth() + 1);
  bytes_path_.resize(trie_->max_depth() + 1);
  const std::vector<int32_t> tops = parser_.StackTops(state, kSplitDepth);
  std::vector<int32_t> distinct = tops;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (distinct.size() > kMaxSplitTops) {
    path_[0] = state;
    Walk(1, static_cast<int32_t>(trie_->nodes().size()), *mask, nullptr);
    return mask;
  }
  // A top met for the first time is walked with the whole trie, from the
  // stacks under it alone: a split would cost about as much again, and a
  // bounded string's k-th character (maxLength) or a property's closing
  // quote is a top that may never come back. A top met before has its split.
  std::vector<bool> fresh(tops.size());
  for (size_t i = 0; i < tops.size(); ++i) fresh[i] = tops_met_[tops[i]] == 0;
  for (const int32_t top : distinct) {
    if (tops_met_[top]++ == 0) continue;
    const TopSplit& split = SplitOf(top);
    for (size_t w = 0; w < mask->size(); ++w) (*mask)[w] |= split.within[w];
    WalkExits(state, split.exits, *mask);
  }
  if (const StateId rest = parser_.Subset(state, fresh); rest != ByteParser::kDead) {
    path_[0] = rest;
    Walk(1, static_cast<int32_t>(trie_->nodes().size()), *mask, nullptr);
  }
  return mask;
}

std::shared_ptr<const TokenMask> TokenAutomaton::Allowed(StateId state) {
  absl::MutexLock lock(&mutex_);
  if (const auto it = masks_.find(state); it != masks_.end()) {
    ++stats_.mask_hits;
    return it->second;
  }
  std::shared_ptr<TokenMask> mask = Compute(state);
  ++stats_.masks;
  const int64_t bytes = static_cast<int64_t>(mask->size() * sizeof(uint64_t));
  if (mask_bytes_ + bytes > kMaxMaskBytes) {
    masks_.clear();
    splits_.clear();
    tops_met_.clear();
    mask_bytes_ = 0;
  }
  masks_.emplace(state, mask);
  mask_bytes_ += bytes;
  return mask;
}

TokenMask TokenAutomaton::AllowedByWholeWalkForTesting(StateId state) {
  absl::MutexLock lock(&mutex_);
  TokenMask mask((trie_->vocab_size() + 63) / 64, 0);
  path_.resize(trie_->max_depth() + 1);
  path_[0] = state;
  Walk(1, static_cast<int32_t>(trie_->nodes().size()), mask, nullptr);
  return mask;
}

TokenAutomaton::StateId TokenAutomaton::Advance(StateId state, int token) {
  if (token < 0 || token >= trie_->vocab_size()) return ByteParser::kDead;
  const std::string& bytes = trie_->bytes(token);
  if (bytes.empty()) return ByteParser::kDead;
  absl::MutexLock lock(&mutex_);
  for (const char c : bytes) {
    state = parser_.Next(state, static_cast<uint8_t>(c));
    if (state == ByteParser::kDead) break;
  }
  return state;
}

bool TokenAutomaton::accepting(StateId state) {
  absl::MutexLock lock(&mutex_);
  return parser_.accepting(state);
}

bool TokenAutomaton::live(StateId state) {
  absl::MutexLock lock(&mutex_);
  return parser_.live(state);
}

bool TokenAutomaton::overflowed() {
  absl::MutexLock lock(&mutex_);
  return parser_.overflowed();
}

TokenAutomaton::Stats TokenAutomaton::stats() {
  absl::MutexLock lock(&mutex_);
  Stats s = stats_;
  s.parser_states = parser_.states();
  return s;
}

absl::StatusOr<std::unique_ptr<TokenMatcher>> TokenMatcher::Start(std::shared_ptr<TokenAutomaton> automaton) {
  const TokenAutomaton::StateId initial = automaton->initial();
  if (initial == ByteParser::kDead) return absl::InvalidArgumentError("the grammar matches no text at all");
  return std::unique_ptr<TokenMatcher>(new TokenMatcher(std::move(automaton), initial));
}

absl::Status TokenMatcher::Accept(int token) {
  const TokenAutomaton::StateId next = automaton_->Advance(state_, token);
  if (next == ByteParser::kDead) {
    if (automaton_->overflowed()) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "the grammar is too ambiguous to follow: more than %d parses at once", ByteParser::kMaxStacks));
    }
    return absl::InvalidArgumentError(absl::StrFormat("token %d is not allowed by the grammar here", token));
  }
  state_ = next;
  return absl::OkStatus();
}

}  // namespace llama::grammar
