// Caffe's LevelDB Data sources (data/leveldb_dataset.hpp) and float_data Datums
// (data/datum_dataset.hpp). LevelDBs are written here with LevelDB's C++ API as Caffe's
// convert_imageset -backend leveldb writes them, next to LMDBs of the same records: the images,
// labels and transformed batches read from both are the same. float_data Datums are written by
// Python's protobuf (tests/engine/float_datums.py), packed and unpacked, and read as Caffe's
// DataTransformer reads them ((value - mean) * scale). A build without LevelDB
// (DLJOB_LEVELDB=OFF) runs the test of its message instead.

#include "data/batch_reader.hpp"
#include "data/datum_dataset.hpp"
#include "data/idx_dataset.hpp"
#include "data/leveldb_dataset.hpp"
#include "data/sample_order.hpp"
#include "datum_support.hpp"
#include "engine_test_support.hpp"
#include "support/run_process.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <lmdb.h>

#if DLJOB_HAVE_LEVELDB
#include <leveldb/db.h>
#include <leveldb/write_batch.h>
#endif

#include <sys/wait.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
using dljob::test::run_shell;

using dl_test::datum;
using dl_test::pixels;
using dl_test::put_varint;

std::string key_of(std::size_t i) {
    return fmt::format("{:08}_img{}.png", i, i);
}

void write_lmdb(const fs::path& dir, const std::vector<std::string>& values) {
    dl_test::write_lmdb(dir, values, key_of);
}

#if DLJOB_HAVE_LEVELDB
// Caffe's LevelDB writer (db_leveldb.cpp): a new database, records in write batches, written in
// reverse key order here so that reading in key order is what puts them in order.
void write_leveldb(const fs::path& dir, const std::vector<std::string>& values) {
    leveldb::Options options;
    options.create_if_missing = true;
    options.error_if_exists = true;
    options.write_buffer_size = 1U << 20U;
    leveldb::DB* raw = nullptr;
    const leveldb::Status status = leveldb::DB::Open(options, dir.string(), &raw);
    ASSERT_TRUE(status.ok()) << status.ToString();
    const std::unique_ptr<leveldb::DB> db(raw);
    leveldb::WriteBatch batch;
    for (std::size_t i = values.size(); i-- > 0;) {
        batch.Put(key_of(i), values[i]);
    }
    ASSERT_TRUE(db->Write(leveldb::WriteOptions(), &batch).ok());
}
#endif

std::string load_error(const fs::path& source) {
    try {
        dl::data::load_idx(source, source);
    } catch (const dl::Error& e) {
        EXPECT_EQ(e.kind(), dl::ErrorKind::config);
        return e.what();
    }
    ADD_FAILURE() << "no error for " << source;
    return {};
}

std::string backend_error(const fs::path& source, const std::string& backend) {
    try {
        dl::data::check_backend(source, backend);
    } catch (const dl::Error& e) {
        return e.what();
    }
    return "no error";
}

/// Two batches of `set` as the train phase reads them with a mean, a scale, crops and flips.
std::vector<float> transformed(const dl::data::IdxDataset& set, std::vector<float> mean) {
    const int batch = 4;
    const dl::data::CropMirror crop{3, true, true, 1701};
    dl::data::BatchReader reader(set, batch, 0.125F, dl::data::SampleOrder(set.count, 7U), 0, 2, 0,
                                 1, std::move(mean), crop);
    const std::size_t image = static_cast<std::size_t>(set.channels) * 3 * 3;
    std::vector<float> out(2 * batch * image + 2 * batch);
    for (std::size_t b = 0; b < 2; ++b) {
        reader.next(out.data() + b * batch * image, out.data() + 2 * batch * image + b * batch);
    }
    return out;
}

class LeveldbReader : public ::testing::Test {
protected:
    dl_test::TempDir m_dir;
};

#if DLJOB_HAVE_LEVELDB

