// `dljob pack` of Caffe's LMDB and LevelDB databases of Datums (written here with LMDB's C API
// and LevelDB's C++ API, Datums in protobuf's wire format as caffe_pb2 serialises them): each
// record becomes an image member with its label, in key order, whose pixels are the Datum's; a
// LevelDB packs as an LMDB of the same records does; bad records name the database, the record
// and its key and leave nothing behind. tests/integration/data_pack_train.sh trains
// dltrain on such a pack and on the LMDB itself and gets the same run.

#include "engine/datum_support.hpp"
#include "unit/data/data_test_support.hpp"

#include <dljob/app/data/pack.hpp>
#include <dljob/domain/dataset.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <lmdb.h>

#if DLJOB_HAVE_LEVELDB
#include <leveldb/db.h>
#include <leveldb/write_batch.h>
#endif

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace dljob::app {
namespace {

using test::ScratchDir;

using dl_test::datum;
using dl_test::put_varint;

/// Caffe's writer: keys "%08d_<name>" in one transaction.
void write_lmdb(const std::filesystem::path& dir, const std::vector<std::string>& values) {
    dl_test::write_lmdb(dir, values,
                        [](std::size_t i) { return fmt::format("{:08}_img{}.jpg", i, i); });
}

#if DLJOB_HAVE_LEVELDB
/// Caffe's LevelDB writer (db_leveldb.cpp): a new database and write batches; put in reverse key
/// order, so that the order read back is LevelDB's own.
void write_leveldb(const std::filesystem::path& dir, const std::vector<std::string>& values) {
    leveldb::Options options;
    options.create_if_missing = true;
    options.error_if_exists = true;
    leveldb::DB* raw = nullptr;
    const leveldb::Status status = leveldb::DB::Open(options, dir.string(), &raw);
    ASSERT_TRUE(status.ok()) << status.ToString();
    const std::unique_ptr<leveldb::DB> db(raw);
    leveldb::WriteBatch batch;
    for (std::size_t i = values.size(); i-- > 0;) {
        batch.Put(fmt::format("{:08}_img{}.jpg", i, i), values[i]);
    }
    ASSERT_TRUE(db->Write(leveldb::WriteOptions(), &batch).ok());
}
#endif

std::string planar(int i, int channels, int height, int width) {
    std::string out;
    for (int p = 0; p < channels * height * width; ++p) {
        out.push_back(static_cast<char>((i * 41 + p * 7 + p / 5) % 256));
    }
    return out;
}

Result<PackSummary> pack(const std::string& source, const std::string& output) {
    PackRequest request;
    request.source = source;
    request.output = output;
    return pack_dataset(request, {});
}

struct Member {
    std::string path;
    std::string label;
    std::string bytes;
};

std::vector<Member> members_of(const std::filesystem::path& pack) {
    const std::string archive = test::read_file(pack / "data.tar");
    std::ifstream index(pack / "index.tsv");
    std::string line;
    std::getline(index, line);
    std::vector<Member> out;
    for (std::uint64_t number = 2; std::getline(index, line); ++number) {
        auto entry = parse_index_line(line, "index.tsv", number);
        EXPECT_TRUE(entry) << entry.error().message;
        if (entry && entry->type == IndexEntryType::file) {
            out.push_back({entry->path, entry->label ? std::to_string(*entry->label) : "-",
                           archive.substr(entry->offset, entry->size)});
        }
    }
    return out;
}

/// A binary PGM/PPM member back to Caffe's planar C x H x W bytes (a PPM's R, G, B are the
/// Datum's planes 2, 1, 0: Caffe's colour order is BGR).
std::string planar_of(const std::string& image, int& channels, int& height, int& width) {
    std::istringstream in(image);
    std::string magic;
    int maxval = 0;
    in >> magic >> width >> height >> maxval;
    in.get();
    channels = magic == "P6" ? 3 : 1;
    const std::string interleaved = image.substr(static_cast<std::size_t>(in.tellg()));
    const auto plane = static_cast<std::size_t>(width * height);
    std::string out(interleaved.size(), '\0');
    for (std::size_t p = 0; p < plane; ++p) {
        for (std::size_t c = 0; c < static_cast<std::size_t>(channels); ++c) {
            const std::size_t planar_c = static_cast<std::size_t>(channels) - 1 - c;
            out[planar_c * plane + p] = interleaved[p * static_cast<std::size_t>(channels) + c];
        }
    }
    return out;
}

TEST(PackLmdb, RawDatumsBecomeLabelledImagesInKeyOrderWithTheirPixels) {
    ScratchDir dir;
    std::vector<std::string> values;
    for (int i = 0; i < 5; ++i) {
        values.push_back(datum(3, 5, 7, planar(i, 3, 5, 7), (i * 3) % 10));
    }
    write_lmdb(dir.path() / "train_lmdb", values);
    write_lmdb(dir.path() / "grey_lmdb", {datum(1, 4, 6, planar(9, 1, 4, 6), 7)});

    auto summary = pack(dir / "train_lmdb", dir / "train.dlpack");
    ASSERT_TRUE(summary) << summary.error().message;
    EXPECT_EQ(summary->manifest.files, 5U);
    EXPECT_TRUE(summary->manifest.labelled);
    const auto members = members_of(dir.path() / "train.dlpack");
    ASSERT_EQ(members.size(), 5U);
    for (int i = 0; i < 5; ++i) {
        const Member& m = members[static_cast<std::size_t>(i)];
        EXPECT_EQ(m.path, fmt::format("{:08}.ppm", i));
        EXPECT_EQ(m.label, std::to_string((i * 3) % 10));
        int channels = 0;
        int height = 0;
        int width = 0;
        EXPECT_EQ(planar_of(m.bytes, channels, height, width), planar(i, 3, 5, 7)) << m.path;
        EXPECT_EQ(channels, 3);
        EXPECT_EQ(height, 5);
        EXPECT_EQ(width, 7);
    }

    ASSERT_TRUE(pack(dir / "grey_lmdb", dir / "grey.dlpack"));
    const auto grey = members_of(dir.path() / "grey.dlpack");
    ASSERT_EQ(grey.size(), 1U);
    EXPECT_EQ(grey[0].path, "00000000.pgm");
    EXPECT_EQ(grey[0].bytes, "P5 6 4 255\n" + planar(9, 1, 4, 6));
}

TEST(PackLmdb, EncodedDatumsAreTheirImageFilesNamedByTheirFormat) {
    ScratchDir dir;
    const std::string png = std::string("\x89PNG\r\n\x1a\n", 8) + "rest of a png";
    const std::string jpeg = std::string("\xFF\xD8\xFF\xE0", 4) + "rest of a jpeg";
    // ImageNet's labels go past 255 (CaffeNet's 1,000 classes).
    write_lmdb(dir.path() / "db", {datum(0, 0, 0, png, 569, true), datum(0, 0, 0, jpeg, 2, true)});
    ASSERT_TRUE(pack(dir / "db", dir / "out"));
    const auto members = members_of(dir.path() / "out");
    ASSERT_EQ(members.size(), 2U);
    EXPECT_EQ(members[0].path, "00000000.png");
    EXPECT_EQ(members[0].bytes, png);
    EXPECT_EQ(members[0].label, "569");
    EXPECT_EQ(members[1].path, "00000001.jpg");
    EXPECT_EQ(members[1].bytes, jpeg);
}

TEST(PackLmdb, ABadRecordNamesTheDatabaseRecordAndKeyAndLeavesNothing) {
    ScratchDir dir;
    struct Bad {
        std::string value;
        std::string says;
    };
    std::string floats;
    put_varint(floats, (6U << 3U) | 2U);
    put_varint(floats, 4);
    floats += std::string(4, '\0');
    for (const Bad& bad :
         {Bad{datum(3, 5, 7, planar(0, 3, 5, 4), 1), "a 3x5x7 Datum holds 60 data bytes, not 105"},
          Bad{datum(2, 5, 7, planar(0, 2, 5, 7), 1), "a Datum of 2 channels"},
          Bad{datum(1, 2, 2, "abcd", 1).substr(0, 9), "its value: not a Datum (truncated"},
          Bad{floats, "a float_data Datum"},
          Bad{datum(0, 0, 0, "not an image", 1, true), "an encoded Datum that is not PNG"}}) {
        const std::filesystem::path db = dir.path() / "db";
        std::filesystem::remove_all(db);
        write_lmdb(db, {datum(1, 2, 2, "abcd", 0), bad.value});
        auto summary = pack(db.string(), dir / "out");
        ASSERT_FALSE(summary) << bad.says;
        const std::string message = summary.error().message;
        EXPECT_NE(message.find("LMDB " + db.string() +
                               ": record 1 (key '00000001_img1.jpg'): " + bad.says),
                  std::string::npos)
            << message;
        EXPECT_FALSE(std::filesystem::exists(dir.path() / "out"));
        for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
            EXPECT_EQ(entry.path().filename().string().find(".partial."), std::string::npos)
                << entry.path();
        }
    }
    // A data.mdb that is not LMDB's: LMDB's own reason, naming the database.
    test::write_file(dir.path() / "junk" / "data.mdb", std::string(8192, 'x'));
    auto junk = pack(dir / "junk", dir / "out");
    ASSERT_FALSE(junk);
    EXPECT_NE(junk.error().message.find("LMDB " + (dir / "junk") + ": mdb_env_open failed"),
              std::string::npos)
        << junk.error().message;
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "out"));
}

