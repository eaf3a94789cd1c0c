// The only engine file that sees yaml-cpp: turns a config file into a NetConfig, with errors
// that name the file, line and key, and the valid choices. It checks the document's form (known
// keys, value types); the values' ranges and choices are validate_config's, the one check that
// prototxt configs go through too (config/config_validate.cpp).

#include "config/config_readers.hpp"
#include "io/regular_file.hpp"
#include "net/layer_kind.hpp"

#include <dl/config.hpp>
#include <dl/error.hpp>

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <type_traits>
#include <variant>
#include <vector>

namespace dl {
namespace {

// Function-local statics: built on first use, not before main (cert-err58-cpp).
const std::vector<std::string>& common_keys() {
    static const std::vector<std::string> values = {"name",  "type",    "bottom",  "top",
                                                    "phase", "include", "exclude", "param"};
    return values;
}
// The solver's keys are the rule table's (batch_size is the Data layers').
const std::vector<std::string>& solver_keys() {
    static const std::vector<std::string> values = [] {
        std::vector<std::string> keys;
        for (const auto& rule : solver_key_rules()) {
            if (rule.key != "batch_size") {
                keys.push_back(rule.key);
            }
        }
        return keys;
    }();
    return values;
}
const std::vector<std::string>& filler_keys() {
    static const std::vector<std::string> values = {"type", "value", "min",           "max",
                                                    "mean", "std",   "variance_norm", "sparse"};
    return values;
}

// Bounds on a config document (docs/engine.md, "Config format"). LeNet's config is 3 KB, about
// 400 nodes, 4 levels deep; these leave room for nets a hundred times larger and still keep a
// hostile file (a billion laughs: a 1 KB file of nested aliases) to milliseconds and kilobytes.
constexpr std::uint64_t k_max_config_bytes = 1U << 20;
constexpr std::size_t k_max_depth = 32;
constexpr std::uint64_t k_max_nodes = 100000; // counting each alias as the nodes it stands for

/// One pass over the parser's events before yaml-cpp builds a tree: refuses duplicate keys
/// (yaml-cpp keeps both and `node[key]` finds the first, so `base_lr: 0.01` then `base_lr: 10`
/// trained at 0.01 without a word), nesting beyond k_max_depth, and aliases that expand beyond
/// k_max_nodes. Throws dl::Error(config) with file:line:column.
class DocumentScan final : public YAML::EventHandler {
public:
    explicit DocumentScan(std::filesystem::path file) : m_file(std::move(file)) {}

    void OnDocumentStart(const YAML::Mark& /*mark*/) override {}
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
        leaf(mark, anchor, "~", 1);
    }
    void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
        const auto size = m_anchor_nodes.find(anchor);
        const auto value = m_anchor_scalars.find(anchor);
        leaf(mark, YAML::NullAnchor,
             value != m_anchor_scalars.end() ? std::optional<std::string>(value->second)
                                             : std::nullopt,
             size != m_anchor_nodes.end() ? size->second : 1);
    }
    void OnScalar(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                  const std::string& value) override {
        leaf(mark, anchor, value, 1);
    }
    void OnSequenceStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                         YAML::EmitterStyle::value /*style*/) override {
        open(mark, anchor, false);
    }
    void OnSequenceEnd() override { close(); }
    void OnMapStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                    YAML::EmitterStyle::value /*style*/) override {
        open(mark, anchor, true);
    }
    void OnMapEnd() override { close(); }

