#include <dljob/app/run_dir.hpp>

#include <fmt/format.h>

#include <system_error>
#include <utility>

namespace dljob::app {

Result<PendingRunDir> PendingRunDir::create(std::filesystem::path path) {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) {
        return fail(ErrorCode::io,
                    fmt::format("cannot create run directory {}: {}", path.string(), ec.message()),
                    "set DLJOB_RUNS_DIR to a writable directory");
    }
    return PendingRunDir(std::move(path));
}

PendingRunDir::PendingRunDir(PendingRunDir&& other) noexcept
    : m_path(std::move(other.m_path)), m_keep(other.m_keep) {
    other.m_keep = true; // the moved-from guard owns nothing
}

PendingRunDir::~PendingRunDir() {
    if (!m_keep) {
        std::error_code ec; // best effort: the error being returned matters more
        std::filesystem::remove_all(m_path, ec);
    }
}

} // namespace dljob::app
