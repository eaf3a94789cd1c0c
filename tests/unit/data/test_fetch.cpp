// fetch-data against a real HTTP server on loopback (tests/support/http_server.py) through the
// real libcurl adapter: resume, retries, stalls, 404s and checksum mismatches.
#include "support/env_of.hpp"
#include "support/run_process.hpp"
#include "unit/data/data_test_support.hpp"
#include "unit/data/http_test_server.hpp"

#include <dljob/adapters/hash_nettle.hpp>
#include <dljob/adapters/http_curl.hpp>
#include <dljob/app/data/fetch.hpp>

#include <gtest/gtest.h>
#include <sys/file.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <random>
#include <string>

namespace dljob::app {
namespace {

namespace fs = std::filesystem;
using test::ScratchDir;

std::string sha256_of(const std::string& bytes) {
    adapters::Digest digest(adapters::DigestKind::sha256);
    digest.update(bytes.data(), bytes.size());
    return digest.hex_final();
}

// The published test vectors (RFC 1321, FIPS 180-2), split across updates: the tests below
// compare digests made by this same adapter, so they alone could not catch a wrong one.
TEST(Digest, MatchesThePublishedTestVectors) {
    auto hex = [](adapters::DigestKind kind, const std::string& text) {
        adapters::Digest digest(kind);
        digest.update(text.data(), 1);
        digest.update(text.data() + 1, text.size() - 1);
        return digest.hex_final();
    };
    EXPECT_EQ(hex(adapters::DigestKind::md5, "abc"), "900150983cd24fb0d6963f7d28e17f72");
    EXPECT_EQ(hex(adapters::DigestKind::sha256, "abc"),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(hex(adapters::DigestKind::sha256,
                  "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

std::string random_bytes(std::size_t size) {
    std::mt19937 rng(42);
    std::string bytes(size, '\0');
    for (auto& c : bytes) {
        c = static_cast<char>(rng() & 0xFFU);
    }
    return bytes;
}

using test::env_of;

class FetchData : public ::testing::Test {
protected:
    void SetUp() override {
        test::write_file(m_dir.path() / "www/blob.bin", m_blob);
        m_settings.stall_seconds = 1;
        m_settings.attempts = 3;
        m_settings.backoff = std::chrono::milliseconds(10);
        m_callbacks.notice = [this](const std::string& line) { m_notices += line + "\n"; };
    }
    Result<FetchResult> fetch(const std::string& path, const std::string& sha256) {
        FetchRequest request;
        request.what = m_server.url(path);
        request.to = m_dir / "out";
        request.sha256 = sha256;
        return fetch_data(request, m_settings, env_of({}), m_http, m_callbacks);
    }
    [[nodiscard]] fs::path final_path() const { return m_dir.path() / "out/blob.bin"; }
    [[nodiscard]] fs::path part() const { return part_path(m_dir / "out", "blob.bin"); }

    ScratchDir m_dir;
    std::string m_blob = random_bytes(3U << 20U); // 3 MiB: several write callbacks
    test::HttpTestServer m_server{m_dir.path() / "www", m_dir.path() / "requests.log"};
    adapters::CurlHttpClient m_http;
    FetchSettings m_settings;
    FetchCallbacks m_callbacks;
    std::string m_notices;
};

TEST_F(FetchData, DownloadsAUrlVerifiesItAndLeavesNoPartFile) {
    auto result = fetch("/files/blob.bin", sha256_of(m_blob));
    ASSERT_TRUE(result) << result.error().message;
    ASSERT_EQ(result->files.size(), 1U);
    EXPECT_TRUE(result->files[0].verified);
    EXPECT_EQ(test::read_file(final_path()), m_blob);
    EXPECT_FALSE(fs::exists(part()));

    // A second run finds the verified file and downloads nothing.
    auto again = fetch("/files/blob.bin", sha256_of(m_blob));
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_TRUE(again->files[0].already_present);
    EXPECT_EQ(m_server.log(), "GET /files/blob.bin -\n");
}

TEST_F(FetchData, ResumesADroppedConnectionWithARangeRequest) {
    auto result = fetch("/drop-once/blob.bin", sha256_of(m_blob));
    ASSERT_TRUE(result) << result.error().message;
    EXPECT_EQ(test::read_file(final_path()), m_blob);
    const std::string half = std::to_string(m_blob.size() / 2);
    EXPECT_EQ(m_server.log(),
              "GET /drop-once/blob.bin -\nGET /drop-once/blob.bin bytes=" + half + "-\n");
    EXPECT_NE(m_notices.find("resuming at"), std::string::npos) << m_notices;
}

TEST_F(FetchData, ARerunContinuesThePartFileOfAFailedRun) {
    m_settings.attempts = 1;
    auto failed = fetch("/drop-always/blob.bin", sha256_of(m_blob));
    ASSERT_FALSE(failed);
    EXPECT_EQ(failed.error().code, ErrorCode::io);
    EXPECT_NE(failed.error().hint.find("resume"), std::string::npos) << failed.error().hint;
    EXPECT_FALSE(fs::exists(final_path()));
    ASSERT_TRUE(fs::exists(part()));
    const auto kept = fs::file_size(part());
    EXPECT_EQ(kept, m_blob.size() / 2);

    auto result = fetch("/files/blob.bin", sha256_of(m_blob));
    ASSERT_TRUE(result) << result.error().message;
    EXPECT_EQ(test::read_file(final_path()), m_blob);
    EXPECT_NE(m_server.log().find("GET /files/blob.bin bytes=" + std::to_string(kept) + "-"),
              std::string::npos)
        << m_server.log();
    EXPECT_FALSE(fs::exists(part()));
}

TEST_F(FetchData, WrongChecksumNamesExpectedAndActualAndLeavesNothing) {
    const std::string wrong(64, 'a');
    auto result = fetch("/files/blob.bin", wrong);
    ASSERT_FALSE(result);
    const std::string& message = result.error().message;
    EXPECT_NE(message.find("checksum mismatch"), std::string::npos) << message;
    EXPECT_NE(message.find("expected sha256 " + wrong), std::string::npos) << message;
    EXPECT_NE(message.find("actual " + sha256_of(m_blob)), std::string::npos) << message;
    EXPECT_FALSE(fs::exists(final_path()));
    EXPECT_FALSE(fs::exists(part()));
}

TEST_F(FetchData, NotFoundIsATypedErrorNamingTheUrl) {
    auto result = fetch("/files/missing.bin", "");
    ASSERT_FALSE(result);
    EXPECT_EQ(result.error().code, ErrorCode::not_found);
    EXPECT_NE(result.error().message.find(m_server.url("/files/missing.bin")), std::string::npos)
        << result.error().message;
    EXPECT_FALSE(fs::exists(m_dir.path() / "out/missing.bin"));
    EXPECT_FALSE(fs::exists(part_path(m_dir / "out", "missing.bin")));
    // A 404 is not retried.
    EXPECT_EQ(m_server.log(), "GET /files/missing.bin -\n");
}

TEST_F(FetchData, AStalledServerTimesOut) {
    m_settings.attempts = 1;
    auto result = fetch("/stall/blob.bin", sha256_of(m_blob));
    ASSERT_FALSE(result);
    EXPECT_EQ(result.error().code, ErrorCode::timeout) << result.error().message;
    EXPECT_NE(result.error().message.find("blob.bin"), std::string::npos);
    EXPECT_FALSE(fs::exists(final_path()));
}

// A file:// URL was refused by libcurl after the part file was created: an empty
// .NAME.part stayed. Refused first now, naming what is expected, and nothing is written.
TEST_F(FetchData, AUrlOfAnotherSchemeIsRefusedBeforeAnythingIsWritten) {
    const std::vector<std::string> urls{"file://" + (m_dir / "www/blob.bin"),
                                        "gopher://host/blob.bin", "FILE:///etc/hostname"};
    for (const std::string& url : urls) {
        FetchRequest request;
        request.what = url;
        request.to = m_dir / "out";
        auto result = fetch_data(request, m_settings, env_of({}), m_http, m_callbacks);
        ASSERT_FALSE(result) << url;
        EXPECT_EQ(result.error().code, ErrorCode::usage);
        EXPECT_NE(result.error().message.find(url + ": a "), std::string::npos)
            << result.error().message;
        EXPECT_NE(result.error().message.find("expected http, https, ftp or ftps"),
                  std::string::npos)
            << result.error().message;
        EXPECT_FALSE(fs::exists(m_dir.path() / "out")) << url;
    }
    // The CLI the same way.
    auto cli = test::run_shell(std::string(DLJOB_BINARY) + " fetch-data file://" +
                               (m_dir / "www/blob.bin") + " --to " + (m_dir / "cli"));
    EXPECT_EQ(cli.exit_code, 2) << cli.output;
    EXPECT_FALSE(fs::exists(m_dir.path() / "cli"));
}

// A failure before the first byte (here every attempt answers 503) leaves no empty part file;
// one with bytes in it stays for the rerun to resume (ARerunContinuesThePartFileOfAFailedRun).
TEST_F(FetchData, AFailureBeforeAnyByteLeavesNoPartFile) {
    m_settings.attempts = 1;
    auto result = fetch("/flaky-once/blob.bin", sha256_of(m_blob));
    ASSERT_FALSE(result);
    EXPECT_NE(result.error().message.find("HTTP 503"), std::string::npos) << result.error().message;
    EXPECT_TRUE(test::names_in(m_dir.path() / "out").empty());
}

TEST_F(FetchData, RetriesAServerErrorWithBackoff) {
    auto result = fetch("/flaky-once/blob.bin", sha256_of(m_blob));
    ASSERT_TRUE(result) << result.error().message;
    EXPECT_EQ(test::read_file(final_path()), m_blob);
    EXPECT_NE(m_notices.find("HTTP 503"), std::string::npos) << m_notices;
    EXPECT_NE(m_notices.find("retrying in"), std::string::npos) << m_notices;
}

TEST_F(FetchData, StartsOverWhenTheServerIgnoresRange) {
    test::write_file(part(), std::string(1000, 'x')); // a stale part the server cannot continue
    auto result = fetch("/no-range/blob.bin", sha256_of(m_blob));
    ASSERT_TRUE(result) << result.error().message;
    EXPECT_EQ(test::read_file(final_path()), m_blob);
}

TEST_F(FetchData, AnExistingFileWithOtherBytesIsRefusedNotReplaced) {
    test::write_file(final_path(), "mine");
    auto result = fetch("/files/blob.bin", sha256_of(m_blob));
    ASSERT_FALSE(result);
    EXPECT_NE(result.error().message.find("exists"), std::string::npos);
    EXPECT_EQ(test::read_file(final_path()), "mine");
}

TEST_F(FetchData, ASecondFetchOfTheSameFileWaitsForNoOneAndIsRefused) {
    fs::create_directories(m_dir.path() / "out");
    const int held = ::open(part().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(held, 0);
    ASSERT_EQ(::flock(held, LOCK_EX), 0); // another fetch-data, as far as the lock can tell
    auto result = fetch("/files/blob.bin", sha256_of(m_blob));
    ::close(held);
    ASSERT_FALSE(result);
    EXPECT_NE(result.error().message.find("being downloaded by another dljob fetch-data"),
              std::string::npos)
        << result.error().message;
    EXPECT_FALSE(fs::exists(final_path()));
    EXPECT_EQ(m_server.log(), ""); // nothing was requested
}

TEST_F(FetchData, CatalogFilesFromASiteMirrorAreCheckedAgainstThePublishedChecksums) {
    // The mirror serves bytes that are not MNIST: the published MD5 catches it.
    test::write_file(m_dir.path() / "www/mnist/train-images-idx3-ubyte.gz", "not mnist");
    m_settings.mirror = m_server.url("/files");
    FetchRequest request;
    request.what = "mnist";
    request.to = m_dir / "mnist";
    auto result = fetch_data(request, m_settings, env_of({}), m_http, m_callbacks);
    ASSERT_FALSE(result);
    EXPECT_NE(result.error().message.find("expected md5 f68b3c2dcbeaaa9fbdd348bbdeb94873"),
              std::string::npos)
        << result.error().message;
    EXPECT_FALSE(fs::exists(m_dir.path() / "mnist/train-images-idx3-ubyte.gz"));
    EXPECT_FALSE(fs::exists(part_path(m_dir / "mnist", "train-images-idx3-ubyte.gz")));
}

TEST_F(FetchData, UnknownDatasetListsTheKnownOnes) {
    FetchRequest request;
    request.what = "imagenet";
    auto result =
        fetch_data(request, m_settings, env_of({{"HOME", m_dir / "home"}}), m_http, m_callbacks);
    ASSERT_FALSE(result);
    EXPECT_EQ(result.error().code, ErrorCode::not_found);
    EXPECT_NE(result.error().hint.find("mnist, fashion-mnist, cifar-10"), std::string::npos);
}

/// Fails the test if anything goes to the network.
class NoNetwork final : public HttpClient {
public:
    Result<HttpOutcome> get(const HttpGet& request, const HttpCallbacks& /*callbacks*/) override {
        ADD_FAILURE() << "unexpected download of " << request.url;
        return fail(ErrorCode::internal, "no network in this test");
    }
};

TEST(FetchDataDebian, FashionMnistComesFromTheDebianPackageVerifiedWithoutNetwork) {
    const fs::path debian = "/usr/share/datasets/fashion-mnist";
    if (!fs::exists(debian / "train-images-idx3-ubyte.gz")) {
        GTEST_SKIP() << "dataset-fashion-mnist is not installed";
    }
    ScratchDir dir;
    NoNetwork http;
    FetchRequest request;
    request.what = "fashion-mnist";
    auto result = fetch_data(request, FetchSettings{}, env_of({{"HOME", dir / "home"}}), http, {});
    ASSERT_TRUE(result) << result.error().message;
    EXPECT_EQ(result->directory, dir / "home/data/fashion-mnist");
    ASSERT_EQ(result->files.size(), 4U);
    for (const auto& file : result->files) {
        EXPECT_TRUE(file.verified) << file.path;
        EXPECT_EQ(test::read_file(file.path),
                  test::read_file(debian / fs::path(file.path).filename()));
    }
}

TEST(FetchDataDebian, ADamagedPackageFileIsRefused) {
    ScratchDir dir;
    for (const auto* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}) {
        test::write_file(dir.path() / "debian/fashion-mnist" / name, "damaged");
    }
    NoNetwork http;
    FetchSettings settings;
    settings.debian_root = dir / "debian";
    FetchRequest request;
    request.what = "fashion-mnist";
    request.to = dir / "out";
    auto result = fetch_data(request, settings, env_of({}), http, {});
    ASSERT_FALSE(result);
    EXPECT_NE(
        result.error().message.find(
            "expected sha256 b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7"),
        std::string::npos)
        << result.error().message;
    EXPECT_TRUE(test::names_in(dir.path() / "out").empty());
}

TEST_F(FetchData, CommandLinePrintsTheDirectoryAndExitsNotFoundFor404) {
    const std::string out = m_dir / "cli";
    auto ok = test::run_shell("(" + std::string(DLJOB_BINARY) + " fetch-data " +
                              m_server.url("/files/blob.bin") + " --to " + out + " --sha256 " +
                              sha256_of(m_blob) + " 2>/dev/null)");
    EXPECT_EQ(ok.exit_code, 0) << ok.output;
    EXPECT_EQ(ok.output, out + "\n");
    auto missing = test::run_shell(std::string(DLJOB_BINARY) + " fetch-data " +
                                   m_server.url("/files/nope.bin") + " --to " + out);
    EXPECT_EQ(missing.exit_code, 7) << missing.output;
    EXPECT_NE(missing.output.find("not found (HTTP 404): " + m_server.url("/files/nope.bin")),
              std::string::npos)
        << missing.output;
}

} // namespace
} // namespace dljob::app
