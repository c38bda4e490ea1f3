// The names of an enum's values as one constant table of {name, value}
// pairs, from which both directions and the "expected ..." part of a parse
// error come: flag values (--device), chat roles, dtype spellings.
// Header-only.

#ifndef LLAMA_BASE_NAMED_VALUES_H_
#define LLAMA_BASE_NAMED_VALUES_H_

#include <array>
#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace llama {

template <typename T>
struct NamedValue {
  absl::string_view name;
  T value;
};

// A value's first entry is its name; later entries for it are other
// spellings that Find and Parse accept. Case-sensitive.
template <typename T, size_t kCount>
class NamedValues {
 public:
  constexpr explicit NamedValues(const NamedValue<T> (&entries)[kCount]) {
    for (size_t i = 0; i < kCount; ++i) entries_[i] = entries[i];
  }

  // The value's name, or "unknown" for one not in the table.
  absl::string_view Name(T value) const {
    for (const NamedValue<T>& e : entries_) {
      if (e.value == value) return e.name;
    }
    return "unknown";
  }

  std::optional<T> Find(absl::string_view name) const {
    for (const NamedValue<T>& e : entries_) {
      if (e.name == name) return e.value;
    }
    return std::nullopt;
  }

  // Each value's name, quoted, in table order: "cpu" or "cuda";
  // "system", "user" or "assistant".
  std::string QuotedNames() const {
    std::string names;
    size_t written = 0, total = 0;
    for (size_t i = 0; i < kCount; ++i) total += IsName(i);
    for (size_t i = 0; i < kCount; ++i) {
      if (!IsName(i)) continue;
      const char* separator = written == 0 ? "" : written + 1 == total ? " or " : ", ";
      absl::StrAppend(&names, separator, "\"", entries_[i].name, "\"");
      ++written;
    }
    return names;
  }

  // `text` as a value; else InvalidArgument `<what> "<text>": expected
  // <QuotedNames>`, e.g. `role "bot": expected "system", "user" or
  // "assistant"`.
  absl::StatusOr<T> Parse(absl::string_view what, absl::string_view text) const {
    if (const std::optional<T> value = Find(text)) return *value;
    return absl::InvalidArgumentError(absl::StrFormat("%s \"%s\": expected %s", what, text, QuotedNames()));
  }

  // The same for a flag's value: `--<flag>="<text>": expected <QuotedNames>`.
  absl::StatusOr<T> ParseFlag(absl::string_view flag, absl::string_view text) const {
    if (const std::optional<T> value = Find(text)) return *value;
    return absl::InvalidArgumentError(absl::StrFormat("--%s=\"%s\": expected %s", flag, text, QuotedNames()));
  }

 private:
  // Whether entry i is its value's first, the name rather than a spelling.
  bool IsName(size_t i) const {
    for (size_t j = 0; j < i; ++j) {
      if (entries_[j].value == entries_[i].value) return false;
    }
    return true;
  }

  std::array<NamedValue<T>, kCount> entries_{};
};

}  // namespace llama

#endif  // LLAMA_BASE_NAMED_VALUES_H_
