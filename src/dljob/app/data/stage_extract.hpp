#pragma once
// Safe extraction of a tar archive into a new directory. libarchive parses; dljob writes the
// files itself (directories first, file contents from a small thread pool), because
// libarchive's disk writer is slow per file and unsafe with its default flags.
//
// Refused, with nothing left behind: absolute paths and `..`, symlinks that point outside the
// tree, hard links, devices, FIFOs and sockets, setuid/setgid bits, two entries with one
// path, more bytes or entries than the budget allows, truncated or damaged archives.

#include <dljob/domain/result.hpp>
#include <dljob/domain/stage.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace dljob::app {

struct ExtractLimits {
    std::uint64_t max_bytes = 0;            // sum of member sizes; 0: no limit
    std::uint64_t max_entries = 10'000'000; // members of any kind
    unsigned threads = 2;                   // file writers
};

struct ExtractSummary {
    std::uint64_t files = 0;
    std::uint64_t directories = 0;
    std::uint64_t symlinks = 0;
    std::uint64_t bytes = 0;
};

/// Extracts `reader`'s archive into `destination`, which must not exist: the tree is built in
/// `destination.partial.<pid>` beside it and renamed when complete; on any error that
/// directory is removed and the error names the entry. `shown_name` names the archive in
/// messages.
Result<ExtractSummary> extract_archive(ArchiveReader& reader, const std::string& destination,
                                       const ExtractLimits& limits, const std::string& shown_name);

/// Extracts several archives into one tree at once, each read (and decompressed) by its own
/// thread, with the checks above holding across them: two entries with one path are refused
/// whichever archives hold them, and the budgets count all of them together.
Result<ExtractSummary> extract_archives(const std::vector<ArchiveReader*>& readers,
                                        const std::string& destination, const ExtractLimits& limits,
                                        const std::string& shown_name);

/// Opens `archive_path` with libarchive and extracts it (the verb-level convenience).
Result<ExtractSummary> extract_archive_file(const std::string& archive_path,
                                            const std::string& destination,
                                            const ExtractLimits& limits);

} // namespace dljob::app
