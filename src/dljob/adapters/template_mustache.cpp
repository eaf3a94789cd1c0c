#include <dljob/adapters/template_mustache.hpp>

#include <fmt/format.h>
#include <kainjow/mustache.hpp>

#include <fstream>
#include <regex>
#include <sstream>

namespace dljob {
namespace {

namespace mu = kainjow::mustache;

mu::data to_mustache(const TemplateData& data) {
    mu::data out{mu::data::type::object};
    for (const auto& [key, value] : data.values()) {
        if (const auto* text = std::get_if<std::string>(&value)) {
            out.set(key, mu::data{*text});
        } else if (const auto* flag = std::get_if<bool>(&value)) {
            out.set(key, mu::data{*flag});
        } else if (const auto* list = std::get_if<TemplateData::List>(&value)) {
            mu::data items{mu::data::type::list};
            for (const auto& item : *list) {
                items.push_back(to_mustache(item));
            }
            out.set(key, items);
        }
    }
    return out;
}

} // namespace

MustacheTemplates::MustacheTemplates(std::filesystem::path directory)
    : m_directory(std::move(directory)) {}

MustacheTemplates::MustacheTemplates(std::map<std::string, std::string> sources)
    : m_sources(std::move(sources)) {}

Result<std::string> MustacheTemplates::source(const std::string& name) {
    if (const auto it = m_sources.find(name); it != m_sources.end()) {
        return it->second;
    }
    if (m_directory.empty()) {
        return fail(ErrorCode::internal, fmt::format("template '{}' is not defined", name));
    }
    const auto path = m_directory / (name + ".mustache");
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return fail(ErrorCode::not_found, fmt::format("template {} cannot be read", path.string()),
                    "set DLJOB_TEMPLATES_DIR to the templates/ folder of a dljob installation");
    }
    std::ostringstream buffer;
    buffer << in.rdbuf();
    m_sources[name] = buffer.str();
    return m_sources[name];
}

Result<std::string> MustacheTemplates::render(const std::string& name, const TemplateData& data) {
    auto text = source(name);
    if (!text) {
        return fail(text.error());
    }
    mu::data context = to_mustache(data);
    // Partials named in the template ({{> name}}) are read up front: a partial callback cannot
    // report an error, and a missing partial must not render as nothing.
    static const std::regex partial_re{R"(\{\{>\s*([A-Za-z0-9_.-]+)\s*\}\})"};
    std::vector<std::string> pending{*text};
    while (!pending.empty()) {
        const std::string current = pending.back();
        pending.pop_back();
        for (auto it = std::sregex_iterator(current.begin(), current.end(), partial_re);
             it != std::sregex_iterator(); ++it) {
            const std::string partial_name = (*it)[1].str();
            if (context.get(partial_name) != nullptr) {
                continue;
            }
            auto partial_text = source(partial_name);
            if (!partial_text) {
                return fail(partial_text.error());
            }
            const std::string& body = *partial_text;
            context.set(partial_name, mu::data{mu::partial{[body] { return body; }}});
            pending.push_back(body);
        }
    }
    mu::mustache tmpl{*text};
    if (!tmpl.is_valid()) {
        return fail(ErrorCode::internal,
                    fmt::format("template '{}': {}", name, tmpl.error_message()));
    }
    tmpl.set_custom_escape([](const std::string& value) { return value; });
    std::string rendered = tmpl.render(context);
    if (!tmpl.is_valid()) {
        return fail(ErrorCode::internal,
                    fmt::format("template '{}': {}", name, tmpl.error_message()));
    }
    return rendered;
}

} // namespace dljob
