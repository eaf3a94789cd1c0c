#include <dljob/adapters/yaml_document.hpp>
#include <dljob/util/files.hpp>

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <sstream>
#include <unordered_map>

namespace dljob {
namespace {

SourceMark to_mark(const YAML::Mark& mark, const std::string& file) {
    // yaml-cpp counts from 0; editors and compilers count from 1.
    return SourceMark{file, mark.line + 1, mark.column + 1};
}

// Thrown out of yaml-cpp's parser by BoundsCheck where a limit is passed; parse_yaml catches it.
struct LimitPassed {
    YAML::Mark mark;
    std::string message;
    std::string hint;
};

// Follows yaml-cpp's parse events before any node is built and counts what a walk of the
// finished document would reach: how deep each node sits, and the nodes and scalar bytes behind
// each alias every time it is used (yaml-cpp shares an aliased node, so the document parses in
// no time; the walk that converts it is what grows to gigabytes). yaml-cpp emits a collection's
// start event before it recurses into it, so throwing here also bounds the parser's own stack,
// whatever guard the installed yaml-cpp has (0.7.0 stops at 500 levels saying "bad file";
// before it, deep nesting overflowed the stack: CVE-2017-5950, CVE-2018-20573).
class BoundsCheck : public YAML::EventHandler {
public:
    void OnDocumentStart(const YAML::Mark& /*mark*/) override {}
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { leaf(mark, anchor, 0); }
    void OnScalar(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                  const std::string& value) override {
        leaf(mark, anchor, value.size());
    }
    void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
        check_depth(mark);
        if (anchor < m_anchors.size() && m_anchors[anchor].open) {
            throw LimitPassed{mark, "an alias inside the node its anchor names (a cycle)",
                              "an alias may only refer to a node that is complete before it"};
        }
        reach(mark, anchor < m_anchors.size() ? m_anchors[anchor].size : Size{1, 0});
    }
    void OnSequenceStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                         YAML::EmitterStyle::value /*style*/) override {
        open(mark, anchor);
    }
    void OnSequenceEnd() override { close(); }
    void OnMapStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                    YAML::EmitterStyle::value /*style*/) override {
        open(mark, anchor);
    }
    void OnMapEnd() override { close(); }

private:
    struct Size {
        std::size_t nodes = 0;
        std::size_t bytes = 0;
    };
    struct Anchored {
        Size size;
        bool open = false;
    };
    struct Collection {
        YAML::anchor_t anchor;
        Size reached_before;
    };

    void check_depth(const YAML::Mark& mark) const {
        if (m_open.size() > static_cast<std::size_t>(YamlLimits::max_depth)) {
            throw LimitPassed{mark,
                              fmt::format("nested deeper than {} levels, the most a document "
                                          "may have",
                                          YamlLimits::max_depth),
                              "a recipe or site profile needs a few levels; is this the right "
                              "file?"};
        }
    }
    // Both sums stay below their limits plus one alias's size, itself below the limits, so
    // they cannot overflow.
    void reach(const YAML::Mark& mark, Size size) {
        m_reached.nodes += size.nodes;
        m_reached.bytes += size.bytes;
        const char* const hint = "anchors and aliases (&name, *name) repeat what they name "
                                 "each time they are used; write the values out or use fewer";
        if (m_reached.nodes > YamlLimits::max_nodes) {
            throw LimitPassed{mark,
                              fmt::format("the document reaches more than {} nodes here, the "
                                          "most it may have (aliases count each time they are "
                                          "used)",
                                          YamlLimits::max_nodes),
                              hint};
        }
        if (m_reached.bytes > YamlLimits::max_expanded_bytes) {
            throw LimitPassed{mark,
                              fmt::format("the document reaches more than {} bytes of values "
                                          "here, the most it may have (aliases count each time "
                                          "they are used)",
                                          YamlLimits::max_expanded_bytes),
                              hint};
        }
    }
    void leaf(const YAML::Mark& mark, YAML::anchor_t anchor, std::size_t bytes) {
        check_depth(mark);
        reach(mark, Size{1, bytes});
        if (anchor != YAML::NullAnchor) {
            anchored(anchor).size = Size{1, bytes};
        }
    }
    void open(const YAML::Mark& mark, YAML::anchor_t anchor) {
        check_depth(mark);
        const Size before = m_reached;
        reach(mark, Size{1, 0});
        if (anchor != YAML::NullAnchor) {
            anchored(anchor).open = true;
        }
        m_open.push_back(Collection{anchor, before});
    }
    void close() {
        const Collection done = m_open.back();
        m_open.pop_back();
        if (done.anchor != YAML::NullAnchor) {
            anchored(done.anchor) = Anchored{Size{m_reached.nodes - done.reached_before.nodes,
                                                  m_reached.bytes - done.reached_before.bytes},
                                             false};
        }
    }
    Anchored& anchored(YAML::anchor_t anchor) {
        // yaml-cpp numbers a document's anchors 1, 2, 3... in order of appearance.
        if (anchor >= m_anchors.size()) {
            m_anchors.resize(anchor + 1);
        }
        return m_anchors[anchor];
    }

    std::vector<Collection> m_open;
    Size m_reached;
    std::vector<Anchored> m_anchors;
};

