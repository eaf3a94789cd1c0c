#include <dljob/util/text.hpp>

#include <locale.h> // newlocale, locale_t
#include <stdlib.h> // strtod_l (POSIX 2008; <cstdlib> need not declare it)

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>

namespace dljob::util {

std::vector<std::string_view> split_lines(std::string_view text) {
    return split(text, '\n');
}

std::vector<std::string_view> split(std::string_view text, char separator) {
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    while (start <= text.size()) {
        const auto end = text.find(separator, start);
        if (end == std::string_view::npos) {
            if (start < text.size()) {
                parts.push_back(text.substr(start));
            }
            break;
        }
        parts.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    return parts;
}

std::vector<std::string_view> split_whitespace(std::string_view text) {
    std::vector<std::string_view> parts;
    std::size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])) != 0) {
            ++i;
        }
        const std::size_t start = i;
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])) == 0) {
            ++i;
        }
        if (i > start) {
            parts.push_back(text.substr(start, i - start));
        }
    }
    return parts;
}

std::string_view trim(std::string_view text) {
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())) != 0) {
        text.remove_prefix(1);
    }
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())) != 0) {
        text.remove_suffix(1);
    }
    return text;
}

bool all_digits(std::string_view text) {
    return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) != 0;
    });
}

std::optional<int> parse_int(std::string_view text) {
    text = trim(text);
    int value = 0;
    const auto* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc() || ptr != end) {
        return std::nullopt;
    }
    return value;
}

std::string ascii_lower(std::string_view text) {
    std::string out(text);
    for (char& c : out) {
        if (c >= 'A' && c <= 'Z') {
            c = static_cast<char>(c - 'A' + 'a');
        }
    }
    return out;
}

std::from_chars_result from_chars_double(const char* first, const char* last, double& value) {
#if defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L
    return std::from_chars(first, last, value);
#else
    return from_chars_double_by_strtod(first, last, value);
#endif
}

std::from_chars_result from_chars_double_by_strtod(const char* first, const char* last,
                                                   double& value) {
    // strtod_l in the C locale over a bounded, terminated copy, refusing what from_chars
    // refuses: leading space or '+', and reading "0x..." as 0 followed by text.
    constexpr std::size_t longest = 128;
    const std::size_t length = static_cast<std::size_t>(last - first);
    const char* body = first != last && *first == '-' ? first + 1 : first;
    const bool starts_well =
        body != last && (std::isdigit(static_cast<unsigned char>(*body)) != 0 || *body == '.' ||
                         *body == 'i' || *body == 'I' || *body == 'n' || *body == 'N');
    if (!starts_well || length > longest) {
        return {first, std::errc::invalid_argument};
    }
    std::array<char, longest + 1> copy{};
    std::copy(first, last, copy.begin());
    if (last - body >= 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X')) {
        copy[static_cast<std::size_t>(body - first) + 1] = '\0';
    }
    static const locale_t c_locale = newlocale(LC_ALL_MASK, "C", nullptr);
    char* end = nullptr;
    errno = 0;
    const double parsed = strtod_l(copy.data(), &end, c_locale);
    if (end == copy.data()) {
        return {first, std::errc::invalid_argument};
    }
    const char* ptr = first + (end - copy.data());
    if (errno == ERANGE) {
        return {ptr, std::errc::result_out_of_range};
    }
    value = parsed;
    return {ptr, std::errc{}};
}

} // namespace dljob::util
