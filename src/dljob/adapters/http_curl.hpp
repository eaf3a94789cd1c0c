#pragma once
// HttpClient over libcurl. Proxies come from the environment as libcurl reads them
// (http_proxy, https_proxy, no_proxy; lower-case http_proxy only, a CGI safety rule of
// libcurl's), redirects are followed, and only http, https, ftp and ftps are allowed.

#include <dljob/domain/http_client.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dljob::adapters {

/// Where the CA certificates for https are: libcurl looks only where its build machine kept
/// them, which a bundled libcurl carries to hosts that keep them elsewhere (docs/install.md).
struct CaCertificates {
    std::string file;               // CURLOPT_CAINFO; empty: none found
    std::string directory;          // CURLOPT_CAPATH; empty: none found
    std::vector<std::string> tried; // every place looked at, in order
    std::string error;              // a variable that names what is not there
};

/// CURL_CA_BUNDLE or SSL_CERT_FILE (a file), SSL_CERT_DIR (a hashed folder), else the first
/// distribution bundle that exists (Debian, RHEL, SUSE, Alpine) and /etc/ssl/certs. A variable
/// that names a missing file is an error, never a silent fall-back.
CaCertificates find_ca_certificates(const std::function<const char*(const char*)>& getenv,
                                    const std::function<bool(const std::string&)>& readable_file,
                                    const std::function<bool(const std::string&)>& readable_dir);

class CurlHttpClient final : public HttpClient {
public:
    CurlHttpClient();
    ~CurlHttpClient() override;
    CurlHttpClient(const CurlHttpClient&) = delete;
    CurlHttpClient& operator=(const CurlHttpClient&) = delete;
    CurlHttpClient(CurlHttpClient&&) = delete;
    CurlHttpClient& operator=(CurlHttpClient&&) = delete;

    Result<HttpOutcome> get(const HttpGet& request, const HttpCallbacks& callbacks) override;
};

} // namespace dljob::adapters
