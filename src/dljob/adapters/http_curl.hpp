#pragma once
// HttpClient over libcurl. Proxies come from the environment as libcurl reads them
// (http_proxy, https_proxy, no_proxy; lower-case http_proxy only, a CGI safety rule of
// libcurl's), redirects are followed, and only http, https, ftp and ftps are allowed.

#include <dljob/domain/http_client.hpp>

#include <memory>

namespace dljob::adapters {

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
