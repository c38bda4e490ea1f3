// GBNF text to the compiled Grammar (grammar.h): a recursive-descent parser
// that lowers literals to byte elements, character classes to UTF-8
// byte-range rules and repetitions to right-recursive rules as it goes.

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "worker/grammar/grammar.h"
#include "worker/grammar/left_recursion.h"
#include "worker/grammar/utf8_ranges.h"

namespace llama::grammar {


class GbnfCompiler {
 public:
  explicit GbnfCompiler(absl::string_view text) : text_(text) {}

  absl::StatusOr<std::shared_ptr<const Grammar>> Compile();

 private:
  static constexpr int kMaxRepeat = 10000;
  // Bounds on what a request's grammar may cost to compile (the text is
  // the client's): groups nested this deep, rules and elements in all.
  static constexpr int kMaxNesting = 100;
  static constexpr size_t kMaxRules = 200000;
  static constexpr size_t kMaxElements = 4000000;
  static constexpr int kUnbounded = -1;

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  bool Fail(absl::string_view what);
  void SkipSpace(bool newlines);
  bool ParseRule();
  std::string ParseName();
  std::vector<Sequence> ParseAlternatives(bool nested, int base);
  Sequence ParseSequence(bool nested, int base);
  bool ParseItem(int base, Sequence& sequence);
  bool ParseLiteral(Sequence& sequence);
  bool ParseClass(Sequence& sequence);
  bool ParseRepeat(int& min, int& max);
  void Repeat(int base, int min, int max, Sequence& sequence, size_t item_start);
  // A code point of the source, escapes decoded; false (failed) on bad input.
  bool ParseChar(uint32_t& code_point);
  void AppendClass(const std::vector<CodePointRange>& ranges, Sequence& sequence);
  int RuleId(const std::string& name);
  int NewRule(const std::string& base, std::vector<Sequence> alternatives);
  int ByteSetId(const ByteSet& set);
  absl::Status CheckRules() const;