private:
    struct Frame {
        bool map = false;
        bool expecting_key = true;
        YAML::anchor_t anchor = YAML::NullAnchor;
        std::uint64_t first_node = 0;
        std::map<std::string, YAML::Mark> keys; // maps only: each key and where it was given
    };

    [[noreturn]] void fail(const YAML::Mark& mark, const std::string& message) const {
        throw Error(ErrorKind::config, fmt::format("{}:{}:{}: {}", m_file.string(), mark.line + 1,
                                                   mark.column + 1, message));
    }

    void count(const YAML::Mark& mark, std::uint64_t nodes) {
        m_nodes += std::min(nodes, k_max_nodes + 1);
        if (m_nodes > k_max_nodes) {
            fail(mark, fmt::format("the document has more than {} nodes, counting each alias as "
                                   "the nodes it repeats (nested anchors?)",
                                   k_max_nodes));
        }
    }

    // A scalar, null or alias: a map key when its map expects one (`value` unknown for an
    // alias of a collection).
    void leaf(const YAML::Mark& mark, YAML::anchor_t anchor,
              const std::optional<std::string>& value, std::uint64_t nodes) {
        count(mark, nodes);
        if (anchor != YAML::NullAnchor) {
            m_anchor_nodes[anchor] = 1;
            if (value) {
                m_anchor_scalars[anchor] = *value;
            }
        }
        if (!m_stack.empty() && m_stack.back().map && m_stack.back().expecting_key && value) {
            auto& keys = m_stack.back().keys;
            if (const auto earlier = keys.find(*value); earlier != keys.end()) {
                fail(mark,
                     fmt::format("duplicate key '{}' (first given at line {}, column {}); "
                                 "YAML keeps only one of them: give each key once",
                                 *value, earlier->second.line + 1, earlier->second.column + 1));
            }
            keys.emplace(*value, mark);
        }
        done();
    }

    void open(const YAML::Mark& mark, YAML::anchor_t anchor, bool map) {
        count(mark, 1);
        if (m_stack.size() >= k_max_depth) {
            fail(mark, fmt::format("nesting deeper than {} levels", k_max_depth));
        }
        Frame frame;
        frame.map = map;
        frame.anchor = anchor;
        frame.first_node = m_nodes - 1;
        m_stack.push_back(std::move(frame));
    }

    void close() {
        const Frame frame = std::move(m_stack.back());
        m_stack.pop_back();
        if (frame.anchor != YAML::NullAnchor) {
            m_anchor_nodes[frame.anchor] = m_nodes - frame.first_node;
        }
        done();
    }

    // A node ended: its map now expects a value after a key, or a key after a value.
    void done() {
        if (!m_stack.empty() && m_stack.back().map) {
            m_stack.back().expecting_key = !m_stack.back().expecting_key;
        }
    }

    std::filesystem::path m_file;
    std::vector<Frame> m_stack;
    std::uint64_t m_nodes = 0;
    std::map<YAML::anchor_t, std::uint64_t> m_anchor_nodes;
    std::map<YAML::anchor_t, std::string> m_anchor_scalars;
};

/// Runs DocumentScan over the text; also refuses a second document, which YAML::Load ignores.
void scan_document(const std::string& text, const std::filesystem::path& file) {
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentScan scan(file);
    if (parser.HandleNextDocument(scan)) {
        DocumentScan rest(file);
        if (parser.HandleNextDocument(rest)) {
            throw Error(ErrorKind::config,
                        fmt::format("{}: holds more than one YAML document ('---'); expected one",
                                    file.string()));
        }
    }
}

class Reader {
public:
    explicit Reader(std::filesystem::path file) : m_file(std::move(file)) {}

    [[noreturn]] void fail(const YAML::Node& node, const std::string& message) const {
        const int line = node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
        throw Error(ErrorKind::config, fmt::format("{}:{}: {}", m_file.string(), line, message));
    }

    void check_keys(const YAML::Node& map, const std::vector<std::string>& valid,
                    const std::string& where) const {
        for (const auto& item : map) {
            const auto key = item.first.as<std::string>();
            if (std::find(valid.begin(), valid.end(), key) == valid.end()) {
                fail(item.first, fmt::format("unknown key '{}' in {} (valid keys: {})", key, where,
                                             join_list(valid)));
            }
        }
    }

    template <typename T>
    void read(const YAML::Node& map, const std::string& key, T& out,
              const std::string& where) const {
        const YAML::Node node = map[key];
        if (!node) {
            return;
        }
        try {
            out = node.as<T>();
        } catch (const YAML::Exception&) {
            fail(node, fmt::format("key '{}' in {}: '{}' is not a valid {}", key, where,
                                   node.IsScalar() ? node.Scalar() : std::string("<not a scalar>"),
                                   type_name<T>()));
        }
    }

