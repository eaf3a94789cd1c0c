#pragma once
// Caffe's Datum records, the values of its LMDB and LevelDB databases (convert_imageset,
// convert_mnist_data, convert_cifar_data), turned into an IdxDataset (all in memory, as the IDX and
// CIFAR readers do). The databases' own files are read, and each Datum decoded, by dl_records
// (dl/records.hpp, shared with `dljob pack`); what a record means as training data is decided
// here once, so both kinds of database give the same images.

#include "data/data_budget.hpp"
#include "data/idx_dataset.hpp"

#include <dl/records.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace dl::data {

/// A database's records, added in key order, as one IdxDataset. Each Datum must have the first
/// one's shape and kind (bytes or float_data), C x H x W values (bytes after decoding, when
/// encoded) and a label 0 to 2^31 - 1 when labels are read; otherwise dl::Error(config) names the
/// database (`database`, e.g. "LMDB path"), the record's number and key, and what is wrong.
class DatumSet {
public:
    /// `header_only`: the first record's shape is kept, no values (read_idx_header). The
    /// records' values are held to `budget` as they are added.
    DatumSet(std::string database, bool with_labels, bool header_only, DataBudget budget);

    void add(std::size_t index, std::string_view key, std::string_view value);

    /// The set of the records added; `count` is the number of records (the database's own
    /// count when header_only, where the rest were not read). Refuses an empty database.
    IdxDataset finish(std::size_t count);

private:
    std::string m_database;
    bool m_with_labels;
    bool m_header_only;
    DataBudget m_budget;
    bool m_floats = false;
    std::size_t m_seen = 0;
    IdxDataset m_set;
};

/// Every 1024 records of `source`, a stop signal ends the read (dl::Error(stopped)): a SIGTERM
/// while a large database loads, before the first step.
void stop_reading_on_signal(std::size_t index, const std::filesystem::path& source);

/// A record's key as text for messages: at most 64 bytes, unprintable bytes as '?'.
std::string key_text(std::string_view key);

} // namespace dl::data
