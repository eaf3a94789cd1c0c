#pragma once
// A YAML document as our own small tree, with file/line/column marks on every node and key, so
// config/ can validate recipes and profiles and point at the exact spot. No yaml-cpp type here.
//
// Stricter than yaml-cpp: a mapping with the same key twice is an error (yaml-cpp keeps both
// silently and lookups see only one), and every scalar remembers whether it was quoted, so
// `gpus: "4"` can be told apart from `gpus: 4`.

#include <dljob/domain/result.hpp>

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dljob {

/// A position in a source file; line and column are 1-based.
struct SourceMark {
    std::string file;
    int line = 0;
    int column = 0;

    /// "file:line:column"
    [[nodiscard]] std::string str() const;
};

class YamlNode {
public:
    enum class Kind { null, scalar, sequence, mapping };
    struct Entry;

    Kind kind = Kind::null;
    SourceMark mark;
    std::string scalar;  // the text of a scalar (also "~"/"null" stays Kind::null)
    bool quoted = false; // scalar written in quotes: always a string, never a number or bool
    std::vector<YamlNode> items; // sequence
    std::vector<Entry> entries;  // mapping, in document order, keys unique

    [[nodiscard]] bool is_null() const noexcept { return kind == Kind::null; }
    [[nodiscard]] bool is_scalar() const noexcept { return kind == Kind::scalar; }
    [[nodiscard]] bool is_sequence() const noexcept { return kind == Kind::sequence; }
    [[nodiscard]] bool is_mapping() const noexcept { return kind == Kind::mapping; }
    /// The entry's value for `key`, or nullptr.
    [[nodiscard]] const YamlNode* find(std::string_view key) const;
};

struct YamlNode::Entry {
    std::string key;
    SourceMark key_mark;
    YamlNode value;
};

const char* to_string(YamlNode::Kind kind) noexcept;

/// Bounds on what parse_yaml accepts. Recipes and site profiles are a few kilobytes and a few
/// hundred nodes; these refuse a hostile or mistaken input before it costs gigabytes or the
/// stack. Anchors and aliases (`&a`, `*a`) share one node inside yaml-cpp, so a 1 KB document
/// can stand for 10^9 nodes: the node and text limits count every alias each time it is used.
struct YamlLimits {
    /// Bytes of the document's text.
    static constexpr std::size_t max_bytes = 1024 * 1024;
    /// Collections around any node (yaml-cpp's parser recurses once per level).
    static constexpr int max_depth = 64;
    /// Nodes (keys, values, list items) reached walking the document, aliases expanded.
    static constexpr std::size_t max_nodes = 100'000;
    /// Bytes of scalar text reached walking the document, aliases expanded.
    static constexpr std::size_t max_expanded_bytes = 8 * 1024 * 1024;
};

/// Parses one YAML document. `file` names it in marks and messages. Errors (syntax, duplicate
/// keys, non-scalar keys, more than one document, a YamlLimits bound passed) are
/// ErrorCode::config_invalid with file:line:col.
Result<YamlNode> parse_yaml(std::string_view text, const std::string& file);

/// Reads and parses a file; a missing file is ErrorCode::not_found, an unreadable one io. A
/// directory, FIFO, device or socket, or a file over YamlLimits::max_bytes, is config_invalid
/// and is refused without being read (or waited on).
Result<YamlNode> parse_yaml_file(const std::filesystem::path& path);

} // namespace dljob