  absl::string_view text_;
  size_t pos_ = 0;
  absl::Status error_;
  std::vector<std::vector<Sequence>> rules_;
  std::vector<std::string> names_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;  // Source offset of a rule's first reference.
  absl::flat_hash_map<std::string, int> rule_ids_;
  std::vector<ByteSet> byte_sets_;
  absl::flat_hash_map<std::vector<CodePointRange>, Element> classes_;
  int nesting_ = 0;
};

bool GbnfCompiler::Fail(absl::string_view what) {
  if (!error_.ok()) return false;
  size_t line = 1, column = 1;
  for (size_t i = 0; i < std::min(pos_, text_.size()); ++i) {
    if (text_[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  error_ = absl::InvalidArgumentError(absl::StrFormat("grammar line %d, column %d: %s", line, column, what));
  return false;
}

void GbnfCompiler::SkipSpace(bool newlines) {
  while (!AtEnd()) {
    const char c = Peek();
    if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
      ++pos_;
    } else if (c == '#') {
      while (!AtEnd() && Peek() != '\n') ++pos_;
    } else {
      break;
    }
  }
}

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

std::string GbnfCompiler::ParseName() {
  const size_t start = pos_;
  while (!AtEnd() && IsNameChar(Peek())) ++pos_;
  return std::string(text_.substr(start, pos_ - start));
}

int GbnfCompiler::RuleId(const std::string& name) {
  const auto [it, inserted] = rule_ids_.try_emplace(name, static_cast<int>(names_.size()));
  if (inserted && names_.size() == kMaxRules) Fail(absl::StrFormat("more than %d rules", kMaxRules));
  if (inserted) {
    names_.push_back(name);
    rules_.emplace_back();
    defined_.push_back(false);
    first_use_.push_back(pos_);
  }
  return it->second;
}

int GbnfCompiler::NewRule(const std::string& base, std::vector<Sequence> alternatives) {
  // A '.' no rule name the text gives can hold: generated rules never
  // take (or are taken by) a rule of the grammar's own.
  const int id = RuleId(absl::StrCat(base, ".", names_.size()));
  rules_[id] = std::move(alternatives);
  defined_[id] = true;
  return id;
}

int GbnfCompiler::ByteSetId(const ByteSet& set) {
  const auto it = std::find(byte_sets_.begin(), byte_sets_.end(), set);
  if (it != byte_sets_.end()) return static_cast<int>(it - byte_sets_.begin());
  byte_sets_.push_back(set);
  return static_cast<int>(byte_sets_.size() - 1);
}

bool GbnfCompiler::ParseRule() {
  const std::string name = ParseName();
  if (name.empty()) return Fail("expected a rule name");
  const int id = RuleId(name);
  if (defined_[id]) return Fail(absl::StrCat("rule '", name, "' is defined twice"));
  SkipSpace(false);
  if (text_.substr(pos_, 3) != "::=") return Fail(absl::StrCat("expected ::= after rule name '", name, "'"));
  pos_ += 3;
  SkipSpace(true);
  defined_[id] = true;
  rules_[id] = ParseAlternatives(/*nested=*/false, id);
  if (!error_.ok()) return false;
  SkipSpace(false);
  if (!AtEnd() && Peek() != '\n') {
    return Fail(absl::StrFormat("unexpected '%c' in rule '%s'", Peek(), name));
  }
  return true;
}

std::vector<Sequence> GbnfCompiler::ParseAlternatives(bool nested, int base) {
  std::vector<Sequence> alternatives;
  alternatives.push_back(ParseSequence(nested, base));
  while (error_.ok() && Peek() == '|') {
    ++pos_;
    SkipSpace(true);
    alternatives.push_back(ParseSequence(nested, base));
  }
  return alternatives;
}

Sequence GbnfCompiler::ParseSequence(bool nested, int base) {
  Sequence sequence;
  size_t item_start = 0;
  bool has_item = false;
  while (error_.ok()) {
    SkipSpace(nested);
    const char c = Peek();
    if (c == '*' || c == '+' || c == '?' || c == '{') {
      if (!has_item) {
        Fail(absl::StrFormat("'%c' has nothing to repeat", c));
        return sequence;
      }
      int min = 0, max = 0;
      if (!ParseRepeat(min, max)) return sequence;
      Repeat(base, min, max, sequence, item_start);
      has_item = false;  // a** is an error, as in llama.cpp.
      continue;
    }
    const size_t start = sequence.size();
    if (!ParseItem(base, sequence)) break;
    item_start = start;
    has_item = true;
  }
  return sequence;
}

// One literal, class, group or rule reference onto `sequence`; false (with
// no error) when the sequence ends here.
bool GbnfCompiler::ParseItem(int base, Sequence& sequence) {
  const char c = Peek();
  if (c == '"') return ParseLiteral(sequence);
  if (c == '[') return ParseClass(sequence);
  if (c == '.') {
    ++pos_;
    AppendClass({{0, kMaxCodePoint}}, sequence);
    return true;
  }
  if (c == '(') {
    if (nesting_ >= kMaxNesting) return Fail(absl::StrFormat("groups nested deeper than %d", kMaxNesting));
    ++pos_;
    SkipSpace(true);
    ++nesting_;
    std::vector<Sequence> alternatives = ParseAlternatives(/*nested=*/true, base);
    --nesting_;
    if (!error_.ok()) return false;
    if (Peek() != ')') return Fail("expected ')'");
    ++pos_;
    sequence.push_back({Element::kRule, NewRule(names_[base], std::move(alternatives))});
    return true;
  }
  if (IsNameChar(c)) {
    const size_t start = pos_;
    const std::string name = ParseName();
    size_t after = pos_;
    while (after < text_.size() && (text_[after] == ' ' || text_[after] == '\t')) ++after;
    if (text_.substr(after, 3) == "::=") {
      pos_ = start;
      return Fail(absl::StrCat("rule '", name, "' starts before the line ends: put each rule on its own line"));
    }
    sequence.push_back({Element::kRule, RuleId(name)});
    return true;
  }
  return false;
}

bool GbnfCompiler::ParseLiteral(Sequence& sequence) {
  ++pos_;  // The opening quote.
  while (true) {
    if (AtEnd() || Peek() == '\n') return Fail("unterminated string literal");
    if (Peek() == '"') break;
    uint32_t cp = 0;
    if (!ParseChar(cp)) return false;
    char bytes[4];
    const int n = EncodeUtf8(cp, bytes);
    for (int i = 0; i < n; ++i) {
      ByteSet set;
      set.Add(static_cast<uint8_t>(bytes[i]), static_cast<uint8_t>(bytes[i]));
      sequence.push_back({Element::kBytes, ByteSetId(set)});
    }
  }
  ++pos_;
  return true;
}

bool GbnfCompiler::ParseClass(Sequence& sequence) {
  ++pos_;  // '['
  const bool negated = Peek() == '^';
  if (negated) ++pos_;
  std::vector<CodePointRange> ranges;
  while (true) {
    if (AtEnd() || Peek() == '\n') return Fail("unterminated character class");
    if (Peek() == ']') break;
    uint32_t lo = 0;
    if (!ParseChar(lo)) return false;
    uint32_t hi = lo;
    if (Peek() == '-' && Peek(1) != ']' && Peek(1) != '\0') {
      ++pos_;
      if (!ParseChar(hi)) return false;
      if (hi < lo) return Fail(absl::StrFormat("range U+%04X-U+%04X is reversed", lo, hi));
    }
    ranges.push_back({lo, hi});
  }
  ++pos_;
  ranges = NormalizeRanges(std::move(ranges), negated);
  if (ranges.empty()) return Fail("a character class that matches nothing");
  AppendClass(ranges, sequence);
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool GbnfCompiler::ParseChar(uint32_t& cp) {
  if (Peek() != '\\') {
    const int n = DecodeUtf8(text_.substr(pos_), cp);
    if (n <= 0) return Fail("invalid UTF-8");
    pos_ += n;
    return true;
  }
  const char e = Peek(1);
  pos_ += 2;
  int digits = 0;
  switch (e) {
    case 'x': digits = 2; break;
    case 'u': digits = 4; break;
    case 'U': digits = 8; break;
    case 'n': cp = '\n'; return true;
    case 'r': cp = '\r'; return true;
    case 't': cp = '\t'; return true;
    case '\\': case '"': case '[': case ']': case '-': case '^': case '/': cp = static_cast<uint8_t>(e); return true;
    default: pos_ -= 2; return Fail(absl::StrFormat("unknown escape '\\%c'", e));
  }
  cp = 0;
  for (int i = 0; i < digits; ++i) {
    const int v = HexValue(Peek());
    if (v < 0) return Fail(absl::StrFormat("expected %d hex digits after '\\%c'", digits, e));
    cp = cp * 16 + v;
    ++pos_;
  }
  if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return Fail(absl::StrFormat("escape U+%X is not a Unicode scalar value", cp));
  }
  return true;
}

void GbnfCompiler::AppendClass(const std::vector<CodePointRange>& ranges, Sequence& sequence) {
  const auto cached = classes_.find(ranges);
  if (cached != classes_.end()) return sequence.push_back(cached->second);
  std::vector<Sequence> alternatives;
  ByteSet ascii;
  bool has_ascii = false;
  for (const Utf8Sequence& s : Utf8Sequences(ranges)) {
    if (s.size() == 1) {
      ascii.Add(s[0].first, s[0].second);
      has_ascii = true;
      continue;
    }
    Sequence bytes;
    for (const auto& [lo, hi] : s) {
      ByteSet set;
      set.Add(lo, hi);
      bytes.push_back({Element::kBytes, ByteSetId(set)});
    }
    alternatives.push_back(std::move(bytes));
  }
  Element element{Element::kBytes, 0};
  if (has_ascii) element.value = ByteSetId(ascii);
  if (!alternatives.empty()) {
    if (has_ascii) alternatives.insert(alternatives.begin(), Sequence{element});
    element = {Element::kRule, NewRule("char", std::move(alternatives))};
  }
  classes_.emplace(ranges, element);
  sequence.push_back(element);
}

bool GbnfCompiler::ParseRepeat(int& min, int& max) {
  const char c = Peek();
  ++pos_;
  if (c != '{') {
    min = c == '+' ? 1 : 0;
    max = c == '?' ? 1 : kUnbounded;
    return true;
  }
  const auto number = [&](int& out) {
    SkipSpace(false);
    if (!(Peek() >= '0' && Peek() <= '9')) return false;
    int64_t v = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      v = std::min<int64_t>(v * 10 + (Peek() - '0'), int64_t{kMaxRepeat} + 1);
      ++pos_;
    }
    out = static_cast<int>(v);
    SkipSpace(false);
    return true;
  };
  if (!number(min)) return Fail("expected a number after '{'");
  max = min;
  if (Peek() == ',') {
    ++pos_;
    if (!number(max)) max = kUnbounded;
  }
  if (Peek() != '}') return Fail("expected '}'");
  ++pos_;
  if (min > kMaxRepeat || max > kMaxRepeat) return Fail(absl::StrFormat("repetition counts above %d", kMaxRepeat));
  if (max != kUnbounded && max < min) return Fail(absl::StrFormat("repetition {%d,%d}: the maximum is below the minimum", min, max));
  return true;
}

// Replaces sequence[item_start, end) by `min` copies of it and up to
// max - min more (or any number more when unbounded), as rules whose
// recursive reference comes last, so the parser's stack does not grow
// with the count.
void GbnfCompiler::Repeat(int base, int min, int max, Sequence& sequence, size_t item_start) {
  Sequence item(sequence.begin() + item_start, sequence.end());
  sequence.resize(item_start);
  const std::string name = names_[base];
  const Element unit = item.size() == 1 ? item[0] : Element{Element::kRule, NewRule(name, {item})};
  for (int i = 0; i < min; ++i) sequence.push_back(unit);
  if (max == kUnbounded) {
    const int star = NewRule(name, {});
    rules_[star] = {{unit, {Element::kRule, star}}, {}};
    sequence.push_back({Element::kRule, star});
    return;
  }
  if (max == min) return;
  int tail = NewRule(name, {{unit}, {}});
  for (int i = min + 1; i < max; ++i) tail = NewRule(name, {{unit, {Element::kRule, tail}}, {}});
  sequence.push_back({Element::kRule, tail});
}

absl::Status GbnfCompiler::CheckRules() const {
  for (size_t r = 0; r < rules_.size(); ++r) {
    if (!defined_[r]) {
      GbnfCompiler at(text_);
      at.pos_ = first_use_[r];
      at.Fail(absl::StrCat("rule '", names_[r], "' is used but never defined"));
      return at.error_;
    }
  }
  return CheckNoLeftRecursion(rules_, names_);
}

absl::StatusOr<std::shared_ptr<const Grammar>> GbnfCompiler::Compile() {
  const int root = RuleId("root");
  SkipSpace(true);
  while (!AtEnd() && error_.ok()) {
    if (!ParseRule()) break;
    SkipSpace(true);
  }
  if (!error_.ok()) return error_;
  if (!defined_[root]) return absl::InvalidArgumentError("grammar: no rule named 'root' (where generation starts)");
  if (absl::Status s = CheckRules(); !s.ok()) return s;
  auto grammar = std::shared_ptr<Grammar>(new Grammar());
  grammar->root_ = root;
  grammar->byte_sets_ = byte_sets_;
  size_t elements = 0;
  for (const std::vector<Sequence>& alternatives : rules_) {
    for (const Sequence& s : alternatives) elements += s.size() + 1;
  }
  if (elements > kMaxElements) {
    return absl::InvalidArgumentError(
        absl::StrFormat("grammar: %d elements once repetitions are written out; at most %d", elements, kMaxElements));
  }
  for (const std::vector<Sequence>& alternatives : rules_) {
    std::vector<int32_t> starts;
    for (const Sequence& s : alternatives) {
      starts.push_back(static_cast<int32_t>(grammar->elements_.size()));
      grammar->elements_.insert(grammar->elements_.end(), s.begin(), s.end());
      grammar->elements_.push_back({Element::kEnd, 0});
    }
    grammar->rule_starts_.push_back(std::move(starts));
  }
  return std::shared_ptr<const Grammar>(std::move(grammar));
}

absl::StatusOr<std::shared_ptr<const Grammar>> Grammar::Parse(absl::string_view gbnf) {
  return GbnfCompiler(gbnf).Compile();
}

}  // namespace llama::grammar