    void read_choice(const YAML::Node& map, const std::string& key, std::string& out,
                     const std::vector<std::string>& choices, const std::string& where) const {
        read(map, key, out, where);
        if (std::find(choices.begin(), choices.end(), out) == choices.end()) {
            fail(map[key] ? map[key] : map,
                 fmt::format("key '{}' in {}: unknown value '{}' (valid: {})", key, where, out,
                             join_list(choices)));
        }
    }

    std::vector<std::string> read_names(const YAML::Node& map, const std::string& key,
                                        const std::string& where) const {
        const YAML::Node node = map[key];
        std::vector<std::string> names;
        if (!node) {
            return names;
        }
        if (node.IsScalar()) {
            names.push_back(node.as<std::string>());
            return names;
        }
        if (!node.IsSequence()) {
            fail(node, fmt::format("key '{}' in {} must be a name or a list of names", key, where));
        }
        for (const auto& item : node) {
            names.push_back(item.as<std::string>());
        }
        return names;
    }

    FillerConfig read_filler(const YAML::Node& map, const std::string& key, FillerConfig filler,
                             const std::string& where) const {
        const YAML::Node node = map[key];
        if (!node) {
            return filler;
        }
        const std::string here = fmt::format("{} of {}", key, where);
        if (!node.IsMap()) {
            fail(node, fmt::format("key '{}' in {} must be a map with a 'type'", key, where));
        }
        check_keys(node, filler_keys(), here);
        read(node, "type", filler.type, here);
        read(node, "value", filler.value, here);
        read(node, "min", filler.min, here);
        read(node, "max", filler.max, here);
        read(node, "mean", filler.mean, here);
        read(node, "std", filler.std, here);
        read(node, "variance_norm", filler.variance_norm, here);
        read(node, "sparse", filler.sparse, here);
        return filler;
    }

private:
    template <typename T> static std::string type_name() {
        if constexpr (std::is_same_v<T, int> || std::is_same_v<T, unsigned>) {
            return "integer";
        } else if constexpr (std::is_same_v<T, float>) {
            return "number";
        } else if constexpr (std::is_same_v<T, bool>) {
            return "boolean (true or false)";
        } else {
            return "string";
        }
    }
    std::filesystem::path m_file;
};

SourceMark mark_of(const YAML::Node& node) {
    return node.Mark().line >= 0 ? SourceMark{node.Mark().line + 1, node.Mark().column + 1, {}}
                                 : SourceMark{};
}

/// Where each key of `map` was given (a filler's keys as "<key>.<its key>"), for
/// validate_config's messages: the key's own line and column, as the prototxt reader marks a
/// field's name.
void record_marks(const YAML::Node& map, SourceMarks& marks) {
    for (const auto& item : map) {
        const auto key = item.first.as<std::string>();
        marks[key] = mark_of(item.first);
        if (item.second.IsMap()) {
            for (const auto& sub : item.second) {
                marks[key + "." + sub.first.as<std::string>()] = mark_of(sub.first);
            }
        }
    }
}

// `param: [{lr_mult, decay_mult}, ...]`, one per parameter blob.
// Caffe's NetStateRules, as a list of maps: {phase, min_level, max_level, stage, not_stage}.
std::vector<NetStateRule> read_rules(const Reader& reader, const YAML::Node& node,
                                     const std::string& key, const std::string& where) {
    std::vector<NetStateRule> rules;
    const YAML::Node list = node[key];
    if (!list) {
        return rules;
    }
    if (!list.IsSequence()) {
        reader.fail(list, fmt::format("key '{}' in {} must be a list of rules ({{phase, "
                                      "min_level, max_level, stage, not_stage}})",
                                      key, where));
    }
    for (const auto& item : list) {
        const std::string here = fmt::format("a rule of {} in {}", key, where);
        if (!item.IsMap()) {
            reader.fail(item, here + " must be a map");
        }
        reader.check_keys(item, {"phase", "min_level", "max_level", "stage", "not_stage"}, here);
        NetStateRule rule;
        if (item["phase"]) {
            std::string phase;
            reader.read_choice(item, "phase", phase, {"train", "test"}, here);
            rule.phase = phase == "train" ? Phase::train : Phase::test;
        }
        for (const auto& [name, level] :
             {std::pair{"min_level", &rule.min_level}, std::pair{"max_level", &rule.max_level}}) {
            if (item[name]) {
                int value = 0;
                reader.read(item, name, value, here);
                *level = value;
            }
        }
        rule.stages = reader.read_names(item, "stage", here);
        rule.not_stages = reader.read_names(item, "not_stage", here);
        rules.push_back(std::move(rule));
    }
    return rules;
}

