#include <dljob/domain/walltime.hpp>

#include <fmt/format.h>

#include <charconv>
#include <limits>
#include <optional>
#include <vector>

namespace dljob {
namespace {

Unexpected bad_walltime(std::string_view text, std::string_view why) {
    return fail(
        ErrorCode::config_invalid, fmt::format("invalid walltime '{}': {}", text, why),
        "write MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS, e.g. 02:00:00 or 1-12:00:00");
}

// A non-negative decimal integer with at most 9 digits; nullopt otherwise.
std::optional<std::int64_t> parse_field(std::string_view field) {
    if (field.empty() || field.size() > 9) {
        return std::nullopt;
    }
    std::int64_t value = 0;
    const auto* end = field.data() + field.size();
    const auto [ptr, ec] = std::from_chars(field.data(), end, value);
    if (ec != std::errc{} || ptr != end || value < 0) {
        return std::nullopt;
    }
    return value;
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
        if (!day_field) {
            return bad_walltime(text, "the days before '-' must be a whole number");
        }
        days = *day_field;
        rest = text.substr(dash + 1);
    }
    const auto parts = split_colons(rest);
    std::vector<std::int64_t> values;
    for (const auto part : parts) {
        const auto value = parse_field(part);
        if (!value) {
            return bad_walltime(text, "every field must be a whole number");
        }
        values.push_back(*value);
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

std::string Walltime::slurm() const {
    const std::int64_t days = m_seconds / 86400;
    const std::int64_t rest = m_seconds % 86400;
    if (days == 0) {
        return hms();
    }
    return fmt::format("{}-{:02}:{:02}:{:02}", days, rest / 3600, (rest / 60) % 60, rest % 60);
}

std::string Walltime::sqsub() const {
    return fmt::format("{}m", minutes_ceil());
}

} // namespace dljob
