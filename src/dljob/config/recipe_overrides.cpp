#include <dljob/config/fields.hpp>
#include <dljob/config/recipe_overrides.hpp>

#include <fmt/format.h>

#include <charconv>
#include <regex>
#include <string_view>

namespace dljob::config {
namespace {

constexpr std::string_view key_pattern = R"([A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*)";

// The value was parsed on its own, so its marks say "--set:1:C" with C counted from the value's
// first character; make them point into the whole argument instead.
void point_into_argument(YamlNode& node, int argument, int value_column) {
    if (node.mark.line == 1) {
        node.mark.column += value_column - 1;
    }
    node.mark.line = argument;
    for (auto& item : node.items) {
        point_into_argument(item, argument, value_column);
    }
    for (auto& entry : node.entries) {
        if (entry.key_mark.line == 1) {
            entry.key_mark.column += value_column - 1;
        }
        entry.key_mark.line = argument;
        point_into_argument(entry.value, argument, value_column);
    }
}

// parse_yaml's own errors (syntax, size, depth, aliases) say "--set:1:C" like its marks; point
// them into the whole argument as well.
Error point_error_into_argument(Error error, int argument, int value_column) {
    constexpr std::string_view prefix = "--set:1:";
    const std::string& message = error.message;
    if (message.rfind(prefix, 0) != 0) {
        return error;
    }
    const auto colon = message.find(':', prefix.size());
    int column = 0;
    const char* const first = message.data() + prefix.size();
    const char* const last = message.data() + (colon == std::string::npos ? 0 : colon);
    if (colon == std::string::npos || std::from_chars(first, last, column).ptr != last) {
        return error;
    }
    error.message =
        fmt::format("--set:{}:{}{}", argument, column + value_column - 1, message.substr(colon));
    return error;
}

// Puts `value` at the dotted `key`, creating the mappings on the way (each marked by
// `mark_of(offset of its part in key)`, so an error about one points where it was named).
template <typename MarkOf>
Result<void> place(YamlNode& root, const std::string& key, YamlNode value, const SourceMark& at_key,
                   const MarkOf& mark_of) {
    YamlNode* node = &root;
    std::string path;
    std::size_t offset = 0; // of the current part in the key
    while (true) {
        const auto dot = key.find('.', offset);
        const std::string part =
            key.substr(offset, dot == std::string::npos ? std::string::npos : dot - offset);
        const SourceMark at_part = mark_of(offset);
        if (!node->is_mapping()) {
            if (!node->is_null()) {
                return invalid(
                    at_key, path.empty() ? "(document)" : path,
                    fmt::format("is {}, not a mapping: cannot set {}", to_string(node->kind), key));
            }
            node->kind = YamlNode::Kind::mapping; // `train:` with nothing under it
        }
        path = join_key(path, part);
        YamlNode* child = nullptr;
        for (auto& entry : node->entries) {
            if (entry.key == part) {
                child = &entry.value;
            }
        }
        if (child == nullptr) {
            YamlNode fresh;
            fresh.mark = at_part;
            node->entries.push_back(YamlNode::Entry{part, at_part, std::move(fresh)});
            child = &node->entries.back().value;
        }
        if (dot == std::string::npos) {
            *child = std::move(value);
            return {};
        }
        node = child;
        offset = dot + 1;
    }
}

Result<void> apply_one(YamlNode& root, const std::string& assignment, int argument) {
    const SourceMark at_key{"--set", argument, 1};
    const auto equals = assignment.find('=');
    const std::string key = assignment.substr(0, equals);
    if (equals == std::string::npos ||
        !std::regex_match(key, std::regex{std::string(key_pattern)})) {
        return invalid(
            at_key, key.empty() ? "(key)" : key,
            fmt::format("expected KEY=VALUE with a dotted recipe key, got '{}'", assignment),
            "e.g. --set train.max_iter=200 or --set resources.memory=4G");
    }
    const std::string text = assignment.substr(equals + 1);
    auto value = parse_yaml(text, "--set");
    if (!value) {
        return fail(
            point_error_into_argument(value.error(), argument, static_cast<int>(equals) + 2));
    }
    if (value->mark.line == 0) {
        value->mark = SourceMark{"--set", 1, 1}; // an empty value: null at the '=' + 1
    }
    point_into_argument(*value, argument, static_cast<int>(equals) + 2);

    return place(root, key, std::move(*value), at_key, [&](std::size_t offset) {
        return SourceMark{"--set", argument, static_cast<int>(offset) + 1};
    });
}

} // namespace

Result<void> apply_recipe_overrides(YamlNode& root, const std::vector<std::string>& assignments) {
    for (std::size_t i = 0; i < assignments.size(); ++i) {
        DLJOB_TRY(apply_one(root, assignments[i], static_cast<int>(i) + 1));
    }
    return {};
}

Result<void> set_recipe_value(YamlNode& root, const std::string& key, YamlNode value,
                              const SourceMark& mark) {
    if (!std::regex_match(key, std::regex{std::string(key_pattern)})) {
        return invalid(mark, key.empty() ? "(key)" : key, "expected a dotted recipe key");
    }
    return place(root, key, std::move(value), mark, [&](std::size_t) { return mark; });
}

} // namespace dljob::config
