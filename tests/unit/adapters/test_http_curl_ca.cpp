// Where a bundled libcurl is told to find CA certificates on each family of Linux. The host is
// swapped for maps of variables, files and folders, so RHEL's and SUSE's layouts are checked
// here on Debian; tests/release/release_test.sh does it for real on a RHEL-style path.
#include <dljob/adapters/http_curl.hpp>

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

namespace dljob::adapters {
namespace {

struct Host {
    std::map<std::string, std::string> env;
    std::set<std::string> files;
    std::set<std::string> dirs;

    CaCertificates find() const {
        return find_ca_certificates(
            [this](const char* name) -> const char* {
                const auto it = env.find(name);
                return it == env.end() ? nullptr : it->second.c_str();
            },
            [this](const std::string& path) { return files.count(path) > 0; },
            [this](const std::string& path) { return dirs.count(path) > 0; });
    }
};

TEST(CaCertificates, DebianBundleAndHashedFolder) {
    const Host host{{}, {"/etc/ssl/certs/ca-certificates.crt"}, {"/etc/ssl/certs"}};
    const auto ca = host.find();
    EXPECT_EQ(ca.file, "/etc/ssl/certs/ca-certificates.crt");
    EXPECT_EQ(ca.directory, "/etc/ssl/certs");
    EXPECT_TRUE(ca.error.empty());
}

TEST(CaCertificates, RhelBundleWhereDebiansIsMissing) {
    const Host host{{}, {"/etc/pki/tls/certs/ca-bundle.crt"}, {}};
    const auto ca = host.find();
    EXPECT_EQ(ca.file, "/etc/pki/tls/certs/ca-bundle.crt");
    EXPECT_EQ(ca.directory, "");
}

TEST(CaCertificates, SuseBundle) {
    const Host host{{}, {"/etc/ssl/ca-bundle.pem"}, {"/etc/ssl/certs"}};
    EXPECT_EQ(host.find().file, "/etc/ssl/ca-bundle.pem");
}

TEST(CaCertificates, SslCertFileWinsOverTheDistribution) {
    const Host host{{{"SSL_CERT_FILE", "/home/u/site-ca.pem"}},
                    {"/home/u/site-ca.pem", "/etc/ssl/certs/ca-certificates.crt"},
                    {"/etc/ssl/certs"}};
    const auto ca = host.find();
    EXPECT_EQ(ca.file, "/home/u/site-ca.pem");
    // A variable the user set is the whole answer: no distribution folder is mixed in.
    EXPECT_EQ(ca.directory, "");
}

TEST(CaCertificates, CurlCaBundleWinsOverSslCertFile) {
    const Host host{
        {{"CURL_CA_BUNDLE", "/a.pem"}, {"SSL_CERT_FILE", "/b.pem"}}, {"/a.pem", "/b.pem"}, {}};
    EXPECT_EQ(host.find().file, "/a.pem");
}

TEST(CaCertificates, SslCertDirAlone) {
    const Host host{{{"SSL_CERT_DIR", "/opt/certs"}}, {"/etc/ssl/ca-bundle.pem"}, {"/opt/certs"}};
    const auto ca = host.find();
    EXPECT_EQ(ca.file, "");
    EXPECT_EQ(ca.directory, "/opt/certs");
}

TEST(CaCertificates, AVariableNamingAMissingFileIsAnError) {
    const Host host{{{"SSL_CERT_FILE", "/nowhere.pem"}},
                    {"/etc/ssl/certs/ca-certificates.crt"},
                    {"/etc/ssl/certs"}};
    const auto ca = host.find();
    EXPECT_NE(ca.error.find("SSL_CERT_FILE=/nowhere.pem"), std::string::npos) << ca.error;
    EXPECT_EQ(ca.file, "");
}

TEST(CaCertificates, NothingFoundListsEveryPlaceLookedAt) {
    const Host host{};
    const auto ca = host.find();
    EXPECT_EQ(ca.file, "");
    EXPECT_EQ(ca.directory, "");
    EXPECT_TRUE(ca.error.empty());
    const std::set<std::string> tried(ca.tried.begin(), ca.tried.end());
    for (const char* path :
         {"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
          "/etc/ssl/ca-bundle.pem", "/etc/ssl/certs"}) {
        EXPECT_EQ(tried.count(path), 1U) << path;
    }
}

} // namespace
} // namespace dljob::adapters
