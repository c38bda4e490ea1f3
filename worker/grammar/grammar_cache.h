// Compiled grammars for one vocabulary, by their GBNF text: the requests of
// a server (or the prompts of a batch job) that give the same schema share
// one TokenAutomaton, so the masks one computes the others find. Holds the
// most recently used; thread-safe.

#ifndef LLAMA_WORKER_GRAMMAR_GRAMMAR_CACHE_H_
#define LLAMA_WORKER_GRAMMAR_GRAMMAR_CACHE_H_

#include <list>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "tokenizer/tokenizer.h"
#include "worker/grammar/token_matcher.h"

namespace llama::grammar {

class GrammarCache {
 public:
  // `tokenizer` must outlive the cache; its trie is built on first use.
  explicit GrammarCache(const Tokenizer* tokenizer, size_t capacity = 64)
      : tokenizer_(tokenizer), capacity_(capacity) {}

  // The automaton of `gbnf`, compiled once while it stays among the
  // `capacity` most recently used; errors are the grammar's.
  absl::StatusOr<std::shared_ptr<TokenAutomaton>> Get(const std::string& gbnf);

 private:
  const Tokenizer* tokenizer_;
  const size_t capacity_;
  absl::Mutex mutex_;
  std::shared_ptr<const TokenTrie> trie_ ABSL_GUARDED_BY(mutex_);
  // Most recent first.
  std::list<std::pair<std::string, std::shared_ptr<TokenAutomaton>>> recent_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_map<std::string, decltype(recent_)::iterator> by_text_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace llama::grammar

#endif  // LLAMA_WORKER_GRAMMAR_GRAMMAR_CACHE_H_