TEST_F(LeveldbReader, ReadsTheSameImagesLabelsAndBatchesAsAnLmdbOfTheSameRecords) {
    std::vector<std::string> values;
    for (int i = 0; i < 11; ++i) {
        values.push_back(datum(3, 4, 5, pixels(60, i), (i * 3) % 10));
    }
    const fs::path lmdb = m_dir.path() / "train_lmdb";
    const fs::path leveldb = m_dir.path() / "train_leveldb";
    write_lmdb(lmdb, values);
    write_leveldb(leveldb, values);
    ASSERT_TRUE(dl::data::is_leveldb_source(leveldb));
    EXPECT_FALSE(dl::data::is_leveldb_source(lmdb));

    const dl::data::IdxDataset from_lmdb = dl::data::load_idx(lmdb, lmdb);
    const dl::data::IdxDataset from_leveldb = dl::data::load_idx(leveldb, leveldb);
    ASSERT_EQ(from_leveldb.count, 11U);
    EXPECT_EQ(from_leveldb.channels, 3);
    EXPECT_EQ(from_leveldb.height, 4);
    EXPECT_EQ(from_leveldb.width, 5);
    EXPECT_EQ(from_leveldb.pixels, from_lmdb.pixels);
    EXPECT_EQ(from_leveldb.labels, from_lmdb.labels);
    EXPECT_EQ(from_leveldb.labels[4], 2);
    EXPECT_EQ(std::string(from_leveldb.pixels.begin() + 60, from_leveldb.pixels.begin() + 120),
              pixels(60, 1));
    EXPECT_EQ(transformed(from_leveldb, {10.0F, 20.0F, 30.0F}),
              transformed(from_lmdb, {10.0F, 20.0F, 30.0F}));

    const dl::data::IdxDataset header = dl::data::read_idx_header(leveldb);
    EXPECT_EQ(header.count, 11U);
    EXPECT_EQ(header.channels, 3);
    EXPECT_TRUE(header.pixels.empty());
}

TEST_F(LeveldbReader, ADamagedOrMissingDatabaseAndAWrongBackendAreClearErrors) {
    const fs::path corrupt = m_dir.path() / "corrupt_leveldb";
    fs::create_directories(corrupt);
    std::ofstream(corrupt / "CURRENT") << "MANIFEST-000099\n";
    std::string message = load_error(corrupt);
    EXPECT_NE(message.find("LevelDB " + corrupt.string() + ": open failed:"), std::string::npos)
        << message;

    const fs::path bad_record = m_dir.path() / "short_leveldb";
    write_leveldb(bad_record, {datum(1, 4, 4, pixels(16, 0), 1), datum(1, 4, 4, pixels(15, 1), 1)});
    message = load_error(bad_record);
    EXPECT_NE(message.find("LevelDB " + bad_record.string() +
                           ": record 1 (key '00000001_img1.png')"
                           ": 15 bytes of data for its shape 1x4x4"),
              std::string::npos)
        << message;
    try {
        dl::data::load_idx(bad_record, m_dir.path() / "labels");
        ADD_FAILURE() << "no error";
    } catch (const dl::Error& e) {
        EXPECT_NE(std::string(e.what()).find("LevelDB of Datums, whose labels are in its records"),
                  std::string::npos)
            << e.what();
    }

    const fs::path lmdb = m_dir.path() / "an_lmdb";
    write_lmdb(lmdb, {datum(1, 1, 1, "x", 0)});
    EXPECT_EQ(backend_error(m_dir.path() / "absent", "leveldb"),
              "the Data layer's backend is LEVELDB (Caffe's default where data_param names none) "
              "but " +
                  (m_dir.path() / "absent").string() + " is not there");
    EXPECT_NE(backend_error(lmdb, "leveldb")
                  .find("is an LMDB (it holds data.mdb): say backend: "
                        "LMDB"),
              std::string::npos);
    EXPECT_NE(backend_error(bad_record, "lmdb")
                  .find("is a LevelDB (it holds CURRENT): say "
                        "backend: LEVELDB"),
              std::string::npos);
    EXPECT_EQ(backend_error(bad_record, "leveldb"), "no error");
    EXPECT_EQ(backend_error(lmdb, "lmdb"), "no error");
    EXPECT_EQ(backend_error(m_dir.path() / "absent", ""), "no error");
}

/// Every file of `dir` by name, with its bytes.
std::map<std::string, std::string> files_of(const fs::path& dir) {
    std::map<std::string, std::string> files;
    for (const auto& entry : fs::directory_iterator(dir)) {
        files[entry.path().filename().string()] = dl_test::read_file(entry.path());
    }
    return files;
}

/// The names of the files that differ between two files_of, "" when none: a failure then names
/// them rather than printing megabytes.
std::string differences(const std::map<std::string, std::string>& before,
                        const std::map<std::string, std::string>& after) {
    std::string names;
    for (const auto& [name, bytes] : before) {
        const auto found = after.find(name);
        if (found == after.end()) {
            names += " " + name + " (gone)";
        } else if (found->second != bytes) {
            names += " " + name + " (changed)";
        }
    }
    for (const auto& [name, bytes] : after) {
        if (before.count(name) == 0) {
            names += " " + name + " (new)";
        }
    }
    return names;
}