std::vector<ParamSpec> read_param_specs(const Reader& reader, const YAML::Node& node,
                                        const std::string& where) {
    std::vector<ParamSpec> specs;
    if (const YAML::Node params = node["param"]) {
        if (!params.IsSequence()) {
            reader.fail(params, fmt::format("key 'param' in {} must be a list of "
                                            "{{lr_mult, decay_mult}} maps",
                                            where));
        }
        for (const auto& item : params) {
            ParamSpec spec;
            reader.check_keys(item, {"lr_mult", "decay_mult", "name"}, "param of " + where);
            reader.read(item, "lr_mult", spec.lr_mult, where);
            reader.read(item, "decay_mult", spec.decay_mult, where);
            reader.read(item, "name", spec.name, where);
            specs.push_back(spec);
        }
    }
    return specs;
}

// A layer's own keys, as its kind lists them (net/layers/); absent ones keep their defaults.
class YamlFields final : public FieldVisitor {
public:
    YamlFields(const Reader& reader, const YAML::Node& node, std::string where)
        : m_reader(reader), m_node(node), m_where(std::move(where)) {}

    void integer(const Field& f, int& value) override {
        m_reader.read(m_node, f.key, value, m_where);
    }
    void number(const Field& f, float& value) override {
        m_reader.read(m_node, f.key, value, m_where);
    }
    void flag(const Field& f, bool& value) override {
        m_reader.read(m_node, f.key, value, m_where);
    }
    void flag(const Field& f, std::optional<bool>& value) override {
        if (m_node[f.key]) {
            bool given = false;
            m_reader.read(m_node, f.key, given, m_where);
            value = given;
        }
    }
    void text(const Field& f, std::string& value) override {
        m_reader.read(m_node, f.key, value, m_where);
    }
    void numbers(const Field& f, std::vector<float>& value) override {
        if (const YAML::Node node = m_node[f.key]) {
            try {
                value = node.IsScalar() ? std::vector<float>{node.as<float>()}
                                        : node.as<std::vector<float>>();
            } catch (const YAML::Exception&) {
                fail_list(node, f);
            }
        }
    }
    void integers(const Field& f, std::vector<int>& value) override {
        if (const YAML::Node node = m_node[f.key]) {
            try {
                value = node.as<std::vector<int>>();
            } catch (const YAML::Exception&) {
                fail_list(node, f);
            }
        }
    }
    void filler(const Field& f, FillerConfig& value) override {
        value = m_reader.read_filler(m_node, f.key, value, m_where);
    }

private:
    [[noreturn]] void fail_list(const YAML::Node& node, const Field& f) const {
        m_reader.fail(node, fmt::format("key '{}' in {} must be {}", f.key, m_where,
                                        f.expected != nullptr ? f.expected : "a list"));
    }
    const Reader& m_reader;
    const YAML::Node& m_node;
    std::string m_where;
};

