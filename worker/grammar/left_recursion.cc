#include "worker/grammar/left_recursion.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace llama::grammar {

namespace {

// The rules that can match the empty text, by a work list: an alternative
// is nullable once each of its rule references is (a byte set never is).
std::vector<bool> NullableRules(const std::vector<std::vector<Sequence>>& rules) {
  const int n = static_cast<int>(rules.size());
  std::vector<bool> nullable(n, false);
  std::vector<std::vector<std::pair<int, size_t>>> used_in(n);  // Rule -> (rule, alternative) using it.
  std::vector<std::vector<int>> pending(n);                     // Per alternative: references not yet nullable.
  std::vector<int> ready;
  for (int r = 0; r < n; ++r) {
    pending[r].assign(rules[r].size(), 0);
    for (size_t a = 0; a < rules[r].size(); ++a) {
      for (const Element& e : rules[r][a]) {
        if (e.kind == Element::kBytes) {
          pending[r][a] = -1;  // Never.
          break;
        }
        ++pending[r][a];
        used_in[e.value].push_back({r, a});
      }
      if (pending[r][a] == 0 && !nullable[r]) {
        nullable[r] = true;
        ready.push_back(r);
      }
    }
  }
  while (!ready.empty()) {
    const int done = ready.back();
    ready.pop_back();
    for (const auto& [r, a] : used_in[done]) {
      if (pending[r][a] > 0 && --pending[r][a] == 0 && !nullable[r]) {
        nullable[r] = true;
        ready.push_back(r);
      }
    }
  }
  return nullable;
}

}  // namespace

absl::Status CheckNoLeftRecursion(const std::vector<std::vector<Sequence>>& rules,
                                  const std::vector<std::string>& names) {
  const int n = static_cast<int>(rules.size());
  const std::vector<bool> nullable = NullableRules(rules);
  std::vector<std::vector<int>> first(n);  // Rules r can start with.
  for (int r = 0; r < n; ++r) {
    for (const Sequence& s : rules[r]) {
      for (const Element& e : s) {
        if (e.kind != Element::kRule) break;
        first[r].push_back(e.value);
        if (!nullable[e.value]) break;
      }
    }
  }
  // A cycle in `first`, by an iterative depth-first search.
  std::vector<int> mark(n, 0);  // 0 new, 1 on the path, 2 done.
  for (int root = 0; root < n; ++root) {
    if (mark[root] != 0) continue;
    std::vector<std::pair<int, size_t>> path = {{root, 0}};  // Rule, next of its `first` to visit.
    mark[root] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == first[r].size()) {
        mark[r] = 2;
        path.pop_back();
        continue;
      }
      const int to = first[r][next++];
      if (mark[to] == 2) continue;
      if (mark[to] == 1) {
        std::vector<std::string> cycle;
        bool on = false;
        for (const auto& [p, unused] : path) {
          on = on || p == to;
          if (on) cycle.push_back(names[p]);
        }
        cycle.push_back(names[to]);
        return absl::InvalidArgumentError(absl::StrCat(
            "grammar: rule '", names[to], "' is left-recursive or repeats what can be empty (",
            absl::StrJoin(cycle, " -> "), "): it could expand forever without reading a character"));
      }
      mark[to] = 1;
      path.push_back({to, 0});
    }
  }
  return absl::OkStatus();
}

}  // namespace llama::grammar