// The line and column `offset` bytes into `text`.
YAML::Mark mark_at(std::string_view text, std::size_t offset) {
    YAML::Mark mark;
    for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++mark.line;
            mark.column = 0;
        } else {
            ++mark.column;
        }
    }
    return mark;
}

Result<YamlNode> convert(const YAML::Node& node, const std::string& file) {
    YamlNode out;
    out.mark = to_mark(node.Mark(), file);
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
            auto child = convert(item, file);
            if (!child) {
                return fail(child.error());
            }
            out.items.push_back(std::move(*child));
        }
        return out;
    case YAML::NodeType::Map:
        out.kind = YamlNode::Kind::mapping;
        // By key, so a mapping of many keys is checked in linear time, not quadratic.
        std::unordered_map<std::string, SourceMark> seen;
        for (const auto& pair : node) {
            const SourceMark key_mark = to_mark(pair.first.Mark(), file);
            if (!pair.first.IsScalar()) {
                return fail(ErrorCode::config_invalid,
                            fmt::format("{}: a mapping key must be a plain word", key_mark.str()));
            }
            const std::string key = pair.first.Scalar();
            if (const auto [earlier, fresh] = seen.emplace(key, key_mark); !fresh) {
                const SourceMark& first_mark = earlier->second;
                return fail(ErrorCode::config_invalid,
                            fmt::format("{}: duplicate key '{}' (first given at line {}, column "
                                        "{})",
                                        key_mark.str(), key, first_mark.line, first_mark.column),
                            "give each key once; YAML keeps only one of them");
            }
            auto value = convert(pair.second, file);
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
    if (text.size() > YamlLimits::max_bytes) {
        return fail(ErrorCode::config_invalid,
                    fmt::format("{}: the document goes on past {} bytes (1 MiB), the most it "
                                "may have",
                                to_mark(mark_at(text, YamlLimits::max_bytes), file).str(),
                                YamlLimits::max_bytes),
                    "a recipe or site profile is a few kilobytes; is this the right file?");
    }
    const std::string owned(text);
    std::vector<YAML::Node> documents;
    try {
        // First the bounds, from the parse events alone; only a document within them is built.
        std::istringstream stream(owned);
        YAML::Parser parser(stream);
        BoundsCheck bounds;
        while (parser.HandleNextDocument(bounds)) {
        }
        documents = YAML::LoadAll(owned);
    } catch (const LimitPassed& e) {
        return fail(ErrorCode::config_invalid,
                    fmt::format("{}: {}", to_mark(e.mark, file).str(), e.message), e.hint);
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
        return convert(documents.front(), file);
    } catch (const YAML::Exception& e) {
        const SourceMark mark = to_mark(e.mark, file);
        return fail(ErrorCode::config_invalid, fmt::format("{}: {}", mark.str(), e.msg));
    }
}

Result<YamlNode> parse_yaml_file(const std::filesystem::path& path) {
    auto read = util::read_regular_file(path, YamlLimits::max_bytes);
    switch (read.status) {
    case util::BoundedRead::Status::ok:
        return parse_yaml(read.content, path.string());
    case util::BoundedRead::Status::missing:
        return fail(ErrorCode::not_found, fmt::format("{}: no such file", path.string()));
    case util::BoundedRead::Status::not_regular:
        return fail(ErrorCode::config_invalid,
                    fmt::format("{}: is {}, not a YAML file", path.string(), read.what),
                    "give the path of a regular file; recipes and site profiles are not read "
                    "from pipes, devices or sockets");
    case util::BoundedRead::Status::too_large:
        // read.size is stat's size, or max_bytes + 1 for a file that grew while being read.
        return fail(ErrorCode::config_invalid,
                    fmt::format("{}: {}more than {} bytes (1 MiB), the most a YAML document may "
                                "have",
                                path.string(),
                                read.size > YamlLimits::max_bytes + 1
                                    ? fmt::format("{} bytes, ", read.size)
                                    : std::string{},
                                YamlLimits::max_bytes),
                    "a recipe or site profile is a few kilobytes; is this the right file?");
    case util::BoundedRead::Status::unreadable:
        break;
    }
    return fail(ErrorCode::io, fmt::format("{}: cannot be read: {}", path.string(), read.what),
                "check the file's permissions");
}

} // namespace dljob
