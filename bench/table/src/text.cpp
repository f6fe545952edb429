// fs_table/src/text.cpp — rendering tables as console text or Doxygen-safe Markdown.
#include "fs_table/table.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace flashsteps::table {

Text operator+(Text a, const Text& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

namespace {

std::string md_code_body(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '`') {
      out += '\'';
    } else if (c == '|') {
      out += '/';
    } else if (c == '\n' || c == '\r' || c == '\t') {
      out += ' ';
    } else if (c == '%' && i + 1 < s.size() &&
               (std::isalpha(static_cast<unsigned char>(s[i + 1])) || s[i + 1] == '_')) {
      out += "%%";  // Doxygen reads %word as "word, not autolinked"; %% prints one %
    } else {
      out += c;
    }
  }
  // A code span cannot start or end with a space in Doxygen; they carry no meaning here.
  const auto first = out.find_first_not_of(' ');
  if (first == std::string::npos) return {};
  return out.substr(first, out.find_last_not_of(' ') - first + 1);
}

std::string md_text_body(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (c == '\n' || c == '\r' || c == '\t') {
      out += ' ';
    } else {
      if (std::string_view("\\`*_<>&@#%|").find(c) != std::string_view::npos) out += '\\';
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string render(const Text& t, Format f) {
  std::string out;
  for (const Span& s : t) {
    if (f == Format::console) {
      out += s.text;
    } else if (!s.code) {
      out += md_text_body(s.text);
    } else if (std::string body = md_code_body(s.text); !body.empty()) {
      out += '`' + body + '`';
    }
  }
  return out;
}

namespace {

// Display width of UTF-8 text: one column per code point (GPU and kernel names are ASCII, the
// captions use a middle dot).
std::size_t width(const std::string& s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string pad(const std::string& s, std::size_t w, bool right) {
  const std::string fill(w > width(s) ? w - width(s) : 0, ' ');
  return right ? fill + s : s + fill;
}

}  // namespace

std::string render(const Table& t, Format f) {
  const std::size_t ncol = t.header.size();
  auto rendered_row = [&](const std::vector<Text>& row) {
    std::vector<std::string> out;
    for (std::size_t c = 0; c < ncol; ++c)
      out.push_back(c < row.size() ? render(row[c], f) : "");
    return out;
  };
  std::vector<std::vector<std::string>> rows{rendered_row(t.header)};
  for (const auto& r : t.rows)
    rows.push_back(rendered_row(r));
  auto numeric = [&](std::size_t c) { return c < t.numeric.size() && t.numeric[c]; };

  std::ostringstream os;
  if (f == Format::markdown) {
    // <b>, not **: Doxygen 1.9.4 leaves **...** as asterisks when it opens with a code span,
    // which most captions do ("`03_online_softmax` at every shape").
    if (!t.caption.empty()) os << "<b>" << render(t.caption, f) << "</b>\n\n";
    for (std::size_t r = 0; r < rows.size(); ++r) {
      os << '|';
      for (const std::string& cell : rows[r])
        os << ' ' << cell << " |";
      os << '\n';
      if (r == 0) {
        os << '|';
        for (std::size_t c = 0; c < ncol; ++c)
          os << (numeric(c) ? "---:|" : ":---|");
        os << '\n';
      }
    }
    if (!t.notes.empty()) os << '\n';
    for (std::size_t i = 0; i < t.notes.size(); ++i) {
      os << "- (" << i + 1 << ") " << render(t.notes[i], f) << '\n';
    }
    return os.str();
  }

  std::vector<std::size_t> w(ncol, 0);
  for (const auto& r : rows) {
    for (std::size_t c = 0; c < ncol; ++c)
      w[c] = std::max(w[c], width(r[c]));
  }
  if (!t.caption.empty()) os << render(t.caption, f) << '\n';
  for (std::size_t r = 0; r < rows.size(); ++r) {
    std::string line;
    for (std::size_t c = 0; c < ncol; ++c) {
      line += (c ? "  " : "") + pad(rows[r][c], w[c], numeric(c));
    }
    os << line.substr(0, line.find_last_not_of(' ') + 1) << '\n';
    if (r == 0) {
      for (std::size_t c = 0; c < ncol; ++c)
        os << (c ? "  " : "") << std::string(w[c], '-');
      os << '\n';
    }
  }
  for (std::size_t i = 0; i < t.notes.size(); ++i) {
    os << "  (" << i + 1 << ") " << render(t.notes[i], f) << '\n';
  }
  return os.str();
}

std::string Footnotes::number(const Text& reason) {
  const std::string key = render(reason, Format::markdown);
  auto it = std::find(keys_.begin(), keys_.end(), key);
  if (it == keys_.end()) {
    keys_.push_back(key);
    notes_.push_back(reason);
    it = keys_.end() - 1;
  }
  std::string n = "(";  // appended, not "(" + ... + ")": GCC 12 warns falsely there (-Wrestrict)
  n += std::to_string(it - keys_.begin() + 1);
  n += ')';
  return n;
}

Text Footnotes::mark(const Text& reason) {
  return plain("n/a " + number(reason));
}

Text Footnotes::annotate(const std::string& value, const Text& note) {
  return plain(value + " " + number(note));
}

std::string fmt_sig(double x, int digits) {
  if (!std::isfinite(x)) return "nan";
  if (x == 0) return "0";
  int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(x))));
  // 9.996 rounds up to 10.0: count the digits of the rounded value, not of x.
  if (std::fabs(x) >=
      std::pow(10.0, magnitude + 1) - 0.5 * std::pow(10.0, magnitude + 1 - digits)) {
    ++magnitude;
  }
  const int decimals = std::clamp(digits - 1 - magnitude, 0, 9);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return buf;
}

std::string fmt_ratio(double x) {
  return fmt_sig(x) + "x";
}
std::string fmt_percent(double x) {
  return fmt_sig(x) + "%";
}

std::string fmt_bytes(double b) {
  static constexpr const char* kUnits[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (std::fabs(b) >= 1000 && u < 4)
    b /= 1000, ++u;
  return fmt_sig(b) + " " + kUnits[u];
}

std::string fmt_ns(double ns) {
  if (std::fabs(ns) < 1e3) return fmt_sig(ns) + " ns";
  if (std::fabs(ns) < 1e6) return fmt_sig(ns / 1e3) + " us";
  if (std::fabs(ns) < 1e9) return fmt_sig(ns / 1e6) + " ms";
  return fmt_sig(ns / 1e9) + " s";
}

std::optional<double> parse_number(const std::string& s) {
  double v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc{} || r.ptr != s.data() + s.size() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

std::optional<std::vector<std::string>> split_csv(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  if (quoted) return std::nullopt;
  return fields;
}

Text inline_markup(std::string_view s) {
  Text t;
  bool in_code = false;
  for (std::size_t at = 0; at <= s.size();) {
    const std::size_t tick = std::min(s.find('`', at), s.size());
    if (tick > at) t.push_back(Span{std::string(s.substr(at, tick - at)), in_code});
    in_code = !in_code;
    at = tick + 1;
  }
  return t;
}

}  // namespace flashsteps::table
