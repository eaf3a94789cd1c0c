#include <dljob/config/fields.hpp>
#include <dljob/util/text.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <regex>

namespace dljob::config {
namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) {
        row[j] = j;
    }
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            row[j] =
                std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

// Printable form of a user value inside a message: control characters escaped, long values cut
// (in the message only; the value itself is refused, never cut).
std::string shown(std::string_view value) {
    std::string out;
    for (const char c : value.substr(0, 80)) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte < 0x20 || byte == 0x7f) {
            out += fmt::format("\\x{:02x}", byte);
        } else {
            out.push_back(c);
        }
    }
    if (value.size() > 80) {
        out += "...";
    }
    return out;
}

Result<void> check_scalar(const YamlNode& node, std::string_view key_path,
                          std::string_view expected) {
    if (!node.is_scalar()) {
        return invalid(node.mark, key_path,
                       fmt::format("expected {}, got {}", expected, to_string(node.kind)));
    }
    return {};
}

} // namespace

Unexpected invalid(const SourceMark& mark, std::string_view key_path, std::string_view message,
                   std::string hint) {
    return fail(ErrorCode::config_invalid, fmt::format("{}: {}: {}", mark.str(), key_path, message),
                std::move(hint));
}

std::string join_key(std::string_view parent, std::string_view key) {
    return parent.empty() ? std::string(key) : fmt::format("{}.{}", parent, key);
}

Result<void> check_mapping(const YamlNode& node, std::string_view key_path,
                           const std::vector<std::string>& allowed) {
    if (!node.is_mapping()) {
        return invalid(node.mark, key_path.empty() ? "(document)" : key_path,
                       fmt::format("expected a mapping of keys ({}), got {}",
                                   fmt::join(allowed, ", "), to_string(node.kind)));
    }
    for (const auto& entry : node.entries) {
        if (std::find(allowed.begin(), allowed.end(), entry.key) != allowed.end()) {
            continue;
        }
        std::string closest;
        std::size_t best = 3;
        for (const auto& candidate : allowed) {
            const std::size_t distance = edit_distance(entry.key, candidate);
            if (distance < best) {
                best = distance;
                closest = candidate;
            }
        }
        return invalid(entry.key_mark, join_key(key_path, shown(entry.key)),
                       fmt::format("unknown key; valid keys here: {}", fmt::join(allowed, ", ")),
                       closest.empty() ? std::string{}
                                       : fmt::format("did you mean '{}'?", closest));
    }
    return {};
}

Result<void> check_mapping(const YamlNode& node, std::string_view key_path,
                           std::initializer_list<std::string_view> allowed) {
    std::vector<std::string> keys;
    for (const auto key : allowed) {
        keys.emplace_back(key);
    }
    return check_mapping(node, key_path, keys);
}

Result<std::string> read_string(const YamlNode& node, std::string_view key_path) {
    DLJOB_TRY(check_scalar(node, key_path, "a string"));
    return node.scalar;
}

Result<std::string> read_word(const YamlNode& node, std::string_view key_path,
                              std::string_view pattern, std::string_view describe) {
    DLJOB_TRY(check_scalar(node, key_path, describe));
    const std::regex re{std::string(pattern)};
    if (!std::regex_match(node.scalar, re)) {
        return invalid(node.mark, key_path,
                       fmt::format("expected {}, got '{}'", describe, shown(node.scalar)));
    }
    return node.scalar;
}

namespace {

// A whole number of type `Whole` from min to max: one that does not fit the type is "too large"
// (or small), as from_chars says, not "not a number".
template <typename Whole>
Result<Whole> read_whole_number(const YamlNode& node, std::string_view key_path, Whole min,
                                Whole max) {
    const std::string expected = fmt::format("a whole number from {} to {}", min, max);
    DLJOB_TRY(check_scalar(node, key_path, expected));
    Whole value = 0;
    const std::string& text = node.scalar;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    const bool whole = !node.quoted && !text.empty() && ptr == text.data() + text.size();
    // A whole number with more digits than an int holds is too large (or too small), not "not a
    // number": from_chars reads all its digits and says it is out of range.
    if (whole && ec == std::errc::result_out_of_range) {
        return invalid(node.mark, key_path,
                       fmt::format("expected {}, got {}, which is too {}", expected, shown(text),
                                   text.front() == '-' ? "small" : "large"));
    }
    if (!whole || ec != std::errc{}) {
        return invalid(node.mark, key_path,
                       fmt::format("expected {}, got '{}'", expected, shown(text)));
    }
    if (value < min || value > max) {
        return invalid(node.mark, key_path, fmt::format("expected {}, got {}", expected, value));
    }
    return value;
}

} // namespace

Result<int> read_int(const YamlNode& node, std::string_view key_path, int min, int max) {
    return read_whole_number<int>(node, key_path, min, max);
}

Result<long long> read_whole(const YamlNode& node, std::string_view key_path, long long min,
                             long long max) {
    return read_whole_number<long long>(node, key_path, min, max);
}

Result<double> read_number(const YamlNode& node, std::string_view key_path, double min,
                           double max) {
    return read_number(node, key_path, NumberBounds{min, false, max, false});
}

