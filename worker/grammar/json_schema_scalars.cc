#include "worker/grammar/json_schema_scalars.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "worker/grammar/gbnf_writer.h"
#include "worker/grammar/regex_to_gbnf.h"

namespace llama::grammar::internal_grammar {
namespace {

using ::nlohmann::ordered_json;

// Formats as regexes over the string's characters. Dates leave out Feb 29
// and years before 1000, times leave out leap seconds, and date-time and
// time take only "T" and "Z" in upper case: each a subset of RFC 3339 that
// every validator accepts without a calendar.
struct Format {
  const char* name;
  const char* regex;
};
#define LLAMA_DATE_RE                                                                                  \
  R"([1-9]\d{3}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|02-)" \
  R"((?:0[1-9]|1\d|2[0-8])))"
#define LLAMA_TIME_RE R"((?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,6})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d))"
#define LLAMA_OCTET_RE R"((?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))"
// Labels of up to 62 characters without "--" (which marks IDNA's A-labels).
#define LLAMA_LABEL_RE R"([A-Za-z0-9]{1,20}(?:-[A-Za-z0-9]{1,20}){0,2})"
#define LLAMA_HOSTNAME_RE \
  R"((?:)" LLAMA_LABEL_RE R"(\.){0,2}[A-Za-z][A-Za-z0-9]{0,19}(?:-[A-Za-z0-9]{1,20}){0,2})"
#define LLAMA_URI_CHARS R"([A-Za-z0-9._~!$&'()*+,;=:@-])"
#define LLAMA_URL_RE                                                                                  \
  "https?://" LLAMA_HOSTNAME_RE R"((?::[1-9]\d{0,3})?(?:/)" LLAMA_URI_CHARS R"(*)*(?:\?(?:)" LLAMA_URI_CHARS \
  R"(|[/?])*)?(?:#(?:)" LLAMA_URI_CHARS R"(|[/?])*)?)"
constexpr Format kFormats[] = {
    {"date", LLAMA_DATE_RE},
    {"time", LLAMA_TIME_RE},
    {"date-time", LLAMA_DATE_RE "T" LLAMA_TIME_RE},
    {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
    // Within RFC 5321's and RFC 1035's lengths (a local part of at most 64
    // octets, labels of at most 63, four of them): a model cannot write
    // one forever.
    {"email", R"([A-Za-z0-9_%+-]{1,32}(?:\.[A-Za-z0-9_%+-]{1,31})?@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)"
              R"((?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?){1,3})"},
    {"ipv4", LLAMA_OCTET_RE R"((?:\.)" LLAMA_OCTET_RE "){3}"},
    // Eight groups in full, without "::" or an IPv4 tail.
    {"ipv6", "[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{1,4}){7}"},
    // Regular expressions of literal words, optionally anchored: valid in
    // ECMA 262 and every other dialect.
    {"regex", R"(\^?[A-Za-z0-9_ .-]{0,64}\$?)"},
    // RFC 1123 names of at most three labels, the last starting with a letter.
    {"hostname", LLAMA_HOSTNAME_RE},
    // http(s) URLs of such a host, an optional port, a path, query and
    // fragment of unreserved characters and sub-delimiters (no percent
    // escapes): absolute URIs, and so URI references too.
    {"uri", LLAMA_URL_RE},
    {"uri-reference", LLAMA_URL_RE},
};
#undef LLAMA_DATE_RE
#undef LLAMA_TIME_RE
#undef LLAMA_OCTET_RE
#undef LLAMA_LABEL_RE
#undef LLAMA_HOSTNAME_RE
#undef LLAMA_URI_CHARS
#undef LLAMA_URL_RE

// The other formats JSON Schema 2020-12 defines: validators check them, so
// they are refused rather than ignored. Formats outside the standard are
// annotations no validator checks, and are ignored.
constexpr const char* kRefusedFormats[] = {
    "duration",     "idn-email",    "idn-hostname",          "iri",   "iri-reference",
    "uri-template", "json-pointer", "relative-json-pointer",
};

// A number's bounds past this lose whole numbers as doubles, which
// validators compare numbers as; integers compare exactly, up to int64.
constexpr double kMaxNumberBound = 1e15;
constexpr double kMaxIntegerBound = 9e18;
// The largest integer part written where no bound limits it (json_grammar.h).
constexpr int64_t kMaxUnbounded = 9999999999999999;
// Significant digits a double keeps: fractions near a bound stay within them.
constexpr int kDoubleDigits = 15;

absl::StatusOr<std::string> StringBody(const ordered_json& schema, const std::string& pointer, GbnfRules& rules) {
  std::string keyword, regex;
  if (schema.contains("pattern")) {
    if (!schema["pattern"].is_string()) return Unsupported("pattern", pointer, "it must be a string");
    keyword = "pattern";
    regex = schema["pattern"].get<std::string>();
  }
  if (schema.contains("format")) {
    if (!schema["format"].is_string()) return Unsupported("format", pointer, "it must be a string");
    const std::string format = schema["format"].get<std::string>();
    const auto known =
        std::find_if(std::begin(kFormats), std::end(kFormats), [&](const Format& f) { return format == f.name; });
    if (known != std::end(kFormats)) {
      if (!keyword.empty()) return Unsupported("format", pointer, "together with \"pattern\"");
      keyword = "format";
      regex = known->regex;
    } else if (std::find(std::begin(kRefusedFormats), std::end(kRefusedFormats), format) != std::end(kRefusedFormats)) {
      return Unsupported("format", pointer, absl::StrCat("the format \"", format, "\""));
    }
  }
  ASSIGN_OR_RETURN(const std::optional<int64_t> min_length, ReadCount(schema, "minLength", pointer));
  ASSIGN_OR_RETURN(const std::optional<int64_t> max_length, ReadCount(schema, "maxLength", pointer));
  if (min_length && max_length && *min_length > *max_length) {
    return Unsupported("minLength", pointer, "it is over maxLength: no string has such a length");
  }
  if (keyword.empty()) {
    return GbnfRepeat(rules.Use("char"), min_length.value_or(0), WrittenMax(max_length.value_or(kNoLimit)));
  }
  absl::StatusOr<RegexExpression> expression =
      RegexToGbnfExpression(regex, RegexTarget::kJsonString, max_length ? WrittenMax(*max_length) : kNoLimit);
  if (!expression.ok()) return Unsupported(keyword, pointer, expression.status().message());
  // A grammar cannot intersect two languages: a maxLength holds the
  // pattern's repetitions to what keeps every match within it (a subset),
  // and a minLength is fine only when every match already has it.
  if (min_length && expression->min_length < *min_length) {
    return Unsupported("minLength", pointer,
                       absl::StrCat("together with \"", keyword, "\" that allows shorter strings"));
  }
  if (max_length && (expression->max_length == kNoLimit || expression->max_length > *max_length)) {
    return Unsupported("maxLength", pointer,
                       absl::StrCat("together with \"", keyword, "\" that allows longer strings"));
  }
  return expression->gbnf;
}

// A lower or an upper bound, and the keyword it came from.
struct Bound {
  double value = 0;
  bool exclusive = false;
  const char* keyword = nullptr;
  int64_t integer = 0;  // The nearest integer within the bound, exact for integer JSON.
};

struct Bounds {
  std::optional<Bound> lo, hi;
};

// minimum/maximum with exclusiveMinimum/exclusiveMaximum as numbers (draft
// 6 on) or as booleans that make minimum/maximum exclusive (draft 4).
absl::StatusOr<Bounds> ReadBounds(const ordered_json& schema, const std::string& pointer, double max_abs) {
  Bounds bounds;
  struct Keyword {
    const char* name;
    bool lower;
    bool exclusive;
  };
  for (const Keyword& k : {Keyword{"minimum", true, false}, Keyword{"exclusiveMinimum", true, true},
                           Keyword{"maximum", false, false}, Keyword{"exclusiveMaximum", false, true}}) {
    if (!schema.contains(k.name)) continue;
    const ordered_json& v = schema[k.name];
    if (k.exclusive && v.is_boolean()) continue;  // Read with minimum/maximum below.
    if (!v.is_number()) return Unsupported(k.name, pointer, "it must be a number");
    double value = v.get<double>();
    const char* exclusive_flag = k.lower ? "exclusiveMinimum" : "exclusiveMaximum";
    bool exclusive = k.exclusive || (schema.contains(exclusive_flag) && schema[exclusive_flag] == true);
    // A bound past what is written exactly on the side it opens to (a
    // minimum of -2^63, a maximum of 1.8e308) is held to it: a subset.
    const bool held = k.lower ? value < -max_abs : value > max_abs;
    if (held) {
      value = k.lower ? -max_abs : max_abs;
      exclusive = false;
    } else if (std::fabs(value) > max_abs) {
      return Unsupported(k.name, pointer, absl::StrCat("bounds past ", max_abs));
    }
    std::optional<Bound>& bound = k.lower ? bounds.lo : bounds.hi;
    const bool tighter =
        !bound || (k.lower ? value > bound->value : value < bound->value) || (value == bound->value && exclusive);
    if (!tighter) continue;
    int64_t integer = 0;
    if (v.is_number_integer() && !held) {
      integer = v.get<int64_t>() + (exclusive ? (k.lower ? 1 : -1) : 0);
    } else {
      integer = static_cast<int64_t>(k.lower ? (exclusive ? std::floor(value) + 1 : std::ceil(value))
                                             : (exclusive ? std::ceil(value) - 1 : std::floor(value)));
    }
    bound = Bound{value, exclusive, k.name, integer};
  }
  return bounds;
}

int Digits(int64_t n) { return static_cast<int>(std::to_string(n).size()); }

std::string DigitClass(char lo, char hi) {
  return lo == hi ? absl::StrCat("\"", std::string(1, lo), "\"")
                  : absl::StrCat("[", std::string(1, lo), "-", std::string(1, hi), "]");
}

// The decimal strings from `a` to `b`, both of the same length: a shared
// prefix, then for the first digit that differs, a's rest up to 9...9, the
// digits in between with anything after them, and 0...0 up to b's rest.
std::string SameLengthRange(const std::string& a, const std::string& b) {
  size_t common = 0;
  while (common < a.size() && a[common] == b[common]) ++common;
  std::vector<std::string> items;
  if (common > 0) items.push_back(absl::StrCat("\"", a.substr(0, common), "\""));
  if (common == a.size()) return GbnfSequence(items);
  const char x = a[common], y = b[common];
  const std::string a_rest = a.substr(common + 1), b_rest = b.substr(common + 1);
  const int tail = static_cast<int>(a_rest.size());
  const bool a_all_zero = a_rest.find_first_not_of('0') == std::string::npos;
  const bool b_all_nine = b_rest.find_first_not_of('9') == std::string::npos;
  std::vector<std::string> alternatives;
  if (!a_all_zero)
    alternatives.push_back(GbnfSequence({DigitClass(x, x), SameLengthRange(a_rest, std::string(tail, '9'))}));
  const char from = a_all_zero ? x : x + 1, to = b_all_nine ? y : y - 1;
  if (from <= to) {
    std::vector<std::string> middle = {DigitClass(from, to)};
    if (tail > 0) middle.push_back(GbnfRepeat("[0-9]", tail, tail));
    alternatives.push_back(GbnfSequence(middle));
  }
  if (!b_all_nine)
    alternatives.push_back(GbnfSequence({DigitClass(y, y), SameLengthRange(std::string(tail, '0'), b_rest)}));
  items.push_back(GbnfAlternatives(alternatives));
  return GbnfSequence(items);
}

// The integers in [lo, hi], 0 <= lo <= hi, in decimal without leading zeros.
std::string NonNegativeRange(int64_t lo, int64_t hi) {
  const int lo_digits = Digits(lo), hi_digits = Digits(hi);
  if (lo_digits == hi_digits) return SameLengthRange(std::to_string(lo), std::to_string(hi));
  std::vector<std::string> alternatives = {SameLengthRange(std::to_string(lo), std::string(lo_digits, '9'))};
  if (hi_digits - lo_digits >= 2)
    alternatives.push_back(GbnfSequence({"[1-9]", GbnfRepeat("[0-9]", lo_digits, hi_digits - 2)}));
  alternatives.push_back(SameLengthRange(absl::StrCat("1", std::string(hi_digits - 1, '0')), std::to_string(hi)));
  return GbnfAlternatives(alternatives);
}

// The integers in [lo, hi]; negative ones without "-0".
std::string IntegerRange(int64_t lo, int64_t hi) {
  std::vector<std::string> alternatives;
  if (lo < 0) alternatives.push_back(GbnfSequence({"\"-\"", NonNegativeRange(std::max<int64_t>(1, -hi), -lo)}));
  if (hi >= 0) alternatives.push_back(NonNegativeRange(std::max<int64_t>(0, lo), hi));
  return GbnfAlternatives(alternatives);
}

// A bound on a number's magnitude, its value without the sign: the whole
// part and the digits after the point (no trailing zeros; none if whole).
struct MagnitudeBound {
  int64_t whole = 0;
  std::string fraction;
  bool exclusive = false;
};

bool AllZeros(const std::string& digits) { return digits.find_first_not_of('0') == std::string::npos; }

// The digit strings D of at most `n` digits whose fraction 0.D lies within
// 0.lo and 0.hi (no bound where absent), as GBNF alternatives for those
// with one digit or more; `*empty` tells whether the empty string (0) is
// within. Digit by digit: a first digit strictly between the bounds frees
// the rest, one equal to a bound's keeps to that bound's rest.
std::vector<std::string> FractionDigits(std::optional<std::string> lo, bool lo_exclusive, std::optional<std::string> hi,
                                        bool hi_exclusive, int n, bool* empty) {
  if (lo && AllZeros(*lo) && !lo_exclusive) lo.reset();
  *empty = !lo && (!hi || !AllZeros(*hi) || !hi_exclusive);
  if (n == 0) return {};
  if (!lo && !hi) return {GbnfRepeat("[0-9]", 1, n)};
  if (!lo && AllZeros(*hi) && !hi_exclusive) return {GbnfRepeat("\"0\"", 1, n)};
  const char first = lo && !lo->empty() ? (*lo)[0] : '0';
  const char last = hi ? (hi->empty() ? '0' : (*hi)[0]) : '9';
  auto rest = [](const std::optional<std::string>& bound) -> std::optional<std::string> {
    return bound->empty() ? "" : bound->substr(1);
  };
  std::vector<std::string> alternatives;
  for (char d = first; d <= last; ++d) {
    const bool at_lo = lo && d == first, at_hi = hi && d == last;
    if (!at_lo && !at_hi) {
      const char to = hi ? last - 1 : last;
      alternatives.push_back(GbnfSequence({DigitClass(d, to), GbnfRepeat("[0-9]", 0, n - 1)}));
      d = to;
      continue;
    }
    bool then_empty = false;
    const std::vector<std::string> then = FractionDigits(at_lo ? rest(lo) : std::nullopt, lo_exclusive,
                                                         at_hi ? rest(hi) : std::nullopt, hi_exclusive, n - 1, &then_empty);
    if (!then.empty()) {
      const std::string after = GbnfAlternatives(then);
      alternatives.push_back(GbnfSequence({DigitClass(d, d), then_empty ? GbnfRepeat(after, 0, 1) : after}));
    } else if (then_empty) {
      alternatives.push_back(DigitClass(d, d));
    }
  }
  return alternatives;
}

// The whole part `whole` and a fraction within the bounds, "I" or "I.F";
// empty text when none is.
std::string WholeAndFraction(int64_t whole, const std::optional<std::string>& lo, bool lo_exclusive,
                             const std::optional<std::string>& hi, bool hi_exclusive, int n) {
  bool empty = false;
  const std::vector<std::string> fractions = FractionDigits(lo, lo_exclusive, hi, hi_exclusive, n, &empty);
  const std::string integer = absl::StrCat("\"", whole, "\"");
  if (fractions.empty()) return empty ? integer : "";
  const std::string point_and_fraction = GbnfSequence({"\".\"", GbnfAlternatives(fractions)});
  return GbnfSequence({integer, empty ? GbnfRepeat(point_and_fraction, 0, 1) : point_and_fraction});
}

// Decimals I or I.F (no exponent) whose value is within the bounds; empty
// text when none is. Near an exclusive bound the fraction keeps to digits a
// double holds, so that 4.9999999999999999 (which reads as 5.0) is not
// written for "less than 5"; near a fractional bound too, which then has
// no more digits than that.
std::string MagnitudeRange(const MagnitudeBound& lower, const std::optional<MagnitudeBound>& upper,
                           GbnfRules& rules) {
  const int fraction_digits = std::max(1, kDoubleDigits - Digits(upper ? upper->whole : lower.whole));
  if (upper && upper->whole < lower.whole) return "";
  std::vector<std::string> alternatives;
  // The lower bound's whole part where it limits the fraction, and the
  // upper's where they share it.
  const bool one_whole = upper && upper->whole == lower.whole;
  const bool lower_whole_free = lower.fraction.empty() && !lower.exclusive;
  if (one_whole || !lower_whole_free) {
    std::string at_lower = WholeAndFraction(lower.whole, lower.fraction, lower.exclusive,
                                            one_whole ? std::optional<std::string>(upper->fraction) : std::nullopt,
                                            one_whole && upper->exclusive, fraction_digits);
    if (one_whole) return at_lower;
    if (!at_lower.empty()) alternatives.push_back(std::move(at_lower));
  }
  // The whole parts from there up to the upper bound's, with any fraction.
  const int64_t start = lower.whole + (lower_whole_free ? 0 : 1);
  const int64_t end = upper ? upper->whole - 1 : kMaxUnbounded;
  if (start <= end) {
    const std::string fraction =
        upper && upper->exclusive ? GbnfRepeat("[0-9]", 1, fraction_digits) : rules.Use("fraction");
    alternatives.push_back(
        GbnfSequence({NonNegativeRange(start, end), GbnfRepeat(GbnfSequence({"\".\"", fraction}), 0, 1)}));
  }
  if (upper) {
    std::string at_upper =
        WholeAndFraction(upper->whole, std::nullopt, false, upper->fraction, upper->exclusive, fraction_digits);
    if (!at_upper.empty()) alternatives.push_back(std::move(at_upper));
  }
  return alternatives.empty() ? "" : GbnfAlternatives(alternatives);
}

// `bound` without its sign (`sign` -1 for one below zero) as a whole part
// and the digits of its shortest decimal that reads back as the same double.
absl::StatusOr<MagnitudeBound> Magnitude(const Bound& bound, double sign, const std::string& pointer) {
  const double magnitude = sign * bound.value;
  char text[400];
  const std::to_chars_result written = std::to_chars(text, text + sizeof(text), magnitude, std::chars_format::fixed);
  const std::string decimal(text, written.ptr);
  const size_t point = decimal.find('.');
  MagnitudeBound out{static_cast<int64_t>(std::floor(magnitude)),
                     point == std::string::npos ? "" : decimal.substr(point + 1), bound.exclusive};
  if (static_cast<int>(out.fraction.size()) > std::max(1, kDoubleDigits - Digits(out.whole))) {
    return Unsupported(bound.keyword, pointer, "the bound has more digits than a double keeps");
  }
  return out;
}

}  // namespace

absl::Status Unsupported(absl::string_view keyword, const std::string& pointer, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("\"", keyword, "\" at ", pointer.empty() ? "/" : pointer,
                                                 " is not supported", why.empty() ? "" : ": ", why));
}

int64_t CodePoints(absl::string_view text) {
  return std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<uint8_t>(c) & 0xC0) != 0x80; });
}

