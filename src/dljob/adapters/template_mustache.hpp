#pragma once
// TemplateEngine over kainjow-mustache, reading templates/<name>.mustache from a directory.

#include <dljob/domain/template_engine.hpp>

#include <filesystem>
#include <map>
#include <string>

namespace dljob {

class MustacheTemplates final : public TemplateEngine {
public:
    /// Templates are read from `directory`.
    explicit MustacheTemplates(std::filesystem::path directory);
    /// Templates given as text by name (tests).
    explicit MustacheTemplates(std::map<std::string, std::string> sources);

    Result<std::string> render(const std::string& name, const TemplateData& data) override;

private:
    Result<std::string> source(const std::string& name);

    std::filesystem::path m_directory;
    std::map<std::string, std::string> m_sources; // cache, and the test-given sources
};

} // namespace dljob
