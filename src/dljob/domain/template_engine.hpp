#pragma once
// TemplateEngine: renders a named template (templates/<name>.mustache) with a data tree. The
// interface keeps render/ independent of the template library and lets tests use their own
// template text.
//
// Values put into TemplateData are inserted verbatim (no HTML escaping): render/ validates or
// shell-quotes every value before it gets here, so the template library
// never decides how a value is escaped.

#include <dljob/domain/result.hpp>

#include <map>
#include <string>
#include <variant>
#include <vector>

namespace dljob {

class TemplateData {
public:
    using List = std::vector<TemplateData>;
    using Value = std::variant<std::string, bool, List>;

    TemplateData& set(const std::string& key, std::string value) {
        m_values[key] = std::move(value);
        return *this;
    }
    TemplateData& set(const std::string& key, const char* value) {
        m_values[key] = std::string(value);
        return *this;
    }
    TemplateData& set(const std::string& key, bool value) {
        m_values[key] = value;
        return *this;
    }
    TemplateData& set(const std::string& key, List value) {
        m_values[key] = std::move(value);
        return *this;
    }
    [[nodiscard]] const std::map<std::string, Value>& values() const noexcept { return m_values; }

private:
    std::map<std::string, Value> m_values;
};

class TemplateEngine {
public:
    virtual ~TemplateEngine() = default;
    /// Renders template `name`; `{{> part}}` includes template `part`. A missing template or a
    /// syntax error is an Error naming the template.
    virtual Result<std::string> render(const std::string& name, const TemplateData& data) = 0;
};

} // namespace dljob
