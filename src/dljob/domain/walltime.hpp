#pragma once
// Walltime: a duration in whole seconds, parsed from what users write in recipes and profiles and
// re-printed in each scheduler's own syntax (never passed through as text).

#include <dljob/domain/result.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace dljob {

class Walltime {
public:
    Walltime() = default;
    static Walltime from_seconds(std::int64_t seconds) noexcept { return Walltime{seconds}; }

    /// Parses Slurm's spellings, which cover what users write for every site:
    ///   "MM" (a bare integer is minutes), "MM:SS", "HH:MM:SS" (hours may exceed 24),
    ///   "D-HH", "D-HH:MM", "D-HH:MM:SS". Rejects empty, negative, zero and malformed values, and
    ///   fields out of range (minutes or seconds >= 60 after the first field).
    static Result<Walltime> parse(std::string_view text);

    [[nodiscard]] std::int64_t seconds() const noexcept { return m_seconds; }
    /// Whole minutes, rounded up (sqsub's `-r` takes minutes).
    [[nodiscard]] std::int64_t minutes_ceil() const noexcept { return (m_seconds + 59) / 60; }

    /// "HH:MM:SS" with hours >= 24 allowed (PBS/Torque/Moab `walltime=`; the Slurm Torque
    /// wrappers reject the D:HH:MM:SS form, so days are never printed here).
    [[nodiscard]] std::string hms() const;
    /// "HH:MM:SS" under a day, "D-HH:MM:SS" from a day on (Slurm's `--time=` and how dljob
    /// shows a walltime). Other schedulers' spellings are their families'
    /// (schedulers/<family>.cpp).
    [[nodiscard]] std::string days_hms() const;

    friend bool operator==(Walltime a, Walltime b) noexcept { return a.m_seconds == b.m_seconds; }
    friend auto operator<=>(Walltime a, Walltime b) noexcept { return a.m_seconds <=> b.m_seconds; }

private:
    explicit Walltime(std::int64_t seconds) noexcept : m_seconds(seconds) {}
    std::int64_t m_seconds = 0;
};

} // namespace dljob
