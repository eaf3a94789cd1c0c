#pragma once
// `dljob audit-data PATH`: how a dataset tree will behave on a cluster: file count against a
// file-count quota, small files, and whether it sits on a network file system, with the
// commands that fix it.

#include <dljob/domain/result.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace dljob::app {

struct AuditRequest {
    std::string path;
    std::uint64_t file_quota = 500'000; // objects; the Alliance's default project quota
};

struct AuditReport {
    std::string path;
    std::uint64_t files = 0;
    std::uint64_t directories = 0;
    std::uint64_t other = 0; // symlinks, devices...
    std::uint64_t bytes = 0;
    std::uint64_t allocated_bytes = 0; // each file rounded up to 4 KiB
    std::uint64_t small_files = 0;     // below 64 KiB
    std::string filesystem;            // "nfs", "lustre", "ext4", ...
    bool network = false;
    std::uint64_t file_quota = 0;
    std::vector<std::string> findings; // one line each
    std::vector<std::string> commands; // what fixes them
};

Result<AuditReport> audit_data(const AuditRequest& request);

/// The report as the terminal shows it.
std::string format_audit(const AuditReport& report);

} // namespace dljob::app
