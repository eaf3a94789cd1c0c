#include "data/leveldb_dataset.hpp"

#include "data/datum_dataset.hpp"

#include <dl/records.hpp>
#include <dl/stop.hpp>

namespace dl::data {
namespace {

IdxDataset read_leveldb(const std::filesystem::path& source, bool with_labels, bool first_only,
                        const DataBudget& budget) {
    DatumSet set("LevelDB " + source.string(), with_labels, first_only, budget);
    // LevelDB keeps no count: a header walks the keys, reading only the first record's value.
    const std::size_t count = for_each_leveldb_record(
        source,
        [&](std::size_t index, std::string_view key, std::string_view value) {
            stop_reading_on_signal(index, source);
            if (!first_only || index == 0) {
                set.add(index, key, value);
            }
            return true;
        },
        [] { return stop_requested(); });
    return set.finish(count);
}

} // namespace

bool is_leveldb_source(const std::filesystem::path& source) {
    return is_leveldb(source);
}

IdxDataset load_leveldb(const std::filesystem::path& source, bool with_labels,
                        const DataBudget& budget) {
    return read_leveldb(source, with_labels, false, budget);
}

IdxDataset read_leveldb_header(const std::filesystem::path& source) {
    return read_leveldb(source, false, true, {});
}

} // namespace dl::data