/// Another process holding `lock_file` with an fcntl lock of `type` (F_WRLCK as a LevelDB
/// writer holds it, F_RDLCK as another reader) for `hold_ms`; returns once it holds it. Its pid,
/// to wait for.
pid_t hold_lock(const fs::path& lock_file, short type, int hold_ms) {
    int ready[2];
    EXPECT_EQ(::pipe(ready), 0);
    const pid_t child = ::fork();
    if (child == 0) {
        // Only async-signal-safe calls here: the test process has threads.
        const int fd = ::open(lock_file.c_str(), type == F_WRLCK ? O_RDWR : O_RDONLY);
        struct flock held = {};
        held.l_type = type;
        held.l_whence = SEEK_SET;
        const char ok = fd >= 0 && ::fcntl(fd, F_SETLK, &held) == 0 ? 'y' : 'n';
        (void)!::write(ready[1], &ok, 1);
        ::usleep(static_cast<useconds_t>(hold_ms) * 1000U);
        ::_exit(0);
    }
    ::close(ready[1]);
    char ok = 'n';
    EXPECT_EQ(::read(ready[0], &ok, 1), 1);
    ::close(ready[0]);
    EXPECT_EQ(ok, 'y') << "the child could not lock " << lock_file;
    return child;
}

TEST_F(LeveldbReader, ReadingLeavesEveryFileOfTheDatabaseAsItWas) {
    // A database closed by its writer keeps its last records in its log; LevelDB's open
    // recovered them into a new table, deleted the log, and rewrote LOG, MANIFEST and CURRENT.
    const fs::path db = m_dir.path() / "kept_leveldb";
    std::vector<std::string> values;
    for (int i = 0; i < 12; ++i) {
        values.push_back(datum(1, 4, 4, pixels(16, i), i % 5));
    }
    write_leveldb(db, values);
    const auto before = files_of(db);
    ASSERT_TRUE(std::any_of(before.begin(), before.end(),
                            [](const auto& file) { return file.first.ends_with(".log"); }));
    const dl::data::IdxDataset set = dl::data::load_idx(db, db);
    EXPECT_EQ(set.count, 12U);
    EXPECT_EQ(set.labels[7], 2);
    EXPECT_EQ(dl::data::read_idx_header(db).count, 12U);
    EXPECT_EQ(dl::data::load_idx(db, db).pixels, set.pixels) << "the same twice";
    EXPECT_EQ(differences(before, files_of(db)), "");
}