#if DLJOB_HAVE_LEVELDB

TEST(PackLeveldb, ALeveldbPacksAsAnLmdbOfTheSameRecords) {
    ScratchDir dir;
    std::vector<std::string> values;
    for (int i = 0; i < 12; ++i) {
        values.push_back(i % 2 == 0 ? datum(3, 5, 7, planar(i, 3, 5, 7), i % 10)
                                    : datum(3, 5, 7, planar(i, 3, 5, 7), (i * 7) % 10));
    }
    write_lmdb(dir.path() / "train_lmdb", values);
    write_leveldb(dir.path() / "train_leveldb", values);
    auto from_lmdb = pack(dir / "train_lmdb", dir / "lmdb.dlpack");
    ASSERT_TRUE(from_lmdb) << from_lmdb.error().message;
    auto from_leveldb = pack(dir / "train_leveldb", dir / "leveldb.dlpack");
    ASSERT_TRUE(from_leveldb) << from_leveldb.error().message;
    EXPECT_EQ(from_leveldb->manifest.files, 12U);
    EXPECT_TRUE(from_leveldb->manifest.labelled);
    EXPECT_EQ(test::read_file(dir.path() / "leveldb.dlpack" / "data.tar"),
              test::read_file(dir.path() / "lmdb.dlpack" / "data.tar"));
    EXPECT_EQ(test::read_file(dir.path() / "leveldb.dlpack" / "index.tsv"),
              test::read_file(dir.path() / "lmdb.dlpack" / "index.tsv"));
    const auto members = members_of(dir.path() / "leveldb.dlpack");
    ASSERT_EQ(members.size(), 12U);
    EXPECT_EQ(members[3].path, "00000003.ppm");
    EXPECT_EQ(members[3].label, "1");
}

