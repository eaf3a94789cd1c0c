#pragma once
// What a data set may take in memory. A set's size is what its files claim (an IDX header's
// count, a gzip stream's output, a 2 KB PNG that decodes to 100 MB, a LevelDB of such records),
// so it is checked against this before the memory is taken, instead of being found out by the
// kernel's OOM killer after gigabytes: a 948 KB LMDB once grew to 9.5 GB.

#include <dl/error.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <string>

namespace dl::data {

struct DataBudget {
    std::uint64_t bytes = std::numeric_limits<std::uint64_t>::max();
    std::string source; // where the figure came from, for messages ("--max-memory 4G")

    /// A config error naming `what` when holding `needed` bytes would pass the budget.
    void check(std::uint64_t needed, const std::string& what) const {
        if (needed > bytes) {
            fail_config(fmt::format("{} would take {} bytes in memory, more than the {} bytes "
                                    "of {}: a damaged or hostile file, or a data set for a "
                                    "larger node (--max-memory or DLTRAIN_MAX_MEMORY raise it)",
                                    what, needed, bytes, source));
        }
    }
};

} // namespace dl::data