LayerConfig read_layer(const Reader& reader, const YAML::Node& node, std::size_t index) {
    LayerConfig layer;
    layer.line = node.Mark().line + 1;
    if (!node.IsMap()) {
        reader.fail(node, fmt::format("layers[{}] must be a map with 'name' and 'type'", index));
    }
    if (!node["name"]) {
        reader.fail(node, fmt::format("layers[{}] has no 'name'", index));
    }
    layer.name = node["name"].as<std::string>();
    const std::string where = fmt::format("layer '{}'", layer.name);
    if (!node["type"]) {
        reader.fail(node, fmt::format("{} has no 'type' (valid types: {})", where,
                                      join_list(layer_type_names())));
    }
    layer.type = node["type"].as<std::string>();
    const LayerKind* kind = find_layer_kind(layer.type);
    if (kind == nullptr) {
        reader.fail(node["type"], fmt::format("key 'type' in {}: unknown layer type '{}' (valid "
                                              "types: {})",
                                              where, layer.type, join_list(layer_type_names())));
    }
    std::vector<std::string> valid = common_keys();
    const std::vector<std::string> own = layer_keys(*kind);
    valid.insert(valid.end(), own.begin(), own.end());
    reader.check_keys(node, valid, where + " of type " + layer.type);
    record_marks(node, layer.marks);

    layer.bottoms = reader.read_names(node, "bottom", where);
    layer.tops = reader.read_names(node, "top", where);
    if (node["phase"]) {
        std::string phase;
        reader.read_choice(node, "phase", phase, {"train", "test"}, where);
        layer.phase = phase == "train" ? Phase::train : Phase::test;
    }
    layer.include = read_rules(reader, node, "include", where);
    layer.exclude = read_rules(reader, node, "exclude", where);
    layer.params = read_param_specs(reader, node, where);
    if (kind->defaults != nullptr) {
        kind->defaults(layer);
    }
    YamlFields fields(reader, node, where);
    kind->fields(fields, layer);
    return layer;
}

// Caffe's test_state with its test_iter: a list of maps {test_iter, level, stage}.
std::vector<SolverConfig::TestNet> read_test_nets(const Reader& reader, const YAML::Node& node) {
    std::vector<SolverConfig::TestNet> nets;
    const YAML::Node list = node["test_state"];
    if (!list) {
        return nets;
    }
    if (!list.IsSequence() || list.size() == 0) {
        reader.fail(list, "key 'test_state' in solver must be a list of test nets ({test_iter, "
                          "level, stage})");
    }
    for (const auto& item : list) {
        const std::string here = "a test_state of solver";
        if (!item.IsMap() || !item["test_iter"]) {
            reader.fail(item, here + " must be a map with a 'test_iter'");
        }
        reader.check_keys(item, {"test_iter", "level", "stage"}, here);
        SolverConfig::TestNet net;
        reader.read(item, "test_iter", net.test_iter, here);
        reader.read(item, "level", net.state.level, here);
        net.state.stages = reader.read_names(item, "stage", here);
        nets.push_back(std::move(net));
    }
    return nets;
}

SolverConfig read_solver(const Reader& reader, const YAML::Node& node, SourceMarks& marks) {
    SolverConfig solver;
    const std::string where = "solver";
    if (!node.IsMap()) {
        reader.fail(node, "'solver' must be a map");
    }
    std::vector<std::string> keys = solver_keys();
    keys.emplace_back("test_state");
    keys.emplace_back("train_state");
    reader.check_keys(node, keys, where);
    record_marks(node, marks);
    solver.test_nets = read_test_nets(reader, node);
    if (const YAML::Node state = node["train_state"]) {
        const std::string here = "train_state of solver";
        if (!state.IsMap()) {
            reader.fail(state, "key 'train_state' in solver must be a map {level, stage}");
        }
        reader.check_keys(state, {"level", "stage"}, here);
        reader.read(state, "level", solver.train_state.level, here);
        solver.train_state.stages = reader.read_names(state, "stage", here);
    }
    for (const SolverKeyRule& rule : solver_key_rules()) {
        if (!node[rule.key]) {
            continue;
        }
        std::visit(
            [&](auto member) {
                using Member = decltype(member);
                if constexpr (std::is_same_v<Member, std::vector<int> SolverConfig::*>) {
                    // One value or a list (Caffe repeats the key; YAML lists it).
                    std::vector<int>& values = solver.*member;
                    const YAML::Node steps = node[rule.key];
                    if (steps.IsScalar()) {
                        values.push_back(steps.as<int>());
                    } else {
                        for (const auto& step : steps) {
                            values.push_back(step.as<int>());
                        }
                    }
                } else if constexpr (!std::is_same_v<Member, std::monostate>) {
                    reader.read(node, rule.key, solver.*member, where);
                }
            },
            solver_member(rule.key));
    }
    if (!solver.test_nets.empty()) {
        if (node["test_iter"]) {
            reader.fail(node["test_iter"], "give test_iter in each test_state, not beside them");
        }
        solver.test_iter = solver.test_nets.front().test_iter;
    }
    return solver;
}

} // namespace

