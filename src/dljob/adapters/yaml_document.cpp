#include <dljob/adapters/yaml_document.hpp>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

namespace dljob {
namespace {

SourceMark to_mark(const YAML::Mark& mark, const std::string& file) {
    // yaml-cpp counts from 0; editors and compilers count from 1.
    return SourceMark{file, mark.line + 1, mark.column + 1};
}

// Anchors and aliases can make a document a graph; a depth limit keeps a hostile file from
// exhausting the stack (reliability.md 6.1).
constexpr int max_depth = 64;

Result<YamlNode> convert(const YAML::Node& node, const std::string& file, int depth) {
    YamlNode out;
    out.mark = to_mark(node.Mark(), file);
    if (depth > max_depth) {
        return fail(ErrorCode::config_invalid,
                    fmt::format("{}: nesting deeper than {} levels", out.mark.str(), max_depth));
    }
    switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
        out.kind = YamlNode::Kind::null;
        return out;
    case YAML::NodeType::Scalar:
        out.kind = YamlNode::Kind::scalar;
        out.scalar = node.Scalar();
        // yaml-cpp tags a quoted (non-plain) scalar "!" and a plain one "?".
        out.quoted = node.Tag() == "!";
        return out;
    case YAML::NodeType::Sequence:
        out.kind = YamlNode::Kind::sequence;
        for (const auto& item : node) {
            auto child = convert(item, file, depth + 1);
            if (!child) {
                return fail(child.error());
            }
            out.items.push_back(std::move(*child));
        }
        return out;
    case YAML::NodeType::Map:
        out.kind = YamlNode::Kind::mapping;
        for (const auto& pair : node) {
            const SourceMark key_mark = to_mark(pair.first.Mark(), file);
            if (!pair.first.IsScalar()) {
                return fail(ErrorCode::config_invalid,
                            fmt::format("{}: a mapping key must be a plain word", key_mark.str()));
            }
            const std::string key = pair.first.Scalar();
            if (const YamlNode* earlier = out.find(key); earlier != nullptr) {
                SourceMark first_mark;
                for (const auto& entry : out.entries) {
                    if (entry.key == key) {
                        first_mark = entry.key_mark;
                    }
                }
                return fail(ErrorCode::config_invalid,
                            fmt::format("{}: duplicate key '{}' (first given at line {}, column "
                                        "{})",
                                        key_mark.str(), key, first_mark.line, first_mark.column),
                            "give each key once; YAML keeps only one of them");
            }
            auto value = convert(pair.second, file, depth + 1);
            if (!value) {
                return fail(value.error());
            }
            out.entries.push_back(YamlNode::Entry{key, key_mark, std::move(*value)});
        }
        return out;
    }
    return out;
}

} // namespace

std::string SourceMark::str() const {
    return fmt::format("{}:{}:{}", file, line, column);
}

const YamlNode* YamlNode::find(std::string_view key) const {
    for (const auto& entry : entries) {
        if (entry.key == key) {
            return &entry.value;
        }
    }
    return nullptr;
}

const char* to_string(YamlNode::Kind kind) noexcept {
    switch (kind) {
    case YamlNode::Kind::null:
        return "nothing";
    case YamlNode::Kind::scalar:
        return "a single value";
    case YamlNode::Kind::sequence:
        return "a list";
    case YamlNode::Kind::mapping:
        return "a mapping";
    }
    return "nothing";
}

Result<YamlNode> parse_yaml(std::string_view text, const std::string& file) {
    std::vector<YAML::Node> documents;
    try {
        documents = YAML::LoadAll(std::string(text));
    } catch (const YAML::Exception& e) {
        const SourceMark mark = to_mark(e.mark, file);
        return fail(ErrorCode::config_invalid, fmt::format("{}: {}", mark.str(), e.msg),
                    "check the YAML syntax (indentation, colons, quotes) at that position");
    }
    if (documents.size() > 1) {
        return fail(
            ErrorCode::config_invalid,
            fmt::format("{}: holds {} YAML documents; expected one", file, documents.size()),
            "remove the extra '---' separators");
    }
    if (documents.empty()) {
        YamlNode empty;
        empty.mark = SourceMark{file, 1, 1};
        return empty;
    }
    try {
        return convert(documents.front(), file, 0);
    } catch (const YAML::Exception& e) {
        const SourceMark mark = to_mark(e.mark, file);
        return fail(ErrorCode::config_invalid, fmt::format("{}: {}", mark.str(), e.msg));
    }
}

Result<YamlNode> parse_yaml_file(const std::filesystem::path& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
        return fail(ErrorCode::not_found, fmt::format("{}: no such file", path.string()));
    }
    // An ifstream opens a directory and reads nothing, which would read as an empty document.
    if (std::filesystem::is_directory(path, ec)) {
        return fail(ErrorCode::config_invalid,
                    fmt::format("{}: is a directory, not a YAML file", path.string()));
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return fail(ErrorCode::io, fmt::format("{}: cannot be read", path.string()),
                    "check the file's permissions");
    }
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return parse_yaml(buffer.str(), path.string());
}

} // namespace dljob
