#include <dljob/util/shell.hpp>

#include <fmt/format.h>

#include <cctype>

namespace dljob::util {
namespace {

bool is_control(char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte < 0x20 || byte == 0x7f;
}

bool is_name_start(char c) {
    return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_';
}
bool is_name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

} // namespace

std::string shell_quote(std::string_view value) {
    bool has_control = false;
    for (const char c : value) {
        has_control = has_control || is_control(c);
    }
    std::string out;
    if (!has_control) {
        out.push_back('\'');
        for (const char c : value) {
            if (c == '\'') {
                out += R"('\'')";
            } else {
                out.push_back(c);
            }
        }
        out.push_back('\'');
        return out;
    }
    out = "$'";
    for (const char c : value) {
        if (is_control(c)) {
            out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        } else if (c == '\'' || c == '\\') {
            out.push_back('\\');
            out.push_back(c);
        } else {
            out.push_back(c);
        }
    }
    out.push_back('\'');
    return out;
}

std::string shell_word_with_variables(std::string_view value) {
    std::string out;
    std::string literal;
    const auto flush = [&] {
        if (!literal.empty()) {
            out += shell_quote(literal);
            literal.clear();
        }
    };
    std::size_t i = 0;
    if (!value.empty() && value[0] == '~' && (value.size() == 1 || value[1] == '/')) {
        out += "\"${HOME-}\"";
        i = 1;
    }
    while (i < value.size()) {
        const char c = value[i];
        if (c == '$' && i + 1 < value.size() && is_name_start(value[i + 1])) {
            std::size_t end = i + 1;
            while (end < value.size() && is_name_char(value[end])) {
                ++end;
            }
            flush();
            out += fmt::format("\"${{{}-}}\"", value.substr(i + 1, end - i - 1));
            i = end;
        } else if (c == '$' && i + 2 < value.size() && value[i + 1] == '{' &&
                   is_name_start(value[i + 2])) {
            std::size_t end = i + 2;
            while (end < value.size() && is_name_char(value[end])) {
                ++end;
            }
            if (end < value.size() && value[end] == '}') {
                flush();
                out += fmt::format("\"${{{}-}}\"", value.substr(i + 2, end - i - 2));
                i = end + 1;
            } else {
                literal.push_back(c);
                ++i;
            }
        } else {
            literal.push_back(c);
            ++i;
        }
    }
    flush();
    return out.empty() ? std::string("''") : out;
}

bool is_directive_safe(std::string_view value) {
    if (value.empty()) {
        return false;
    }
    for (const char c : value) {
        const bool ok = std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' ||
                        c == '/' || c == '+' || c == ',' || c == ':' || c == '=' || c == '@' ||
                        c == '%' || c == '-';
        if (!ok) {
            return false;
        }
    }
    return true;
}

std::string command_line(const std::vector<std::string>& argv) {
    std::string out;
    for (const auto& arg : argv) {
        if (!out.empty()) {
            out.push_back(' ');
        }
        out += is_directive_safe(arg) ? arg : shell_quote(arg);
    }
    return out;
}

} // namespace dljob::util