NetConfig read_yaml_config(const std::string& text,
                           const std::filesystem::path& file_for_messages) {
    const Reader reader(file_for_messages);
    if (text.size() > k_max_config_bytes) {
        throw Error(ErrorKind::config,
                    fmt::format("{}: {} bytes, more than the {} bytes a config file may have",
                                file_for_messages.string(), text.size(), k_max_config_bytes));
    }
    YAML::Node root;
    try {
        scan_document(text, file_for_messages);
        root = YAML::Load(text);
    } catch (const YAML::ParserException& e) {
        throw Error(ErrorKind::config,
                    fmt::format("{}:{}: {}", file_for_messages.string(), e.mark.line + 1, e.msg));
    }
    if (!root.IsMap()) {
        throw Error(ErrorKind::config,
                    fmt::format("{}:1: the config must be a map with 'layers' and 'solver'",
                                file_for_messages.string()));
    }
    NetConfig config;
    config.file = file_for_messages;
    try {
        reader.check_keys(root, {"name", "layers", "solver"}, "the config");
        reader.read(root, "name", config.name, "the config");
        const YAML::Node layers = root["layers"];
        if (!layers || !layers.IsSequence() || layers.size() == 0) {
            reader.fail(layers ? layers : root, "key 'layers' must be a non-empty list of layers");
        }
        for (std::size_t i = 0; i < layers.size(); ++i) {
            config.layers.push_back(read_layer(reader, layers[i], i));
        }
        if (const YAML::Node solver = root["solver"]) {
            config.solver_line = mark_of(solver).line;
            config.solver = read_solver(reader, solver, config.solver_marks);
        }
    } catch (const YAML::Exception& e) {
        throw Error(ErrorKind::config,
                    fmt::format("{}:{}: {}", file_for_messages.string(), e.mark.line + 1, e.msg));
    }
    return config;
}

NetConfig parse_config(const std::string& text, const std::filesystem::path& file_for_messages,
                       const std::vector<std::string>& overrides) {
    NetConfig config = read_yaml_config(text, file_for_messages);
    apply_overrides(config, overrides);
    validate_config(config);
    return config;
}

NetConfig load_config(const std::filesystem::path& file,
                      const std::vector<std::string>& overrides) {
    if (file.extension() == ".prototxt") {
        NetConfig config = read_prototxt(file);
        apply_overrides(config, overrides);
        validate_config(config);
        return config;
    }
    // An ifstream opens a directory and reads nothing, which would read as an empty config.
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) {
        throw Error(ErrorKind::config, fmt::format("config file {} does not exist", file.string()));
    }
    if (std::filesystem::is_directory(file, ec)) {
        throw Error(ErrorKind::config,
                    fmt::format("config file {} is a directory, not a YAML file", file.string()));
    }
    // A FIFO or /dev/zero is refused at once, and no file is read past the size limit.
    const std::vector<char> text =
        io::RegularFile(file, "config file").read_all(k_max_config_bytes);
    return parse_config(std::string(text.begin(), text.end()), file, overrides);
}