absl::StatusOr<std::optional<int64_t>> ReadCount(const ordered_json& schema, const char* keyword,
                                                 const std::string& pointer) {
  if (!schema.contains(keyword)) return std::nullopt;
  const ordered_json& v = schema[keyword];
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
    return Unsupported(keyword, pointer, "it must be a non-negative integer");
  }
  return v.get<int64_t>();
}

absl::StatusOr<std::string> StringItem(const ordered_json& schema, const std::string& pointer, GbnfRules& rules) {
  ASSIGN_OR_RETURN(const std::string body, StringBody(schema, pointer, rules));
  // Every unconstrained string is the one rule, so that the matcher's masks
  // inside any of them share one split (token_matcher.h).
  if (body == GbnfRepeat(rules.Use("char"), 0, kNoLimit)) return rules.Use("string");
  return GbnfSequence({R"("\"")", body, R"("\"")"});
}

absl::StatusOr<std::string> IntegerItem(const ordered_json& schema, const std::string& pointer, GbnfRules& rules) {
  ASSIGN_OR_RETURN(const Bounds bounds, ReadBounds(schema, pointer, kMaxIntegerBound));
  if (!bounds.lo && !bounds.hi) return rules.Use("integer");
  const int64_t lo = bounds.lo ? bounds.lo->integer : std::min(-kMaxUnbounded, bounds.hi->integer);
  const int64_t hi = bounds.hi ? bounds.hi->integer : std::max(kMaxUnbounded, bounds.lo->integer);
  if (lo > hi)
    return Unsupported((bounds.lo ? bounds.lo : bounds.hi)->keyword, pointer, "no integer is within the bounds");
  return IntegerRange(lo, hi);
}

absl::StatusOr<std::string> NumberItem(const ordered_json& schema, const std::string& pointer, GbnfRules& rules) {
  ASSIGN_OR_RETURN(const Bounds bounds, ReadBounds(schema, pointer, kMaxNumberBound));
  if (!bounds.lo && !bounds.hi) return rules.Use("number");
  const std::optional<Bound>& lo = bounds.lo;
  const std::optional<Bound>& hi = bounds.hi;
  auto magnitude = [&](const std::optional<Bound>& b, double sign) -> absl::StatusOr<std::optional<MagnitudeBound>> {
    if (!b) return std::nullopt;
    return Magnitude(*b, sign, pointer);
  };
  std::vector<std::string> alternatives;
  if (!hi || hi->value > 0 || (hi->value == 0 && !hi->exclusive)) {  // Zero and up, unsigned.
    ASSIGN_OR_RETURN(const std::optional<MagnitudeBound> from, magnitude(lo, 1));
    ASSIGN_OR_RETURN(const std::optional<MagnitudeBound> to, magnitude(hi, 1));
    const MagnitudeBound lower = lo && lo->value >= 0 ? *from : MagnitudeBound{};
    const std::string positive = MagnitudeRange(lower, to, rules);
    if (!positive.empty()) alternatives.push_back(positive);
  }
  if (!lo || lo->value < 0) {  // Below zero: "-" and a magnitude over zero.
    ASSIGN_OR_RETURN(const std::optional<MagnitudeBound> from, magnitude(hi, -1));
    ASSIGN_OR_RETURN(const std::optional<MagnitudeBound> to, magnitude(lo, -1));
    const MagnitudeBound lower = hi && hi->value < 0 ? *from : MagnitudeBound{0, "", true};
    const std::string negative = MagnitudeRange(lower, to, rules);
    if (!negative.empty()) alternatives.push_back(GbnfSequence({"\"-\"", negative}));
  }
  if (alternatives.empty()) return Unsupported((lo ? lo : hi)->keyword, pointer, "no number is within the bounds");
  return GbnfAlternatives(alternatives);
}

}  // namespace llama::grammar::internal_grammar
