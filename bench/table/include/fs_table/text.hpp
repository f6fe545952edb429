// fs_table/text.hpp — the tables fs_table prints, and how they render as console text or as
// Markdown that Doxygen 1.9.4 accepts without warnings.
//
// Every piece of text is a list of spans, plain or code, and both are literal: in Markdown a
// code span keeps its text verbatim in a monospace font (names, error messages, kernels) and a
// plain span has every character Doxygen would read as markup backslash-escaped.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashsteps::table {

enum class Format { console, markdown };

struct Span {
  std::string text;
  bool code = false;
};
using Text = std::vector<Span>;

inline Text plain(std::string s) {
  return {Span{std::move(s), false}};
}
inline Text code(std::string s) {
  return {Span{std::move(s), true}};
}
/// Concatenation: `plain("failed: ") + code(msg)`.
Text operator+(Text a, const Text& b);

std::string render(const Text& t, Format f);

/// One table: an optional caption above, numbered notes below.
struct Table {
  Text caption;
  std::vector<Text> header;
  std::vector<bool> numeric;  ///< per column: right-aligned
  std::vector<std::vector<Text>> rows;
  std::vector<Text> notes;  ///< rendered as "(1) ...", "(2) ..." in order
};

/// Console: aligned columns. Markdown: caption paragraph, pipe table, notes as a list.
std::string render(const Table& t, Format f);

/// Numbers the distinct reasons why cells are empty, so a cell reads "n/a (2)" and the table
/// explains (2) once below.
class Footnotes {
 public:
  /// The cell text for a missing value with this reason.
  Text mark(const Text& reason);
  /// The reasons in order of first use; pass as Table::notes.
  const std::vector<Text>& notes() const { return notes_; }

 private:
  std::vector<std::string> keys_;
  std::vector<Text> notes_;
};

// Number formatting: three significant digits, never an exponent (times span 10 us to 10 s).
std::string fmt_sig(double x, int digits = 3);
std::string fmt_ratio(double x);    ///< "1.92x"
std::string fmt_percent(double x);  ///< "42.1%"
std::string fmt_bytes(double b);    ///< "1.23 GB" (SI, as Nsight Compute counts)
std::string fmt_ns(double ns);      ///< "12.3 us", "4.56 ms"

/// Plain text that Doxygen prints as written: \ ` * _ < > & @ # % | are backslash-escaped.
std::string md_text_body(std::string_view s);

/// The text of a Markdown code span that Doxygen prints verbatim: a backtick would end the
/// span, a pipe would end the table cell, and `%word` would lose its `%` (Doxygen's
/// no-autolink marker), so those are replaced or doubled.
std::string md_code_body(std::string_view s);

/// The fields of one CSV record on one line (Nsight Compute's output, predictions.csv): commas
/// separate, double quotes enclose a field that holds commas, "" inside quotes is one quote, a
/// trailing CR is dropped. nullopt when a quote is left open.
std::optional<std::vector<std::string>> split_csv(const std::string& line);

}  // namespace flashsteps::table