namespace {

void emit_filler(YAML::Emitter& out, const char* key, const FillerConfig& filler) {
    out << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "type" << YAML::Value << filler.type;
    if (filler.type == "constant") {
        out << YAML::Key << "value" << YAML::Value << filler.value;
    } else if (filler.type == "uniform") {
        out << YAML::Key << "min" << YAML::Value << filler.min << YAML::Key << "max" << YAML::Value
            << filler.max;
    } else if (filler.type == "gaussian") {
        out << YAML::Key << "mean" << YAML::Value << filler.mean << YAML::Key << "std"
            << YAML::Value << filler.std;
        if (filler.sparse >= 0) {
            out << YAML::Key << "sparse" << YAML::Value << filler.sparse;
        }
    } else {
        out << YAML::Key << "variance_norm" << YAML::Value << filler.variance_norm;
    }
    out << YAML::EndMap;
}

} // namespace

namespace {

void emit_param_specs(YAML::Emitter& out, const std::vector<ParamSpec>& params) {
    out << YAML::Key << "param" << YAML::Value << YAML::BeginSeq;
    for (const auto& spec : params) {
        out << YAML::Flow << YAML::BeginMap << YAML::Key << "lr_mult" << YAML::Value << spec.lr_mult
            << YAML::Key << "decay_mult" << YAML::Value << spec.decay_mult;
        if (!spec.name.empty()) {
            out << YAML::Key << "name" << YAML::Value << spec.name;
        }
        out << YAML::EndMap;
    }
    out << YAML::EndSeq;
}

// A layer's own keys past name, type, bottoms, tops and phase, as its kind lists them.
class YamlEmit final : public FieldVisitor {
public:
    explicit YamlEmit(YAML::Emitter& out) : m_out(out) {}
    void integer(const Field& f, int& value) override { put(f, value, value == 0); }
    void number(const Field& f, float& value) override { put(f, value, value == 0.0F); }
    void flag(const Field& f, bool& value) override { put(f, value, !value); }
    void flag(const Field& f, std::optional<bool>& value) override {
        if (value) {
            put(f, *value, false);
        }
    }
    void text(const Field& f, std::string& value) override { put(f, value, value.empty()); }
    void numbers(const Field& f, std::vector<float>& value) override { list(f, value); }
    void integers(const Field& f, std::vector<int>& value) override { list(f, value); }
    void filler(const Field& f, FillerConfig& value) override { emit_filler(m_out, f.key, value); }
    void params(std::vector<ParamSpec>& value, bool written_when_empty) override {
        if (written_when_empty || !value.empty()) {
            emit_param_specs(m_out, value);
        }
    }

private:
    template <typename T> void put(const Field& f, const T& value, bool empty) {
        if (f.written_when_empty || !empty) {
            m_out << YAML::Key << f.key << YAML::Value << value;
        }
    }
    template <typename T> void list(const Field& f, const std::vector<T>& value) {
        if (f.written_when_empty || !value.empty()) {
            m_out << YAML::Key << f.key << YAML::Value << YAML::Flow << value;
        }
    }
    YAML::Emitter& m_out;
};

void emit_rules(YAML::Emitter& out, const char* key, const std::vector<NetStateRule>& rules) {
    if (rules.empty()) {
        return;
    }
    out << YAML::Key << key << YAML::Value << YAML::BeginSeq;
    for (const NetStateRule& rule : rules) {
        out << YAML::Flow << YAML::BeginMap;
        if (rule.phase) {
            out << YAML::Key << "phase" << YAML::Value
                << (*rule.phase == Phase::train ? "train" : "test");
        }
        if (rule.min_level) {
            out << YAML::Key << "min_level" << YAML::Value << *rule.min_level;
        }
        if (rule.max_level) {
            out << YAML::Key << "max_level" << YAML::Value << *rule.max_level;
        }
        if (!rule.stages.empty()) {
            out << YAML::Key << "stage" << YAML::Value << YAML::Flow << rule.stages;
        }
        if (!rule.not_stages.empty()) {
            out << YAML::Key << "not_stage" << YAML::Value << YAML::Flow << rule.not_stages;
        }
        out << YAML::EndMap;
    }
    out << YAML::EndSeq;
}

void emit_solver(YAML::Emitter& out, const SolverConfig& s) {
    out << YAML::Key << "solver" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "type" << YAML::Value << s.type;
    out << YAML::Key << "base_lr" << YAML::Value << s.base_lr;
    out << YAML::Key << "momentum" << YAML::Value << s.momentum;
    if (s.type == "Adam") {
        out << YAML::Key << "momentum2" << YAML::Value << s.momentum2;
    }
    if (s.type != "SGD" && s.type != "Nesterov") {
        out << YAML::Key << "delta" << YAML::Value << s.delta;
    }
    if (s.type == "RMSProp") {
        out << YAML::Key << "rms_decay" << YAML::Value << s.rms_decay;
    }
    out << YAML::Key << "weight_decay" << YAML::Value << s.weight_decay;
    out << YAML::Key << "lr_policy" << YAML::Value << s.lr_policy;
    out << YAML::Key << "gamma" << YAML::Value << s.gamma;
    out << YAML::Key << "power" << YAML::Value << s.power;
    if (s.stepsize > 0) {
        out << YAML::Key << "stepsize" << YAML::Value << s.stepsize;
    }
    if (!s.stepvalues.empty()) {
        out << YAML::Key << "stepvalue" << YAML::Value << YAML::Flow << s.stepvalues;
    }
    out << YAML::Key << "max_iter" << YAML::Value << s.max_iter;
    out << YAML::Key << "test_interval" << YAML::Value << s.test_interval;
    if (s.test_nets.empty()) {
        out << YAML::Key << "test_iter" << YAML::Value << s.test_iter;
    } else {
        out << YAML::Key << "test_state" << YAML::Value << YAML::BeginSeq;
        for (const auto& net : s.test_nets) {
            out << YAML::Flow << YAML::BeginMap << YAML::Key << "test_iter" << YAML::Value
                << net.test_iter << YAML::Key << "level" << YAML::Value << net.state.level
                << YAML::Key << "stage" << YAML::Value << YAML::Flow << net.state.stages
                << YAML::EndMap;
        }
        out << YAML::EndSeq;
    }
    if (s.train_state.level != 0 || !s.train_state.stages.empty()) {
        out << YAML::Key << "train_state" << YAML::Value << YAML::Flow << YAML::BeginMap
            << YAML::Key << "level" << YAML::Value << s.train_state.level << YAML::Key << "stage"
            << YAML::Value << YAML::Flow << s.train_state.stages << YAML::EndMap;
    }
    out << YAML::Key << "test_initialization" << YAML::Value << s.test_initialization;
    out << YAML::Key << "display" << YAML::Value << s.display;
    out << YAML::Key << "snapshot" << YAML::Value << s.snapshot;
    out << YAML::Key << "keep_checkpoints" << YAML::Value << s.keep_checkpoints;
    out << YAML::Key << "random_seed" << YAML::Value << s.random_seed;
    out << YAML::EndMap;
}

} // namespace

std::string to_yaml(const NetConfig& config) {
    YAML::Emitter out;
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << config.name;
    out << YAML::Key << "layers" << YAML::Value << YAML::BeginSeq;
    for (const auto& layer : config.layers) {
        out << YAML::BeginMap;
        out << YAML::Key << "name" << YAML::Value << layer.name;
        out << YAML::Key << "type" << YAML::Value << layer.type;
        if (!layer.bottoms.empty()) {
            out << YAML::Key << "bottom" << YAML::Value << YAML::Flow << layer.bottoms;
        }
        out << YAML::Key << "top" << YAML::Value << YAML::Flow << layer.tops;
        if (layer.phase) {
            out << YAML::Key << "phase" << YAML::Value
                << (*layer.phase == Phase::train ? "train" : "test");
        }
        emit_rules(out, "include", layer.include);
        emit_rules(out, "exclude", layer.exclude);
        YamlEmit fields(out);
        LayerConfig copy = layer; // the fields are visited through a mutable config
        layer_kind(layer.type).fields(fields, copy);
        out << YAML::EndMap;
    }
    out << YAML::EndSeq;
    emit_solver(out, config.solver);
    out << YAML::EndMap;
    return std::string(out.c_str()) + "\n";
}

} // namespace dl
