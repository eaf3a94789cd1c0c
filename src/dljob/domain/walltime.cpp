#include <dljob/domain/walltime.hpp>

#include <fmt/format.h>

#include <charconv>
#include <vector>

namespace dljob {
namespace {

Unexpected bad_walltime(std::string_view text, std::string_view why) {
    return fail(
        ErrorCode::config_invalid, fmt::format("invalid walltime '{}': {}", text, why),
        "write MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS, e.g. 02:00:00 or 1-12:00:00");
}

// Each field is at most 999999999 (a bare number of minutes: about 1900 years), so any form's
// total stays far inside std::int64_t: 999999999 days is about 8.6e13 seconds.
constexpr std::size_t max_field_digits = 9;
constexpr std::string_view max_field_text = "999999999";

struct Field {
    enum class Kind { number, not_a_number, too_large };
    Kind kind = Kind::not_a_number;
    std::int64_t value = 0;
};

// A non-negative decimal integer. Digits past the limit make it too large, not malformed: a
// number with more digits than fit is still a number (leading zeros do not count).
Field parse_field(std::string_view field) {
    if (field.empty() || field.find_first_not_of("0123456789") != std::string_view::npos) {
        return Field{};
    }
    const std::size_t first = field.find_first_not_of('0');
    const std::string_view digits =
        first == std::string_view::npos ? std::string_view{} : field.substr(first);
    if (digits.size() > max_field_digits) {
        return Field{Field::Kind::too_large, 0};
    }
    std::int64_t value = 0; // all zeros leaves `digits` empty
    if (!digits.empty()) {
        std::from_chars(digits.data(), digits.data() + digits.size(), value);
    }
    return Field{Field::Kind::number, value};
}

Unexpected too_large(std::string_view text, std::string_view field) {
    const std::string shown =
        field.size() > 24 ? std::string(field.substr(0, 24)) + "..." : std::string(field);
    return bad_walltime(
        text, fmt::format("{} is too large: each field may be at most {}", shown, max_field_text));
}

std::vector<std::string_view> split_colons(std::string_view text) {
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    while (true) {
        const std::size_t colon = text.find(':', start);
        if (colon == std::string_view::npos) {
            parts.push_back(text.substr(start));
            return parts;
        }
        parts.push_back(text.substr(start, colon - start));
        start = colon + 1;
    }
}

} // namespace

Result<Walltime> Walltime::parse(std::string_view text) {
    if (text.empty()) {
        return bad_walltime(text, "it is empty");
    }
    std::int64_t days = 0;
    std::string_view rest = text;
    const bool has_days = text.find('-') != std::string_view::npos;
    if (has_days) {
        const std::size_t dash = text.find('-');
        const auto day_field = parse_field(text.substr(0, dash));
        if (day_field.kind == Field::Kind::too_large) {
            return too_large(text, text.substr(0, dash));
        }
        if (day_field.kind != Field::Kind::number) {
            return bad_walltime(text, "the days before '-' must be a whole number");
        }
        days = day_field.value;
        rest = text.substr(dash + 1);
    }
    const auto parts = split_colons(rest);
    std::vector<std::int64_t> values;
    for (const auto part : parts) {
        const auto value = parse_field(part);
        if (value.kind == Field::Kind::too_large) {
            return too_large(text, part);
        }
        if (value.kind != Field::Kind::number) {
            return bad_walltime(text, "every field must be a whole number");
        }
        values.push_back(value.value);
    }
    std::int64_t seconds = 0;
    if (has_days) {
        // D-HH, D-HH:MM, D-HH:MM:SS
        if (values.size() > 3) {
            return bad_walltime(text, "too many ':' fields after the days");
        }
        const std::int64_t hours = values[0];
        const std::int64_t minutes = values.size() > 1 ? values[1] : 0;
        const std::int64_t secs = values.size() > 2 ? values[2] : 0;
        if (hours >= 24 || minutes >= 60 || secs >= 60) {
            return bad_walltime(text, "hours must be below 24, minutes and seconds below 60");
        }
        seconds = ((days * 24 + hours) * 60 + minutes) * 60 + secs;
    } else if (values.size() == 1) {
        seconds = values[0] * 60; // a bare number is minutes, as in sbatch --time
    } else if (values.size() == 2) {
        if (values[1] >= 60) {
            return bad_walltime(text, "seconds must be below 60");
        }
        seconds = values[0] * 60 + values[1];
    } else if (values.size() == 3) {
        if (values[1] >= 60 || values[2] >= 60) {
            return bad_walltime(text, "minutes and seconds must be below 60");
        }
        seconds = (values[0] * 60 + values[1]) * 60 + values[2];
    } else {
        return bad_walltime(text, "too many ':' fields");
    }
    if (seconds <= 0) {
        return bad_walltime(text, "it must be longer than zero");
    }
    return Walltime{seconds};
}

std::string Walltime::hms() const {
    return fmt::format("{:02}:{:02}:{:02}", m_seconds / 3600, (m_seconds / 60) % 60,
                       m_seconds % 60);
}

std::string Walltime::days_hms() const {
    const std::int64_t days = m_seconds / 86400;
    const std::int64_t rest = m_seconds % 86400;
    if (days == 0) {
        return hms();
    }
    return fmt::format("{}-{:02}:{:02}:{:02}", days, rest / 3600, (rest / 60) % 60, rest % 60);
}

} // namespace dljob
