#pragma once
// Small text helpers for parsing what commands print (scheduler output, module lists): views
// into the caller's string, no copies.

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
/// `text` with A-Z lowered; other bytes (UTF-8 included) unchanged, whatever the locale.
std::string ascii_lower(std::string_view text);

} // namespace dljob::util
