// Caffe's HDF5Data source (data/hdf5_dataset.cpp): a list of HDF5 files, each with a dataset per
// top, read into one set in list order; files written by h5py (tests/engine/hdf5_files.py), as
// Caffe's HDF5 classification notebook writes them. Skipped, saying why, in a build without
// libhdf5, which refuses the source instead (checked too).

#include "data/hdf5_dataset.hpp"
#include "engine_test_support.hpp"
#include "support/run_process.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using dljob::test::run_shell;

class Hdf5Reader : public ::testing::Test {
protected:
    dl_test::TempDir m_dir;

    // FILE in the temporary folder, with the datasets of `spec` (hdf5_files.py's JSON).
    void write_h5(const std::string& file, const nlohmann::json& spec) const {
        const auto result =
            run_shell(fmt::format("/usr/bin/python3 '{}/tests/engine/hdf5_files.py' '{}' '{}'",
                                  DLJOB_SOURCE_DIR, (m_dir.path() / file).string(), spec.dump()));
        ASSERT_EQ(result.exit_code, 0) << result.output;
    }
    static nlohmann::json dataset(const std::string& dtype, std::vector<int> shape,
                                  std::vector<double> values) {
        return {{"dtype", dtype}, {"shape", std::move(shape)}, {"values", std::move(values)}};
    }
    [[nodiscard]] dl::data::Hdf5Options options(const std::string& label = "label") const {
        dl::data::Hdf5Options o;
        o.file_path = [root = m_dir.path()](const std::string& name) { return root / name; };
        o.data_name = "data";
        o.label_name = label;
        return o;
    }
    [[nodiscard]] std::string error_of(const std::string& list_text,
                                       const dl::data::Hdf5Options& o) const {
        dl_test::write_bytes(m_dir.path() / "bad.txt", list_text);
        try {
            (void)dl::data::load_hdf5_list(m_dir.path() / "bad.txt", o);
        } catch (const dl::Error& e) {
            EXPECT_EQ(e.kind(), dl::ErrorKind::config) << e.what();
            return e.what();
        }
        return "(no error)";
    }
    void SetUp() override {
        if (!dl::data::hdf5_available()) {
            dl_test::write_bytes(m_dir.path() / "list.txt", "a.h5\n");
            const std::string message = error_of("a.h5\n", options());
            EXPECT_NE(message.find("built without libhdf5"), std::string::npos) << message;
            GTEST_SKIP() << "this build has no libhdf5 (DLJOB_HDF5=OFF): " << message;
        }
    }
};

TEST_F(Hdf5Reader, EveryFileOfTheListInOrderWithItsLabels) {
    // N x D rows (the notebook's 4 features) in float32, then float64: libhdf5 converts.
    write_h5("one.h5", {{"data", dataset("float32", {2, 3}, {0.5, -1, 2, 3, 4.25, -5})},
                        {"label", dataset("float32", {2, 1}, {1, 0})}});
    write_h5("two.h5", {{"data", dataset("float64", {1, 3}, {7, 8, 9})},
                        {"label", dataset("int32", {1}, {2})}});
    dl_test::write_bytes(m_dir.path() / "list.txt", "one.h5\n\ntwo.h5\r\n");
    const auto header = dl::data::read_hdf5_list_header(m_dir.path() / "list.txt", options());
    EXPECT_EQ(header.count, 3U);
    EXPECT_EQ(header.channels, 3);
    EXPECT_TRUE(header.float_pixels.empty());
    const auto set = dl::data::load_hdf5_list(m_dir.path() / "list.txt", options());
    EXPECT_EQ(set.count, 3U);
    EXPECT_EQ(set.channels, 3);
    EXPECT_EQ(set.height, 1);
    EXPECT_EQ(set.width, 1);
    EXPECT_EQ(set.float_pixels, (std::vector<float>{0.5F, -1, 2, 3, 4.25F, -5, 7, 8, 9}));
    EXPECT_EQ(set.labels, (std::vector<std::int32_t>{1, 0, 2}));
    // One top: no labels read.
    EXPECT_TRUE(dl::data::load_hdf5_list(m_dir.path() / "list.txt", options("")).labels.empty());
}