TEST_F(LeveldbReader, AFlippedByteInTheLogIsAnErrorAndTheDatabaseIsLeftAsItWas) {
    // Before, the open's recovery dropped the damaged record and what followed it, deleted the
    // log, and training went on with fewer records and exit 0.
    const fs::path db = m_dir.path() / "damaged_leveldb";
    {
        // One write per record, as convert_imageset's batches of 1000 are several log records:
        // a damaged one used to be dropped alone.
        leveldb::Options options;
        options.create_if_missing = true;
        leveldb::DB* raw = nullptr;
        ASSERT_TRUE(leveldb::DB::Open(options, db.string(), &raw).ok());
        const std::unique_ptr<leveldb::DB> writer(raw);
        for (int i = 0; i < 12; ++i) {
            ASSERT_TRUE(writer
                            ->Put(leveldb::WriteOptions(), key_of(static_cast<std::size_t>(i)),
                                  datum(1, 4, 4, pixels(16, i), i % 5))
                            .ok());
        }
    }
    fs::path log;
    for (const auto& entry : fs::directory_iterator(db)) {
        if (entry.path().extension() == ".log") {
            log = entry.path();
        }
    }
    ASSERT_FALSE(log.empty());
    std::string bytes = dl_test::read_file(log);
    ASSERT_GT(bytes.size(), 200U);
    bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x40);
    std::ofstream(log, std::ios::binary | std::ios::trunc) << bytes;
    const auto before = files_of(db);

    const std::string message = load_error(db);
    EXPECT_NE(message.find("LevelDB " + db.string() + ": open failed: Corruption:"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("the database is damaged; it was left as it is"), std::string::npos)
        << message;
    EXPECT_EQ(differences(before, files_of(db)), "");

    // And through dltrain: exit 3, the database untouched.
    std::ofstream(m_dir.path() / "net.prototxt") << R"(name: "damaged"
layer { name: "d" type: "Data" top: "data" top: "label"
        data_param { source: "damaged_leveldb" batch_size: 4 backend: LEVELDB } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";
    const auto result = run_shell(
        "cd " + m_dir.path().string() + " && " + std::string(DLTRAIN_BINARY) +
        " train --device cpu --config " + (m_dir.path() / "net.prototxt").string() + " --run-dir " +
        (m_dir.path() / "run").string() + " --threads 1 --deadline none --max-iter 2");
    EXPECT_EQ(result.exit_code, 3) << result.output;
    EXPECT_NE(result.output.find("Corruption"), std::string::npos) << result.output;
    EXPECT_EQ(differences(before, files_of(db)), "");
}

TEST_F(LeveldbReader, AWriterHoldingTheDatabaseIsWaitedForAndReadersShareIt) {
    // A LevelDB writer holds the LOCK file exclusively: the reader waits for it rather than
    // read a database that is changing. Other readers (a data-parallel run's ranks) hold it
    // shared and do not wait for each other.
    const fs::path db = m_dir.path() / "held_leveldb";
    write_leveldb(db, {datum(1, 2, 2, "abcd", 1), datum(1, 2, 2, "efgh", 2)});
    ASSERT_TRUE(fs::exists(db / "LOCK"));

    const pid_t writer = hold_lock(db / "LOCK", F_WRLCK, 400);
    const auto start = std::chrono::steady_clock::now();
    dl::data::IdxDataset set;
    std::string error;
    try {
        set = dl::data::load_idx(db, db);
    } catch (const dl::Error& e) {
        error = e.what();
    }
    const auto waited = std::chrono::steady_clock::now() - start;
    ::waitpid(writer, nullptr, 0);
    EXPECT_EQ(error, "");
    EXPECT_EQ(set.count, 2U);
    EXPECT_EQ(set.labels, (std::vector<std::int32_t>{1, 2}));
    EXPECT_GE(waited, std::chrono::milliseconds(200)) << "read while a writer held it";

    const pid_t reader = hold_lock(db / "LOCK", F_RDLCK, 5000);
    const auto shared_start = std::chrono::steady_clock::now();
    EXPECT_EQ(dl::data::load_idx(db, db).count, 2U);
    EXPECT_LT(std::chrono::steady_clock::now() - shared_start, std::chrono::seconds(4))
        << "waited for another reader";
    ::kill(reader, SIGTERM);
    ::waitpid(reader, nullptr, 0);
}

TEST_F(LeveldbReader, DltrainTrainsOnAPrototxtWithBackendLeveldb) {
    std::vector<std::string> values;
    for (int i = 0; i < 20; ++i) {
        values.push_back(datum(1, 6, 6, pixels(36, i), i % 3));
    }
    write_leveldb(m_dir.path() / "train_leveldb", values);
    write_lmdb(m_dir.path() / "train_lmdb", values);
    const auto net = [](const std::string& source, const std::string& backend) {
        return fmt::format(R"(name: "tiny"
layer {{ name: "d" type: "Data" top: "data" top: "label"
        transform_param {{ scale: 0.01 mean_value: 60 }}
        data_param {{ source: "{}" batch_size: 5 {}}} }}
layer {{ name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param {{ num_output: 3 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }}
)",
                           source, backend);
    };
    std::ofstream(m_dir.path() / "leveldb.prototxt") << net("train_leveldb", "backend: LEVELDB ");
    // No backend: Caffe's default, LEVELDB.
    std::ofstream(m_dir.path() / "default.prototxt") << net("train_leveldb", "");
    std::ofstream(m_dir.path() / "lmdb.prototxt") << net("train_lmdb", "backend: LMDB ");
    std::ofstream(m_dir.path() / "wrong.prototxt") << net("train_lmdb", "");
    const auto train = [&](const std::string& name) {
        return run_shell("cd " + m_dir.path().string() + " && " + std::string(DLTRAIN_BINARY) +
                         " train --device cpu --threads 1 " +
                         "--deadline none --solver max_iter=4 --solver base_lr=0.1 " +
                         "--solver display=1 --config " +
                         (m_dir.path() / (name + ".prototxt")).string() + " --run-dir " +
                         (m_dir.path() / name).string());
    };
    const auto first_loss = [&](const std::string& name) {
        std::ifstream in(m_dir.path() / name / "metrics.jsonl");
        for (std::string line; std::getline(in, line);) {
            if (line.find("\"type\":\"train\"") != std::string::npos) {
                return line.substr(line.find("\"loss\":"), 20);
            }
        }
        return std::string("none");
    };
    for (const char* name : {"leveldb", "default", "lmdb"}) {
        const auto result = train(name);
        ASSERT_EQ(result.exit_code, 0) << name << ": " << result.output;
    }
    EXPECT_NE(first_loss("lmdb"), "none");
    EXPECT_EQ(first_loss("leveldb"), first_loss("lmdb"));
    EXPECT_EQ(first_loss("default"), first_loss("lmdb"));
    const auto wrong = train("wrong");
    EXPECT_EQ(wrong.exit_code, 3) << wrong.output;
    EXPECT_NE(wrong.output.find("wrong.prototxt:2: layer 'd': the Data layer's backend is LEVELDB "
                                "(Caffe's default where data_param names none) but "),
              std::string::npos)
        << wrong.output;
    EXPECT_NE(wrong.output.find("say backend: LMDB"), std::string::npos) << wrong.output;
}

#else

TEST_F(LeveldbReader, ABuildWithoutLeveldbSaysSoForALeveldbSource) {
    const fs::path db = m_dir.path() / "train_leveldb";
    fs::create_directories(db);
    std::ofstream(db / "CURRENT") << "MANIFEST-000002\n";
    EXPECT_FALSE(dl::leveldb_available());
    const std::string message = load_error(db);
    EXPECT_NE(message.find(db.string() + " is a LevelDB, and this dltrain was built without "
                                         "LevelDB: install libleveldb-dev"),
              std::string::npos)
        << message;
}

#endif

// --- float_data ----------------------------------------------------------------------------

float value_at(std::size_t record, std::size_t p) {
    return static_cast<float>((record * 13 + p * 7) % 50) * 0.25F - 3.0F;
}

class FloatDatums : public LeveldbReader {
protected:
    /// Datums written by Python's protobuf, float_data packed or not; nullopt (and a skip) where
    /// python3-protobuf or protoc is missing.
    std::optional<std::vector<std::string>> python_datums(bool packed, int count, int values = -1) {
        if (run_shell("/usr/bin/python3 -c 'import google.protobuf' 2>&1").exit_code != 0 ||
            run_shell("protoc --version 2>&1").exit_code != 0) {
            return std::nullopt;
        }
        const fs::path dir = m_dir.path() / (packed ? "packed" : "unpacked");
        fs::create_directories(dir / "out");
        // Caffe's Datum, proto2 as caffe.proto: float_data is unpacked unless it says packed.
        std::ofstream(dir / "datum.proto") << fmt::format(
            R"(syntax = "proto2";
message Datum {{
  optional int32 channels = 1;
  optional int32 height = 2;
  optional int32 width = 3;
  optional bytes data = 4;
  optional int32 label = 5;
  repeated float float_data = 6{};
  optional bool encoded = 7 [default = false];
}}
)",
            packed ? " [packed = true]" : "");
        auto made =
            run_shell(fmt::format("cd {} && protoc --python_out=. datum.proto 2>&1", dir.string()));
        EXPECT_EQ(made.exit_code, 0) << made.output;
        made = run_shell(fmt::format("/usr/bin/python3 {}/tests/engine/float_datums.py {} {} {} 2 "
                                     "3 4 {} 2>&1",
                                     DLJOB_SOURCE_DIR, dir.string(), (dir / "out").string(), count,
                                     values < 0 ? std::string() : std::to_string(values)));
        EXPECT_EQ(made.exit_code, 0) << made.output;
        std::vector<std::string> datums;
        for (int i = 0; i < count; ++i) {
            datums.push_back(dl_test::read_file(dir / "out" / fmt::format("{}.datum", i)));
        }
        return datums;
    }
};

TEST_F(FloatDatums, PackedAndUnpackedAreReadAndTransformedAsCaffeDoes) {
    const auto unpacked = python_datums(false, 6);
    const auto packed = python_datums(true, 6);
    if (!unpacked || !packed) {
        GTEST_SKIP() << "needs Debian's python3-protobuf and protobuf-compiler (scripts/setup.sh)";
    }
    // The two encodings really differ: field 6 as fixed32s (tag 0x35) or one run (tag 0x32).
    ASSERT_NE((*unpacked)[0], (*packed)[0]);
    EXPECT_NE((*unpacked)[0].find('\x35'), std::string::npos);
    EXPECT_NE((*packed)[0].find('\x32'), std::string::npos);
    for (const auto& [name, datums] : {std::pair{"unpacked", *unpacked}, {"packed", *packed}}) {
        SCOPED_TRACE(name);
        const dl::Datum parsed = dl::parse_datum(
            reinterpret_cast<const std::uint8_t*>(datums[1].data()), datums[1].size(), name);
        ASSERT_EQ(parsed.float_data.size(), 24U);
        EXPECT_EQ(parsed.float_data[5], value_at(1, 5));
        const fs::path db = m_dir.path() / (std::string(name) + "_lmdb");
        write_lmdb(db, datums);
        const dl::data::IdxDataset set = dl::data::load_idx(db, db);
        ASSERT_EQ(set.count, 6U);
        EXPECT_EQ(set.channels, 2);
        EXPECT_EQ(set.height, 3);
        EXPECT_EQ(set.width, 4);
        EXPECT_TRUE(set.pixels.empty());
        ASSERT_EQ(set.float_pixels.size(), 6U * 24U);
        for (std::size_t i = 0; i < 6; ++i) {
            EXPECT_EQ(set.labels[i], i % 10);
            for (std::size_t p = 0; p < 24; ++p) {
                ASSERT_EQ(set.float_pixels[i * 24 + p], value_at(i, p)) << i << " " << p;
            }
        }
        // (value - mean[c]) * scale, in file order, no crop: Caffe's DataTransformer on floats.
        dl::data::BatchReader reader(set, 3, 0.5F, dl::data::SampleOrder(set.count, std::nullopt),
                                     0, 2, 0, 1, {1.0F, -2.0F});
        std::vector<float> data(3 * 24);
        std::vector<float> labels(3);
        reader.next(data.data(), labels.data());
        for (std::size_t i = 0; i < 3; ++i) {
            for (std::size_t p = 0; p < 24; ++p) {
                const float mean = p < 12 ? 1.0F : -2.0F;
                ASSERT_EQ(data[i * 24 + p], (value_at(i, p) - mean) * 0.5F) << i << " " << p;
            }
        }
        EXPECT_EQ(labels, (std::vector<float>{0.0F, 1.0F, 2.0F}));
#if DLJOB_HAVE_LEVELDB
        // The same floats and the same cropped, flipped batches from a LevelDB of the records.
        const fs::path leveldb = m_dir.path() / (std::string(name) + "_leveldb");
        write_leveldb(leveldb, datums);
        const dl::data::IdxDataset from_leveldb = dl::data::load_idx(leveldb, leveldb);
        EXPECT_EQ(from_leveldb.float_pixels, set.float_pixels);
        EXPECT_EQ(transformed(from_leveldb, {0.5F, 0.25F}), transformed(set, {0.5F, 0.25F}));
#endif
    }
}

TEST_F(FloatDatums, ACountThatContradictsTheShapeAndMixedKindsAreRefused) {
    const auto short_datums = python_datums(false, 2, 23);
    if (!short_datums) {
        GTEST_SKIP() << "needs Debian's python3-protobuf and protobuf-compiler (scripts/setup.sh)";
    }
    const fs::path db = m_dir.path() / "short_lmdb";
    write_lmdb(db, *short_datums);
    std::string message = load_error(db);
    EXPECT_NE(message.find("LMDB " + db.string() +
                           ": record 0 (key '00000000_img0.png'): 23 "
                           "float_data values for its shape 2x3x4 (24 expected)"),
              std::string::npos)
        << message;

    const auto floats = python_datums(true, 1);
    ASSERT_TRUE(floats);
    const fs::path mixed = m_dir.path() / "mixed_lmdb";
    write_lmdb(mixed, {(*floats)[0], datum(2, 3, 4, pixels(24, 0), 1)});
    message = load_error(mixed);
    EXPECT_NE(message.find("record 1 (key '00000001_img1.png'): byte data but the first record "
                           "holds float_data"),
              std::string::npos)
        << message;

    // A packed run that is not whole floats.
    std::string cut;
    put_varint(cut, (6U << 3U) | 2U);
    put_varint(cut, 6);
    cut += std::string(6, '\0');
    try {
        (void)dl::parse_datum(reinterpret_cast<const std::uint8_t*>(cut.data()), cut.size(), "cut");
        ADD_FAILURE() << "no error";
    } catch (const dl::Error& e) {
        EXPECT_NE(std::string(e.what()).find("packed float_data of 6 bytes (not whole floats)"),
                  std::string::npos)
            << e.what();
    }
}

} // namespace
