#pragma once
// What dljob knows about a mounted file system from its statfs type: one table for the job
// store's journal mode, the data checks and the staging tiers, so they never judge one mount
// two ways.

#include <cstdint>
#include <span>

namespace dljob::util {

struct FilesystemType {
    std::uint32_t magic; // statfs f_type
    const char* name;
    /// Shared between nodes (a network or cluster file system): SQLite's WAL must not be used
    /// there, and many small reads cost a round trip each.
    bool shared;
    bool ram_disk; // memory, not disk: what is staged there takes the node's RAM
};

/// Every type the table knows.
std::span<const FilesystemType> known_filesystem_types();

/// The row for a statfs f_type (compared as 32 bits, as the kernel defines them), nullptr when
/// the table does not know it.
const FilesystemType* find_filesystem_type(std::uint64_t f_type);

} // namespace dljob::util
