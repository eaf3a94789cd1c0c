#include <dljob/domain/resources.hpp>
#include <dljob/util/text.hpp>

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>

namespace dljob {
namespace {

Unexpected bad_memory(std::string_view text, std::string_view why) {
    return fail(ErrorCode::config_invalid, fmt::format("invalid memory size '{}': {}", text, why),
                "write a number with a unit: 512M, 16G, 1.5G, 2T (binary units)");
}

std::string format_with_units(std::int64_t mib, const char* gib_unit, const char* mib_unit) {
    if (mib % 1024 == 0) {
        return fmt::format("{}{}", mib / 1024, gib_unit);
    }
    return fmt::format("{}{}", mib, mib_unit);
}

} // namespace

Result<MemorySize> MemorySize::parse(std::string_view text) {
    std::size_t digits = 0;
    while (digits < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[digits])) != 0 || text[digits] == '.')) {
        ++digits;
    }
    if (digits == 0) {
        return bad_memory(text, "it must start with a number");
    }
    double number = 0.0;
    const auto* end = text.data() + digits;
    const auto [ptr, ec] = util::from_chars_double(text.data(), end, number);
    // Digits beyond a double's range are a number out of range, not a malformed one.
    if (ec == std::errc::result_out_of_range && ptr == end) {
        return bad_memory(text, "it must be between 1M and about 1000 PB");
    }
    if (ec != std::errc{} || ptr != end || !std::isfinite(number)) {
        return bad_memory(text, "the number is malformed");
    }
    std::string unit;
    for (const char c : text.substr(digits)) {
        unit.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    }
    double factor = 0.0;
    if (unit == "M" || unit == "MB" || unit == "MIB") {
        factor = 1.0;
    } else if (unit == "G" || unit == "GB" || unit == "GIB") {
        factor = 1024.0;
    } else if (unit == "T" || unit == "TB" || unit == "TIB") {
        factor = 1024.0 * 1024.0;
    } else {
        return bad_memory(text, unit.empty() ? "the unit is missing" : "the unit is unknown");
    }
    const double mib = std::ceil(number * factor);
    if (mib < 1.0 || mib > 1e12) {
        return bad_memory(text, "it must be between 1M and about 1000 PB");
    }
    return MemorySize{static_cast<std::int64_t>(mib)};
}

std::string MemorySize::with_units(const char* gib_unit, const char* mib_unit) const {
    return format_with_units(m_mib, gib_unit, mib_unit);
}

} // namespace dljob
