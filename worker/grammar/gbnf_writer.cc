#include "worker/grammar/gbnf_writer.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace llama::grammar {
namespace {

// `c` as it appears inside a literal ("...") or a class ([...]): the
// characters that would end or change either are escaped.
std::string Escaped(uint32_t c, bool in_class) {
  switch (c) {
    case '\\': return "\\\\";
    case '"': return "\\\"";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
  }
  if (in_class && (c == ']' || c == '[' || c == '-' || c == '^')) return absl::StrCat("\\", std::string(1, c));
  if (c >= 0x20 && c < 0x7F) return std::string(1, static_cast<char>(c));
  if (c < 0x80) return absl::StrFormat("\\x%02X", c);
  if (c <= 0xFFFF) return absl::StrFormat("\\u%04X", c);
  return absl::StrFormat("\\U%08X", c);
}

// Where the item starting at `i` ends (one past its last character): a
// literal, a class or a parenthesized group with everything inside it.
size_t ItemEnd(const std::string& text, size_t i) {
  const char open = text[i];
  if (open == '"' || open == '[') {
    const char close = open == '"' ? '"' : ']';
    for (++i; i < text.size(); ++i) {
      if (text[i] == '\\')
        ++i;
      else if (text[i] == close)
        return i + 1;
    }
    return text.size();
  }
  if (open != '(') return i + 1;
  int depth = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"' || c == '[') {
      i = ItemEnd(text, i);
      continue;
    }
    if (c == '(') ++depth;
    if (c == ')' && --depth == 0) return i + 1;
    ++i;
  }
  return text.size();
}

// A single name, literal, class or parenthesized group: safe to repeat as is.
bool IsOneItem(const std::string& item) {
  if (item.empty()) return false;
  if (std::all_of(item.begin(), item.end(), [](char c) { return absl::ascii_isalnum(c) || c == '_' || c == '-'; })) {
    return true;
  }
  return (item[0] == '"' || item[0] == '[' || item[0] == '(') && ItemEnd(item, 0) == item.size();
}

}  // namespace

std::string GbnfLiteral(absl::string_view utf8) {
  std::string out = "\"";
  while (!utf8.empty()) {
    uint32_t c = 0;
    int n = DecodeUtf8(utf8, c);
    if (n == 0) {  // Not UTF-8 (JSON text never is): U+FFFD, as decoders replace it.
      c = 0xFFFD;
      n = 1;
    }
    absl::StrAppend(&out, Escaped(c, /*in_class=*/false));
    utf8.remove_prefix(n);
  }
  return absl::StrCat(out, "\"");
}

std::string GbnfCodePointLiteral(uint32_t code_point) {
  return absl::StrCat("\"", Escaped(code_point, /*in_class=*/false), "\"");
}

std::string GbnfClass(const std::vector<CodePointRange>& ranges) {
  if (ranges.size() == 1 && ranges[0].lo == ranges[0].hi) return GbnfCodePointLiteral(ranges[0].lo);
  std::string out = "[";
  for (const CodePointRange& r : ranges) {
    absl::StrAppend(&out, Escaped(r.lo, /*in_class=*/true));
    if (r.hi != r.lo) absl::StrAppend(&out, "-", Escaped(r.hi, /*in_class=*/true));
  }
  return absl::StrCat(out, "]");
}

std::string GbnfRepeat(const std::string& item, int64_t min, int64_t max) {
  if (max == 0) return "\"\"";
  const std::string one = IsOneItem(item) ? item : absl::StrCat("(", item, ")");
  if (min == 1 && max == 1) return one;
  if (min == 0 && max == 1) return one + "?";
  if (max == kNoLimit) {
    if (min == 0) return one + "*";
    if (min == 1) return one + "+";
    return absl::StrCat(one, "{", min, ",}");
  }
  if (min == max) return absl::StrCat(one, "{", min, "}");
  return absl::StrCat(one, "{", min, ",", max, "}");
}

std::string GbnfSequence(const std::vector<std::string>& items) {
  if (items.empty()) return "\"\"";
  if (items.size() == 1) return items[0];
  return absl::StrCat("(", absl::StrJoin(items, " "), ")");
}

std::string GbnfAlternatives(const std::vector<std::string>& alternatives) {
  if (alternatives.size() == 1) return alternatives[0];
  return absl::StrCat("(", absl::StrJoin(alternatives, " | "), ")");
}

}  // namespace llama::grammar
