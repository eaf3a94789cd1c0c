#pragma once
// A job's run directory while submit or shell sets the job up: a submission that fails before
// the job is recorded for good (the scheduler refused it, the store could not take the row)
// takes its directory with it, so that a failure leaves neither a row nor files behind.

#include <dljob/domain/result.hpp>

#include <filesystem>

namespace dljob::app {

class PendingRunDir {
public:
    /// Creates `path` (and its parents); io error naming it, with a hint, when it cannot.
    static Result<PendingRunDir> create(std::filesystem::path path);
    /// Removes the directory and all in it, unless kept.
    ~PendingRunDir();
    PendingRunDir(PendingRunDir&& other) noexcept;
    PendingRunDir& operator=(PendingRunDir&&) = delete;
    PendingRunDir(const PendingRunDir&) = delete;
    PendingRunDir& operator=(const PendingRunDir&) = delete;

    /// The job is recorded (or may exist at the scheduler): the directory stays.
    void keep() { m_keep = true; }
    [[nodiscard]] const std::filesystem::path& path() const { return m_path; }

private:
    explicit PendingRunDir(std::filesystem::path path) : m_path(std::move(path)) {}
    std::filesystem::path m_path;
    bool m_keep = false;
};

} // namespace dljob::app
