#include "worker/grammar/grammar_cache.h"

#include "base/status_macros.h"

namespace llama::grammar {

absl::StatusOr<std::shared_ptr<TokenAutomaton>> GrammarCache::Get(const std::string& gbnf) {
  {
    absl::MutexLock lock(&mutex_);
    if (const auto it = by_text_.find(gbnf); it != by_text_.end()) {
      recent_.splice(recent_.begin(), recent_, it->second);
      return it->second->second;
    }
    if (trie_ == nullptr) trie_ = TokenTrie::ForTokenizer(*tokenizer_);
  }
  // Compiled outside the lock: a large grammar does not hold up the others.
  ASSIGN_OR_RETURN(std::shared_ptr<const Grammar> grammar, Grammar::Parse(gbnf));
  std::shared_ptr<const TokenTrie> trie;
  {
    absl::MutexLock lock(&mutex_);
    trie = trie_;
  }
  auto automaton = std::make_shared<TokenAutomaton>(std::move(grammar), std::move(trie));
  absl::MutexLock lock(&mutex_);
  if (const auto it = by_text_.find(gbnf); it != by_text_.end()) return it->second->second;
  recent_.emplace_front(gbnf, automaton);
  by_text_[gbnf] = recent_.begin();
  if (recent_.size() > capacity_) {
    by_text_.erase(recent_.back().first);
    recent_.pop_back();
  }
  return automaton;
}

}  // namespace llama::grammar