TEST(PackLeveldb, ABadRecordOrADamagedDatabaseNamesItAndLeavesNothing) {
    ScratchDir dir;
    write_leveldb(dir.path() / "db",
                  {datum(1, 2, 2, "abcd", 0), datum(3, 5, 7, planar(0, 3, 5, 4), 1)});
    auto bad = pack(dir / "db", dir / "out");
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("LevelDB " + (dir / "db") +
                                       ": record 1 (key '00000001_img1.jpg'): a 3x5x7 Datum "
                                       "holds 60 data bytes, not 105"),
              std::string::npos)
        << bad.error().message;
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "out"));

    test::write_file(dir.path() / "junk" / "CURRENT", "MANIFEST-000042\n");
    auto junk = pack(dir / "junk", dir / "out");
    ASSERT_FALSE(junk);
    EXPECT_NE(junk.error().message.find("LevelDB " + (dir / "junk") + ": open failed:"),
              std::string::npos)
        << junk.error().message;
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "out"));
}

/// Every file of `dir` with its bytes, to show that reading changed nothing.
std::map<std::string, std::string> files_of(const std::filesystem::path& dir) {
    std::map<std::string, std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        files[entry.path().filename().string()] = test::read_file(entry.path());
    }
    return files;
}

// LevelDB recovers a log left by its last writer (every convert_imageset run leaves one) into a
// new table and deletes the log when it opens a database, and starts a new LOG: packing did
// that to the user's database. Now nothing in it changes, and a flipped byte is an error rather
// than a record dropped.
TEST(PackLeveldb, PackingLeavesEveryFileOfTheDatabaseAsItWasAndRefusesADamagedLog) {
    ScratchDir dir;
    std::vector<std::string> values;
    for (int i = 0; i < 12; ++i) {
        values.push_back(datum(3, 5, 7, planar(i, 3, 5, 7), i % 10));
    }
    write_leveldb(dir.path() / "db", values);
    const auto before = files_of(dir.path() / "db");
    auto packed = pack(dir / "db", dir / "out.dlpack");
    ASSERT_TRUE(packed) << packed.error().message;
    EXPECT_EQ(packed->manifest.files, 12U);
    EXPECT_TRUE(files_of(dir.path() / "db") == before) << "the database was written to";
    // Packed twice: the same records (the first read recovered nothing into the database).
    auto again = pack(dir / "db", dir / "again.dlpack");
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_EQ(test::read_file(dir.path() / "again.dlpack" / "index.tsv"),
              test::read_file(dir.path() / "out.dlpack" / "index.tsv"));

    // One write per record, so the log holds several records and a flipped byte damages one.
    {
        leveldb::Options options;
        options.create_if_missing = true;
        leveldb::DB* raw = nullptr;
        ASSERT_TRUE(leveldb::DB::Open(options, (dir / "damaged"), &raw).ok());
        const std::unique_ptr<leveldb::DB> writer(raw);
        for (std::size_t i = 0; i < values.size(); ++i) {
            ASSERT_TRUE(
                writer->Put(leveldb::WriteOptions(), fmt::format("{:08}", i), values[i]).ok());
        }
    }
    std::filesystem::path log;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path() / "damaged")) {
        if (entry.path().extension() == ".log") {
            log = entry.path();
        }
    }
    ASSERT_FALSE(log.empty());
    std::string bytes = test::read_file(log);
    ASSERT_GT(bytes.size(), 200U);
    bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x40);
    test::write_file(log, bytes);
    const auto damaged = files_of(dir.path() / "damaged");
    auto refused = pack(dir / "damaged", dir / "damaged.dlpack");
    ASSERT_FALSE(refused);
    EXPECT_NE(
        refused.error().message.find("LevelDB " + (dir / "damaged") + ": open failed: Corruption:"),
        std::string::npos)
        << refused.error().message;
    EXPECT_TRUE(files_of(dir.path() / "damaged") == damaged) << "the database was written to";
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "damaged.dlpack"));
}

#else

TEST(PackLeveldb, ABuildWithoutLeveldbSaysSo) {
    ScratchDir dir;
    test::write_file(dir.path() / "db" / "CURRENT", "MANIFEST-000002\n");
    auto result = pack(dir / "db", dir / "out");
    ASSERT_FALSE(result);
    EXPECT_NE(result.error().message.find("is a LevelDB, and this build has no LevelDB"),
              std::string::npos)
        << result.error().message;
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "out"));
}

#endif

} // namespace
} // namespace dljob::app
