// dltrain reads datasets packed by `dljob pack` in place, through index.tsv: IDX members (as a
// pack of Fashion-MNIST holds them) and image members with labels (a pack of an image list).
// The packs here are written by hand to the documented contract (docs/data.md): a ustar
// data.tar whose member bytes sit at the offsets index.tsv gives.

#include "data/idx_dataset.hpp"
#include "data/image_decode.hpp"
#include "data/pack_reader.hpp"
#include "engine_test_support.hpp"
#include "support/run_process.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <png.h>
#include <zstd.h>
// jpeglib.h needs FILE and size_t declared before it.
#include <jpeglib.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <tuple>

namespace {

namespace fs = std::filesystem;
using dl_test::TempDir;

std::string read_bytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

struct Member {
    std::string path;
    std::string bytes;
    std::string label = "-";
};

/// data.tar (ustar headers, 512-byte blocks) and index.tsv for `members`.
void write_pack(const fs::path& dir, const std::vector<Member>& members) {
    fs::create_directories(dir);
    std::string tar;
    std::string index = "# dljob-index v1\ttype\toffset\tsize\tlabel\tpath\n";
    for (const auto& m : members) {
        std::string header(512, '\0');
        header.replace(0, m.path.size(), m.path);
        const auto octal = [&](std::size_t at, std::size_t width, std::uint64_t value) {
            std::array<char, 16> text_buffer{};
            std::snprintf(text_buffer.data(), text_buffer.size(), "%0*llo",
                          static_cast<int>(width - 1), static_cast<unsigned long long>(value));
            const std::string text(text_buffer.data());
            header.replace(at, text.size(), text);
        };
        octal(100, 8, 0644);
        octal(108, 8, 0);
        octal(116, 8, 0);
        octal(124, 12, m.bytes.size());
        octal(136, 12, 946684800);
        header[156] = '0';
        header.replace(257, 6, std::string("ustar\0", 6));
        header.replace(263, 2, "00");
        header.replace(148, 8, "        ");
        unsigned sum = 0;
        for (const char c : header) {
            sum += static_cast<unsigned char>(c);
        }
        octal(148, 7, sum);
        tar += header;
        index += "f\t" + std::to_string(tar.size()) + "\t" + std::to_string(m.bytes.size()) + "\t" +
                 m.label + "\t" + m.path + "\n";
        tar += m.bytes;
        tar.append((512 - m.bytes.size() % 512) % 512, '\0');
    }
    tar.append(1024, '\0');
    std::ofstream(dir / "data.tar", std::ios::binary) << tar;
    std::ofstream(dir / "index.tsv", std::ios::binary) << index;
}

std::string png_bytes(int width, int height, int channels, const std::vector<std::uint8_t>& hwc) {
    png_image image{};
    image.version = PNG_IMAGE_VERSION;
    image.width = static_cast<png_uint_32>(width);
    image.height = static_cast<png_uint_32>(height);
    image.format = channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
    png_alloc_size_t size = 0;
    png_image_write_to_memory(&image, nullptr, &size, 0, hwc.data(), 0, nullptr);
    std::string out(size, '\0');
    EXPECT_NE(png_image_write_to_memory(&image, out.data(), &size, 0, hwc.data(), 0, nullptr), 0);
    out.resize(size);
    return out;
}

std::string jpeg_bytes(int width, int height, int channels, const std::vector<std::uint8_t>& hwc) {
    jpeg_compress_struct info{};
    jpeg_error_mgr error{};
    info.err = jpeg_std_error(&error);
    jpeg_create_compress(&info);
    unsigned char* buffer = nullptr;
    unsigned long size = 0;
    jpeg_mem_dest(&info, &buffer, &size);
    info.image_width = static_cast<JDIMENSION>(width);
    info.image_height = static_cast<JDIMENSION>(height);
    info.input_components = channels;
    info.in_color_space = channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_set_defaults(&info);
    jpeg_set_quality(&info, 100, TRUE);
    jpeg_start_compress(&info, TRUE);
    while (info.next_scanline < info.image_height) {
        auto* row = const_cast<JSAMPLE*>(hwc.data() + info.next_scanline * width * channels);
        jpeg_write_scanlines(&info, &row, 1);
    }
    jpeg_finish_compress(&info);
    std::string out(reinterpret_cast<char*>(buffer), size);
    jpeg_destroy_compress(&info);
    std::free(buffer); // NOLINT(cppcoreguidelines-no-malloc): libjpeg allocates with malloc
    return out;
}

TEST(PackReader, IdxMembersReadThroughTheIndexEqualTheFiles) {
    TempDir dir;
    fs::create_directories(dir.path() / "plain");
    dl_test::write_tiny_dataset(dir.path() / "plain", "train", 20, 8, 3, /*gz=*/true);
    const std::string images = "train-images-idx3-ubyte.gz";
    const std::string labels = "train-labels-idx1-ubyte.gz";
    write_pack(dir.path() / "fmnist.dlpack",
               {{"README", "hello"},
                {"raw/" + images, read_bytes(dir.path() / "plain" / images)},
                {"raw/" + labels, read_bytes(dir.path() / "plain" / labels)}});

    const auto expected =
        dl::data::load_idx(dir.path() / "plain" / images, dir.path() / "plain" / labels);
    const fs::path pack = dir.path() / "fmnist.dlpack";
    const auto packed = dl::data::load_idx(pack / "raw" / images, pack / "raw" / labels);
    EXPECT_EQ(packed.count, 20U);
    EXPECT_EQ(packed.height, 8);
    EXPECT_EQ(packed.pixels, expected.pixels);
    EXPECT_EQ(packed.labels, expected.labels);
    const auto header = dl::data::read_idx_header(pack / "raw" / images);
    EXPECT_EQ(header.count, 20U);
    EXPECT_TRUE(header.pixels.empty());
}

// Sizes that are a file's claim are held to the run's memory before it is taken: an IDX header's
// count (read from a plain file) and a gzipped member's output (a few KB of gzip can inflate to
// gigabytes; this one is 3 MB of zeros).
TEST(PackReader, ClaimsPastTheMemoryBudgetAreRefusedBeforeTheMemoryIsTaken) {
    TempDir dir;
    dl_test::write_tiny_dataset(dir.path(), "train", 20, 8, 3, /*gz=*/true);
    const fs::path images = dir.path() / "train-images-idx3-ubyte.gz";
    const auto refusal = [](const std::function<void()>& load) -> std::string {
        try {
            load();
        } catch (const dl::Error& e) {
            EXPECT_EQ(e.kind(), dl::ErrorKind::config);
            return e.what();
        }
        ADD_FAILURE() << "no error";
        return {};
    };
    const std::string header_claim = refusal([&] {
        dl::data::load_idx(images, {}, {1000, "--max-memory 1000"});
    });
    EXPECT_NE(header_claim.find("(20 images of 1x8x8) would take 1280 bytes in memory"),
              std::string::npos)
        << header_claim;
    EXPECT_EQ(dl::data::load_idx(images, {}, {1280, "--max-memory 1280"}).count, 20U);

    std::string zeros(std::size_t{3} << 20U, '\0');
    uLongf packed_size = compressBound(zeros.size());
    std::string gz(packed_size + 18, '\0');
    z_stream stream{};
    ASSERT_EQ(deflateInit2(&stream, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    stream.next_in = reinterpret_cast<Bytef*>(zeros.data());
    stream.avail_in = static_cast<uInt>(zeros.size());
    stream.next_out = reinterpret_cast<Bytef*>(gz.data());
    stream.avail_out = static_cast<uInt>(gz.size());
    ASSERT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
    gz.resize(stream.total_out);
    deflateEnd(&stream);
    ASSERT_LT(gz.size(), 10000U);
    write_pack(dir.path() / "p", {{"bomb.gz", gz}});
    const std::string inflated = refusal([&] {
        dl::data::load_idx(dir.path() / "p/bomb.gz", {}, {1U << 20U, "--max-memory 1M"});
    });
    EXPECT_NE(inflated.find("bomb.gz"), std::string::npos) << inflated;
    EXPECT_NE(inflated.find("--max-memory 1M"), std::string::npos) << inflated;
}

TEST(PackReader, AMissingMemberNamesThePackAndTheMember) {
    TempDir dir;
    write_pack(dir.path() / "p", {{"a.gz", "x"}});
    try {
        dl::data::load_idx(dir.path() / "p/train-images-idx3-ubyte.gz", {});
        FAIL() << "no error";
    } catch (const dl::Error& e) {
        EXPECT_EQ(e.kind(), dl::ErrorKind::config);
        EXPECT_NE(std::string(e.what()).find("has no member train-images-idx3-ubyte.gz"),
                  std::string::npos)
            << e.what();
    }
}

TEST(PackReader, ImageMembersAreDecodedInIndexOrderWithTheirLabels) {
    TempDir dir;
    // Three 5x4 grey images: PNG, JPEG (flat, so quality 100 decodes exactly) and PGM.
    std::vector<std::uint8_t> ramp(20);
    for (std::size_t i = 0; i < ramp.size(); ++i) {
        ramp[i] = static_cast<std::uint8_t>(i * 10);
    }
    const std::vector<std::uint8_t> flat(20, 128);
    std::string pgm = "P5 5 4 255\n";
    pgm.append(20, '\x07');
    write_pack(dir.path() / "list.dlpack", {{"train/a.png", png_bytes(5, 4, 1, ramp), "3"},
                                            {"train/b.jpg", jpeg_bytes(5, 4, 1, flat), "0"},
                                            {"train/c.pgm", pgm, "9"},
                                            {"test/d.pgm", pgm, "1"}});
    const fs::path pack = dir.path() / "list.dlpack";
    const auto set = dl::data::load_idx(pack / "train", pack / "train");
    ASSERT_EQ(set.count, 3U);
    EXPECT_EQ(set.channels, 1);
    EXPECT_EQ(set.height, 4);
    EXPECT_EQ(set.width, 5);
    EXPECT_EQ(set.labels, (std::vector<std::int32_t>{3, 0, 9}));
    EXPECT_EQ(std::vector<std::uint8_t>(set.pixels.begin(), set.pixels.begin() + 20), ramp);
    for (std::size_t i = 20; i < 40; ++i) {
        EXPECT_NEAR(set.pixels[i], 128, 1) << i;
    }
    EXPECT_EQ(set.pixels[40], 7);

    const auto all = dl::data::load_idx(pack, pack);
    EXPECT_EQ(all.count, 4U);
    EXPECT_EQ(all.labels.back(), 1);
}

TEST(PackReader, ColourImagesArePlanar) {
    TempDir dir;
    std::vector<std::uint8_t> hwc;
    for (int p = 0; p < 6; ++p) {
        hwc.insert(hwc.end(), {static_cast<std::uint8_t>(p), 100, 200});
    }
    write_pack(dir.path() / "c", {{"x.png", png_bytes(3, 2, 3, hwc), "1"}});
    const auto set = dl::data::load_idx(dir.path() / "c", dir.path() / "c");
    ASSERT_EQ(set.channels, 3);
    // BGR planes, as Caffe's OpenCV reads an image file: the PNG's blue (200) first.
    EXPECT_EQ(set.pixels, (std::vector<std::uint8_t>{200, 200, 200, 200, 200, 200, 100, 100, 100,
                                                     100, 100, 100, 0, 1, 2, 3, 4, 5}));
}

TEST(PackReader, ImagesOfDifferentSizesOrWithoutLabelsAreClearErrors) {
    TempDir dir;
    std::string small = "P5 2 2 255\n";
    small.append(4, '\0');
    std::string big = "P5 3 3 255\n";
    big.append(9, '\0');
    write_pack(dir.path() / "sizes", {{"a.pgm", small, "0"}, {"b.pgm", big, "1"}});
    write_pack(dir.path() / "unlabelled", {{"a.pgm", small}});
    write_pack(dir.path() / "broken", {{"a.png", "\x89PNG\r\n\x1a\nnot really", "0"}});
    const auto error_of = [](const fs::path& pack) {
        try {
            dl::data::load_idx(pack, pack);
        } catch (const dl::Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(error_of(dir.path() / "sizes").find("b.pgm) is 3x3 but a.pgm is 2x2"),
              std::string::npos)
        << error_of(dir.path() / "sizes");
    EXPECT_NE(error_of(dir.path() / "unlabelled").find("no label"), std::string::npos);
    EXPECT_NE(error_of(dir.path() / "broken").find("bad PNG"), std::string::npos);
}

/// The plain pack in `plain` rewritten as format version 2 in `dir`: data.tar cut into zstd
/// frames of `frame_bytes` (small, so members straddle frames), chunks.tsv, a manifest listing
/// the one data file, and the index with a shard column. The contract of docs/data.md, written
/// independently of dljob's writer.
void compress_pack(const fs::path& plain, const fs::path& dir, std::size_t frame_bytes) {
    fs::create_directories(dir);
    const std::string tar = read_bytes(plain / "data.tar");
    std::string stored;
    std::string chunks = "# dljob-chunks v1\tshard\traw_offset\traw_size\tstored_offset\t"
                         "stored_size\n";
    for (std::size_t at = 0; at < tar.size(); at += frame_bytes) {
        const std::size_t raw = std::min(frame_bytes, tar.size() - at);
        ZSTD_CCtx* cctx = ZSTD_createCCtx();
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
        std::string frame(ZSTD_compressBound(raw), '\0');
        const std::size_t n =
            ZSTD_compress2(cctx, frame.data(), frame.size(), tar.data() + at, raw);
        ZSTD_freeCCtx(cctx);
        EXPECT_EQ(ZSTD_isError(n), 0U);
        chunks += "0\t" + std::to_string(at) + "\t" + std::to_string(raw) + "\t" +
                  std::to_string(stored.size()) + "\t" + std::to_string(n) + "\n";
        stored.append(frame.data(), n);
    }
    std::ofstream(dir / "data.tar.zst", std::ios::binary) << stored;
    std::ofstream(dir / "chunks.tsv", std::ios::binary) << chunks;
    std::istringstream index(read_bytes(plain / "index.tsv"));
    std::string out = "# dljob-index v2\ttype\tshard\toffset\tsize\tlabel\tpath\n";
    std::string line;
    std::getline(index, line);
    while (std::getline(index, line)) {
        out += line.substr(0, 2) + "0\t" + line.substr(2) + "\n";
    }
    std::ofstream(dir / "index.tsv", std::ios::binary) << out;
    const nlohmann::json manifest{
        {"format", "dljob-dataset"},
        {"version", 2},
        {"compression", "zstd"},
        {"shards",
         {{{"file", "data.tar.zst"}, {"bytes", stored.size()}, {"tar_bytes", tar.size()}}}},
    };
    std::ofstream(dir / "manifest.json") << manifest.dump(2);
}

TEST(PackReader, CompressedPackMembersEqualThePlainPacksMembers) {
    TempDir dir;
    std::string big(5000, '\0');
    for (std::size_t i = 0; i < big.size(); ++i) {
        big[i] = static_cast<char>((i * 7919U) % 251U);
    }
    write_pack(dir.path() / "plain", {{"a", "first"}, {"big", big}, {"c", "third"}, {"e", ""}});
    compress_pack(dir.path() / "plain", dir.path() / "zst", 700);
    const dl::data::Pack plain(dir.path() / "plain");
    const dl::data::Pack packed(dir.path() / "zst");
    EXPECT_TRUE(packed.compressed());
    ASSERT_EQ(packed.files().size(), plain.files().size());
    // Out of order too: the frame cache must not hand back another frame's bytes.
    for (const std::size_t i : {0U, 1U, 2U, 3U, 1U, 0U}) {
        EXPECT_EQ(packed.read(packed.files()[i]), plain.read(plain.files()[i]))
            << packed.files()[i].path;
    }
}

TEST(PackReader, ADamagedCompressedByteIsAClearError) {
    TempDir dir;
    write_pack(dir.path() / "plain", {{"a", std::string(3000, 'a')}, {"b", "bee"}});
    compress_pack(dir.path() / "plain", dir.path() / "zst", 1024);
    std::string stored = read_bytes(dir.path() / "zst/data.tar.zst");
    // Frame 0 holds the first header and the start of member a: flip a byte in its middle.
    stored[stored.size() / 4] = static_cast<char>(stored[stored.size() / 4] ^ 0x5a);
    std::ofstream(dir.path() / "zst/data.tar.zst", std::ios::binary) << stored;
    const dl::data::Pack packed(dir.path() / "zst");
    try {
        (void)packed.read(packed.files()[0]);
        FAIL() << "a damaged frame was read without an error";
    } catch (const dl::Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("data.tar.zst"), std::string::npos) << message;
        EXPECT_NE(message.find("damaged"), std::string::npos) << message;
        EXPECT_NE(message.find("member a"), std::string::npos) << message;
    }
}

TEST(PackReader, AChunkTableThatDoesNotCoverTheDataIsRefused) {
    TempDir dir;
    write_pack(dir.path() / "plain", {{"a", "x"}});
    compress_pack(dir.path() / "plain", dir.path() / "zst", 512);
    std::string chunks = read_bytes(dir.path() / "zst/chunks.tsv");
    chunks.erase(chunks.rfind('\n', chunks.size() - 2) + 1); // drop the last frame
    std::ofstream(dir.path() / "zst/chunks.tsv", std::ios::binary) << chunks;
    EXPECT_THROW(dl::data::Pack(dir.path() / "zst"), dl::Error);
}

// A chunk table's raw size is the file's claim: one frame of a few hundred bytes said to hold
// 2^40 bytes sized a 1 TB frame buffer at the first read. zstd cannot expand that much.
TEST(PackReader, AFrameClaimingMoreThanZstdCanHoldIsRefused) {
    TempDir dir;
    write_pack(dir.path() / "plain", {{"a", "x"}});
    compress_pack(dir.path() / "plain", dir.path() / "zst", 512);
    std::string chunks = read_bytes(dir.path() / "zst/chunks.tsv");
    const auto last_start = chunks.rfind('\n', chunks.size() - 2) + 1;
    const std::string last = chunks.substr(last_start);
    chunks.erase(last_start);
    // The last frame: shard, raw_offset, raw_size, stored_offset, stored_size.
    std::istringstream fields(last);
    std::uint64_t shard = 0, raw_offset = 0, raw_size = 0, stored_offset = 0, stored_size = 0;
    fields >> shard >> raw_offset >> raw_size >> stored_offset >> stored_size;
    const std::uint64_t extra = std::uint64_t{1} << 40;
    chunks += fmt::format("{}\t{}\t{}\t{}\t{}\n", shard, raw_offset, raw_size + extra,
                          stored_offset, stored_size);
    std::ofstream(dir.path() / "zst/chunks.tsv", std::ios::binary) << chunks;
    auto manifest = nlohmann::json::parse(read_bytes(dir.path() / "zst/manifest.json"));
    manifest["shards"][0]["tar_bytes"] =
        manifest["shards"][0]["tar_bytes"].get<std::uint64_t>() + extra;
    std::ofstream(dir.path() / "zst/manifest.json", std::ios::trunc) << manifest.dump(2);
    try {
        const dl::data::Pack packed(dir.path() / "zst");
        FAIL() << "a frame of " << stored_size << " bytes claiming " << raw_size + extra
               << " was accepted";
    } catch (const dl::Error& e) {
        EXPECT_NE(std::string(e.what()).find("cannot hold"), std::string::npos) << e.what();
    }
}

/// What opening the pack in `dir` throws, or "" when it opens.
std::string pack_error(const fs::path& dir) {
    try {
        const dl::data::Pack pack(dir);
    } catch (const dl::Error& e) {
        return e.what();
    }
    return {};
}

// The manifest and the data files are the pack's claims too (found by tests/fuzz's pack
// target): each is checked before it is used, and none is waited on.
TEST(PackReader, TheManifestAndTheDataFilesAreCheckedBeforeUse) {
    TempDir dir;
    std::mt19937 random(7);
    std::string incompressible(9000, '\0');
    for (char& c : incompressible) {
        c = static_cast<char>(random());
    }
    write_pack(dir.path() / "plain", {{"a", incompressible}});
    // One frame holding the whole tar, about 9 KB stored.
    const auto fresh = [&](const std::string& name) {
        compress_pack(dir.path() / "plain", dir.path() / name, 1 << 20);
        return dir.path() / name;
    };
    // "compression" of another type: a config error, not nlohmann's type_error.
    const fs::path typed = fresh("typed");
    auto manifest = nlohmann::json::parse(read_bytes(typed / "manifest.json"));
    manifest["compression"] = 5;
    std::ofstream(typed / "manifest.json", std::ios::trunc) << manifest.dump();
    EXPECT_NE(pack_error(typed).find("\"compression\" is not a name"), std::string::npos)
        << pack_error(typed);
    // A FIFO as the manifest, the chunk table or a data file: refused, not waited on.
    for (const char* file : {"manifest.json", "chunks.tsv", "data.tar.zst"}) {
        const fs::path pack = fresh(std::string("fifo-") + file);
        fs::remove(pack / file);
        ASSERT_EQ(::mkfifo((pack / file).c_str(), 0600), 0);
        EXPECT_NE(pack_error(pack).find("not a regular file"), std::string::npos)
            << file << ": " << pack_error(pack);
    }
    // A frame said to hold 100 MiB more (which zstd could, from 9 KB): past what dljob pack
    // writes, refused before a frame buffer is sized by it.
    const fs::path big = fresh("big-frame");
    std::string chunks = read_bytes(big / "chunks.tsv");
    const auto last_start = chunks.rfind('\n', chunks.size() - 2) + 1;
    std::istringstream fields(chunks.substr(last_start));
    std::uint64_t shard = 0, raw_offset = 0, raw_size = 0, stored_offset = 0, stored_size = 0;
    fields >> shard >> raw_offset >> raw_size >> stored_offset >> stored_size;
    ASSERT_GE(stored_size, 4000U); // so that the 32768-times rule alone would let it pass
    const std::uint64_t extra = std::uint64_t{100} << 20;
    chunks.erase(last_start);
    chunks += fmt::format("{}\t{}\t{}\t{}\t{}\n", shard, raw_offset, raw_size + extra,
                          stored_offset, stored_size);
    std::ofstream(big / "chunks.tsv", std::ios::binary) << chunks;
    manifest = nlohmann::json::parse(read_bytes(big / "manifest.json"));
    manifest["shards"][0]["tar_bytes"] =
        manifest["shards"][0]["tar_bytes"].get<std::uint64_t>() + extra;
    std::ofstream(big / "manifest.json", std::ios::trunc) << manifest.dump();
    EXPECT_NE(pack_error(big).find("dljob pack writes at most"), std::string::npos)
        << pack_error(big);
    // An uncompressed version 2 data file is its tar: a manifest claiming more is refused.
    const fs::path plain2 = fresh("plain-v2");
    fs::remove(plain2 / "data.tar.zst");
    fs::remove(plain2 / "chunks.tsv");
    fs::copy_file(dir.path() / "plain/data.tar", plain2 / "data-00000.tar");
    manifest = nlohmann::json::parse(read_bytes(plain2 / "manifest.json"));
    manifest["compression"] = "none";
    manifest["shards"][0]["file"] = "data-00000.tar";
    std::ofstream(plain2 / "manifest.json", std::ios::trunc) << manifest.dump();
    EXPECT_EQ(pack_error(plain2), ""); // the true size reads
    manifest["shards"][0]["tar_bytes"] =
        manifest["shards"][0]["tar_bytes"].get<std::uint64_t>() + (std::uint64_t{1} << 40);
    std::ofstream(plain2 / "manifest.json", std::ios::trunc) << manifest.dump();
    EXPECT_NE(pack_error(plain2).find("the manifest says"), std::string::npos)
        << pack_error(plain2);
}

// An image header's width and height are the file's claim: a JPEG of 8x8 pixels whose header
// says 65000x65000 sized a 4 GB buffer, a PNG saying 100000x100000 one of 10 GB.
TEST(PackReader, AnImageHeaderClaimingHugeDimensionsIsRefused) {
    TempDir dir;
    const std::vector<std::uint8_t> pixels(64, 128);
    std::string jpeg = jpeg_bytes(8, 8, 1, pixels);
    const auto sof = jpeg.find("\xff\xc0");
    ASSERT_NE(sof, std::string::npos);
    for (const std::size_t at : {sof + 5, sof + 7}) { // height, then width, big-endian
        jpeg[at] = static_cast<char>(65000 >> 8);
        jpeg[at + 1] = static_cast<char>(65000 & 0xff);
    }
    std::string png = png_bytes(8, 8, 1, pixels);
    ASSERT_EQ(png.substr(12, 4), "IHDR");
    for (const std::size_t at : {std::size_t{16}, std::size_t{20}}) { // width, then height
        for (int i = 0; i < 4; ++i) {
            png[at + i] = static_cast<char>((100000U >> (24 - 8 * i)) & 0xffU);
        }
    }
    const auto crc = static_cast<std::uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(png.data() + 12), 17)); // type and data
    for (int i = 0; i < 4; ++i) {
        png[29 + i] = static_cast<char>((crc >> (24 - 8 * i)) & 0xffU);
    }
    for (const auto& [name, bytes, expected] :
         {std::tuple{std::string("a.jpg"), jpeg, std::string("65000x65000 image")},
          std::tuple{std::string("a.png"), png, std::string("100000x100000 image")}}) {
        const fs::path pack = dir.path() / ("pack_" + name);
        write_pack(pack, {{name, bytes, "0"}});
        try {
            dl::data::load_idx(pack, pack);
            ADD_FAILURE() << name << ": no error";
        } catch (const dl::Error& e) {
            const std::string message = e.what();
            EXPECT_NE(message.find(expected), std::string::npos) << message;
            EXPECT_NE(message.find("more than the 268435456 bytes one image may have"),
                      std::string::npos)
                << message;
        }
    }
}

TEST(PackReader, AMalformedIndexNamesItsLine) {
    TempDir dir;
    write_pack(dir.path() / "p", {{"a.gz", "x"}});
    std::ofstream(dir.path() / "p/index.tsv", std::ios::app) << "f\t99999\t5\t-\tb.gz\n";
    try {
        dl::data::load_idx(dir.path() / "p/b.gz", {});
        FAIL() << "no error";
    } catch (const dl::Error& e) {
        EXPECT_NE(std::string(e.what()).find("index.tsv:3: member lies beyond the end"),
                  std::string::npos)
            << e.what();
    }
}

TEST(PackReader, DltrainTrainsFromAPackWithTheSameConfig) {
    TempDir dir;
    fs::create_directories(dir.path() / "plain");
    const fs::path plain = dl_test::make_tiny_workspace(dir.path() / "plain", 20);
    std::vector<Member> members;
    for (const auto* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                             "test-images-idx3-ubyte", "test-labels-idx1-ubyte"}) {
        members.push_back({name, read_bytes(dir.path() / "plain" / name)});
    }
    write_pack(dir.path() / "data.dlpack", members);
    const auto run = [&](const fs::path& data, const std::string& run_dir) {
        return dljob::test::run_shell(
            std::string(DLTRAIN_BINARY) + " train --config " + plain.string() + " --run-dir " +
            (dir.path() / run_dir).string() + " --data-dir " + data.string() + " --threads 1");
    };
    const auto from_files = run(dir.path() / "plain", "run-files");
    ASSERT_EQ(from_files.exit_code, 0) << from_files.output;
    const auto from_pack = run(dir.path() / "data.dlpack", "run-pack");
    ASSERT_EQ(from_pack.exit_code, 0) << from_pack.output;
    // Same bytes in, same training out: the losses agree line by line.
    const auto losses = [&](const std::string& run_dir) {
        std::vector<double> out;
        std::ifstream in(dir.path() / run_dir / "metrics.jsonl");
        std::string line;
        while (std::getline(in, line)) {
            const auto json = nlohmann::json::parse(line);
            if (json.value("type", "") == "train" || json.value("type", "") == "test") {
                out.push_back(json.at("loss").get<double>());
            }
        }
        return out;
    };
    const auto expected = losses("run-files");
    EXPECT_FALSE(expected.empty());
    EXPECT_EQ(losses("run-pack"), expected);
}

} // namespace