Result<double> read_number(const YamlNode& node, std::string_view key_path,
                           const NumberBounds& bounds) {
    std::string expected = "a number";
    if (bounds.min && bounds.max && !bounds.min_open && !bounds.max_open) {
        expected = fmt::format("a number from {} to {}", *bounds.min, *bounds.max);
    } else {
        if (bounds.min) {
            expected += fmt::format(" {} {}", bounds.min_open ? ">" : ">=", *bounds.min);
        }
        if (bounds.max) {
            expected += fmt::format("{} {} {}", bounds.min ? " and" : "",
                                    bounds.max_open ? "<" : "<=", *bounds.max);
        }
    }
    DLJOB_TRY(check_scalar(node, key_path, expected));
    double value = 0;
    const std::string& text = node.scalar;
    const auto [ptr, ec] = util::from_chars_double(text.data(), text.data() + text.size(), value);
    const bool number = !node.quoted && !text.empty() && ptr == text.data() + text.size();
    // Out of a double's range: an exponent below about -308 is too close to zero, any other
    // is too large in magnitude.
    if (number && ec == std::errc::result_out_of_range) {
        const auto e = text.find_first_of("eE");
        const bool tiny = e != std::string::npos && e + 1 < text.size() && text[e + 1] == '-';
        return invalid(node.mark, key_path,
                       fmt::format("expected {}, got {}, which is too {}", expected, shown(text),
                                   tiny                  ? "close to zero"
                                   : text.front() == '-' ? "small"
                                                         : "large"));
    }
    const bool above =
        !bounds.min || (bounds.min_open ? value > *bounds.min : value >= *bounds.min);
    const bool below =
        !bounds.max || (bounds.max_open ? value < *bounds.max : value <= *bounds.max);
    if (!number || ec != std::errc{} || !std::isfinite(value) || !above || !below) {
        return invalid(node.mark, key_path,
                       fmt::format("expected {}, got '{}'", expected, shown(text)));
    }
    return value;
}

Result<bool> read_bool(const YamlNode& node, std::string_view key_path) {
    DLJOB_TRY(check_scalar(node, key_path, "true or false"));
    if (!node.quoted && (node.scalar == "true" || node.scalar == "yes")) {
        return true;
    }
    if (!node.quoted && (node.scalar == "false" || node.scalar == "no")) {
        return false;
    }
    return invalid(node.mark, key_path,
                   fmt::format("expected true or false, got '{}'", shown(node.scalar)));
}

Result<std::string> read_choice(const YamlNode& node, std::string_view key_path,
                                const std::vector<std::string>& choices) {
    const std::string expected = fmt::format("one of {}", fmt::join(choices, ", "));
    DLJOB_TRY(check_scalar(node, key_path, expected));
    if (std::find(choices.begin(), choices.end(), node.scalar) == choices.end()) {
        return invalid(node.mark, key_path,
                       fmt::format("expected {}, got '{}'", expected, shown(node.scalar)));
    }
    return node.scalar;
}

Result<Walltime> read_walltime(const YamlNode& node, std::string_view key_path) {
    DLJOB_TRY(check_scalar(node, key_path, "a walltime like 02:00:00"));
    auto walltime = Walltime::parse(node.scalar);
    if (!walltime) {
        return invalid(node.mark, key_path, walltime.error().message, walltime.error().hint);
    }
    return *walltime;
}

Result<MemorySize> read_memory(const YamlNode& node, std::string_view key_path) {
    DLJOB_TRY(check_scalar(node, key_path, "a memory size like 16G"));
    auto memory = MemorySize::parse(node.scalar);
    if (!memory) {
        return invalid(node.mark, key_path, memory.error().message, memory.error().hint);
    }
    return *memory;
}

Result<std::vector<std::string>> read_string_list(const YamlNode& node, std::string_view key_path) {
    if (node.is_null()) {
        return std::vector<std::string>{};
    }
    if (!node.is_sequence()) {
        return invalid(node.mark, key_path,
                       fmt::format("expected a list like [a, b], got {}", to_string(node.kind)));
    }
    std::vector<std::string> out;
    for (std::size_t i = 0; i < node.items.size(); ++i) {
        auto item = read_string(node.items[i], fmt::format("{}[{}]", key_path, i));
        if (!item) {
            return fail(item.error());
        }
        out.push_back(std::move(*item));
    }
    return out;
}

Result<std::vector<std::string>> read_word_list(const YamlNode& node, std::string_view key_path,
                                                std::string_view pattern,
                                                std::string_view describe) {
    if (node.is_null()) {
        return std::vector<std::string>{};
    }
    if (!node.is_sequence()) {
        return invalid(node.mark, key_path,
                       fmt::format("expected a list like [a, b], got {}", to_string(node.kind)));
    }
    std::vector<std::string> out;
    for (std::size_t i = 0; i < node.items.size(); ++i) {
        auto item = read_word(node.items[i], fmt::format("{}[{}]", key_path, i), pattern, describe);
        if (!item) {
            return fail(item.error());
        }
        out.push_back(std::move(*item));
    }
    return out;
}

} // namespace dljob::config