TEST_F(Hdf5Reader, ImagesKeepTheirChannelsHeightAndWidth) {
    std::vector<double> values(2 * 2 * 3 * 4);
    for (std::size_t i = 0; i < values.size(); ++i) {
        values[i] = static_cast<double>(i) / 8.0;
    }
    write_h5("maps.h5", {{"data", dataset("float64", {2, 2, 3, 4}, values)},
                         {"label", dataset("float32", {2}, {0, 9})}});
    dl_test::write_bytes(m_dir.path() / "list.txt", "maps.h5\n");
    const auto set = dl::data::load_hdf5_list(m_dir.path() / "list.txt", options());
    EXPECT_EQ(set.channels, 2);
    EXPECT_EQ(set.height, 3);
    EXPECT_EQ(set.width, 4);
    ASSERT_EQ(set.float_pixels.size(), values.size());
    EXPECT_FLOAT_EQ(set.float_pixels[23], 23.0F / 8.0F);
    EXPECT_EQ(set.labels, (std::vector<std::int32_t>{0, 9}));
}

TEST_F(Hdf5Reader, BadListsFilesAndDatasetsNameTheLineFileAndDataset) {
    write_h5("ok.h5", {{"data", dataset("float32", {2, 2}, {1, 2, 3, 4})},
                       {"label", dataset("float32", {2}, {0, 1})}});
    write_h5("wide.h5", {{"data", dataset("float32", {1, 3}, {1, 2, 3})},
                         {"label", dataset("float32", {1}, {0})}});
    write_h5("half.h5", {{"data", dataset("float32", {1, 2}, {1, 2})},
                         {"label", dataset("float32", {1}, {2.5})}});
    write_h5("short.h5", {{"data", dataset("float32", {2, 2}, {1, 2, 3, 4})},
                          {"label", dataset("float32", {1}, {1})}});
    write_h5("nolabel.h5", {{"data", dataset("float32", {1, 2}, {1, 2})}});
    dl_test::write_bytes(m_dir.path() / "text.h5", "not hdf5");
    ASSERT_EQ(mkfifo((m_dir.path() / "fifo.h5").c_str(), 0600), 0);
    const struct {
        std::string list;
        std::string expected;
    } cases[] = {
        {"\n\n", "names no file"},
        {"ok.h5\nabsent.h5\n",
         "line 2: " + (m_dir.path() / "absent.h5").string() + ": no such file"},
        {"fifo.h5\n", "line 1: " + (m_dir.path() / "fifo.h5").string() + ": not a regular file"},
        {"text.h5\n", "text.h5: not an HDF5 file"},
        {"ok.h5\nwide.h5\n", "line 2: " + (m_dir.path() / "wide.h5").string() +
                                 ": dataset 'data' has items of another shape"},
        {"half.h5\n", "dataset 'label' item 0: label 2.5 is not a class"},
        {"short.h5\n", "dataset 'label' is not one label per item of 'data' (2 items)"},
        {"nolabel.h5\n", "dataset 'label' is not in the file"},
    };
    for (const auto& c : cases) {
        const std::string message = error_of(c.list, options());
        EXPECT_NE(message.find(c.expected), std::string::npos)
            << "list " << c.list << ": " << message;
    }
    // A list that would pass the memory budget is refused before its values are read.
    dl_test::write_bytes(m_dir.path() / "list.txt", "ok.h5\n");
    try {
        (void)dl::data::load_hdf5_list(m_dir.path() / "list.txt", options(),
                                       dl::data::DataBudget{8, "a test's 8 bytes"});
        ADD_FAILURE() << "read past the budget";
    } catch (const dl::Error& e) {
        EXPECT_NE(std::string(e.what()).find("would take 16 bytes in memory, more than the 8"),
                  std::string::npos)
            << e.what();
    }
}

} // namespace
