#include "data/lmdb_dataset.hpp"

#include <dl/error.hpp>
#include <dl/records.hpp>
#include <dl/stop.hpp>

#include <fmt/format.h>

namespace dl::data {
namespace {

IdxDataset read_lmdb(const std::filesystem::path& source, bool with_labels, bool first_only,
                     const DataBudget& budget) {
    DatumSet set("LMDB " + source.string(), with_labels, first_only, budget);
    const std::size_t entries = lmdb_record_count(source);
    for_each_lmdb_record(source,
                         [&](std::size_t index, std::string_view key, std::string_view value) {
                             stop_reading_on_signal(index, source);
                             set.add(index, key, value);
                             return !first_only;
                         });
    return set.finish(entries);
}

} // namespace

bool is_lmdb_source(const std::filesystem::path& source) {
    return is_lmdb(source);
}

IdxDataset load_lmdb(const std::filesystem::path& source, bool with_labels,
                     const DataBudget& budget) {
    return read_lmdb(source, with_labels, false, budget);
}

IdxDataset read_lmdb_header(const std::filesystem::path& source) {
    return read_lmdb(source, false, true, {});
}

} // namespace dl::data
