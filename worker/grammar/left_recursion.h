// The check every compiled grammar passes before the parser may run it
// (gbnf_compiler.cc): no rule reaches itself without reading a byte, which
// would make the parser's expansion loop forever (llama.cpp refuses such
// grammars too). Linear in the grammar's size, and iterative: the text is
// the client's. Internal to //worker/grammar.

#ifndef LLAMA_WORKER_GRAMMAR_LEFT_RECURSION_H_
#define LLAMA_WORKER_GRAMMAR_LEFT_RECURSION_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/grammar/grammar.h"

namespace llama::grammar {

// One alternative of a rule, before the compiler lays them out.
using Sequence = std::vector<Element>;

// `rules[r]` are rule r's alternatives, `names[r]` its name; the error
// names the cycle.
absl::Status CheckNoLeftRecursion(const std::vector<std::vector<Sequence>>& rules,
                                  const std::vector<std::string>& names);

}  // namespace llama::grammar

#endif  // LLAMA_WORKER_GRAMMAR_LEFT_RECURSION_H_
