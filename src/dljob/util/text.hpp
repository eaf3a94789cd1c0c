#pragma once
// Small text helpers for parsing what commands print (scheduler output, module lists): views
// into the caller's string, no copies.

#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dljob::util {

/// Lines without their '\n'; no empty last line for text that ends in one.
std::vector<std::string_view> split_lines(std::string_view text);
std::vector<std::string_view> split(std::string_view text, char separator);
std::vector<std::string_view> split_whitespace(std::string_view text);
std::string_view trim(std::string_view text);
bool all_digits(std::string_view text);
/// The whole of `text` (surrounding space allowed) as an int, nothing else.
std::optional<int> parse_int(std::string_view text);
/// std::from_chars for a double, with its rules (no leading space or '+', no hex prefix, C
/// locale, range errors leave `value` alone). libstdc++ has the floating-point overload from
/// GCC 11; the release is built with Debian 11's GCC 10 (docs/install.md).
std::from_chars_result from_chars_double(const char* first, const char* last, double& value);
/// What from_chars_double uses without std::from_chars for doubles; always built, so the tests
/// hold it to std::from_chars where both exist.
std::from_chars_result from_chars_double_by_strtod(const char* first, const char* last,
                                                   double& value);
/// `text` with A-Z lowered; other bytes (UTF-8 included) unchanged, whatever the locale.
std::string ascii_lower(std::string_view text);

} // namespace dljob::util
