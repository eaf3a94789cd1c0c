// The memory a net needs, from its config alone. It follows Net's construction layer by layer
// (the tops each layer makes, its parameters, the buffers it keeps) in 64-bit arithmetic that
// saturates instead of wrapping, so a shape of 10^10 elements is a number to compare, not an
// allocation to survive.

#include "net/memory_plan.hpp"

#include "net/layer.hpp"
#include "net/splits.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <vector>

namespace dl {
namespace {

constexpr std::uint64_t k_saturated = std::numeric_limits<std::uint64_t>::max();

std::uint64_t mul(std::uint64_t a, std::uint64_t b) {
    std::uint64_t out = 0;
    return __builtin_mul_overflow(a, b, &out) ? k_saturated : out;
}
std::uint64_t add(std::uint64_t a, std::uint64_t b) {
    std::uint64_t out = 0;
    return __builtin_add_overflow(a, b, &out) ? k_saturated : out;
}

std::uint64_t physical_memory() {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page_size = ::sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page_size > 0
               ? mul(static_cast<std::uint64_t>(pages), static_cast<std::uint64_t>(page_size))
               : k_saturated;
}

/// A cgroup file's number; "max" and v1's "no limit" (a page-rounded 2^63) are none.
std::optional<std::uint64_t> read_limit(const std::filesystem::path& file) {
    std::ifstream in(file);
    std::string text;
    if (!(in >> text)) {
        return std::nullopt;
    }
    std::uint64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || value >= (k_saturated >> 2)) {
        return std::nullopt;
    }
    return value;
}

std::optional<std::uint64_t> parse_size(const std::string& spec) {
    std::uint64_t value = 0;
    const char* first = spec.data();
    const char* last = spec.data() + spec.size();
    const auto [end, error] = std::from_chars(first, last, value);
    if (error != std::errc() || end == first) {
        return std::nullopt;
    }
    const std::string unit(end, last);
    const std::map<std::string, int> shifts = {{"", 0},    {"K", 10},  {"M", 20},
                                               {"G", 30},  {"T", 40},  {"KB", 10},
                                               {"MB", 20}, {"GB", 30}, {"TB", 40}};
    const auto found = shifts.find(unit);
    if (found == shifts.end() || (found->second > 0 && value > (k_saturated >> found->second))) {
        return std::nullopt;
    }
    return value << found->second;
}

/// One phase's walk over the layers, adding what each one allocates.
class Plan {
public:
    Plan(const NetConfig& config, const MemoryLimit& limit) : m_config(config), m_limit(limit) {}

    void walk(const NetState& state) {
        std::map<std::string, Shape> blobs;
        std::deque<LayerConfig> made;
        for (const LayerConfig* layer : phase_layers(m_config, state, made)) {
            if (!add_layer(*layer, state.phase, blobs)) {
                return; // a missing blob or a shape that does not fit: the net says how
            }
        }
    }

    [[nodiscard]] std::uint64_t total() const { return m_total; }

private:
    /// What one layer allocates, item by item, for the message when it is too much.
    struct Bill {
        std::uint64_t bytes = 0;
        std::string parts;
        void take(const std::string& what, std::uint64_t count, int copies) {
            const std::uint64_t size = mul(mul(count, sizeof(float)), copies);
            bytes = add(bytes, size);
            parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", what, bytes_text(size));
        }
    };

    // Adds the layer's tops, buffers and parameters to the total; false when its bottoms are
    // unknown or do not fit its shape rule.
    bool add_layer(const LayerConfig& layer, Phase phase, std::map<std::string, Shape>& blobs) {
        std::vector<const Shape*> bottoms;
        for (const auto& name : layer.bottoms) {
            const auto found = blobs.find(name);
            if (found == blobs.end()) {
                return false;
            }
            bottoms.push_back(&found->second);
        }
        const auto made = tops_of(layer, bottoms);
        if (!made) {
            return false;
        }
        const bool train = phase == Phase::train;
        Bill bill;
        take_tops(layer, *made, train, blobs, bill);
        if (made->buffer > 0) {
            bill.take(made->buffer_what, made->buffer, made->buffer_copies);
        }
        if (has_role(layer, LayerRole::input)) {
            // The input stage: two slots of a batch (and its labels) on their way in.
            std::uint64_t batch = 0;
            for (const Shape& shape : made->tops) {
                batch = add(batch, count_of(shape));
            }
            bill.take("input stage", batch, 2);
        }
        take_params(layer, *made, train, bill);
        m_total = add(m_total, bill.bytes);
        if (m_limit.bytes && m_total > *m_limit.bytes) {
            fail(layer, fmt::format("needs {} ({} bytes: {}) at batch {}; with the layers "
                                    "before it the {} net needs {} ({} bytes), more than the "
                                    "limit of {} ({} bytes, {}); --max-memory SIZE or "
                                    "DLTRAIN_MAX_MEMORY change the limit",
                                    bytes_text(bill.bytes), bill.bytes, bill.parts, m_batch,
                                    train ? "train" : "test", bytes_text(m_total), m_total,
                                    bytes_text(*m_limit.bytes), *m_limit.bytes, m_limit.source));
        }
        return true;
    }

    void take_tops(const LayerConfig& layer, const Planned& made, bool train,
                   std::map<std::string, Shape>& blobs, Bill& bill) const {
        for (std::size_t i = 0; i < layer.tops.size() && i < made.tops.size(); ++i) {
            const Shape& shape = made.tops[i];
            for (const std::int64_t dim : shape) {
                if (dim > INT_MAX) {
                    fail(layer, fmt::format("its top '{}' would be {}, a dimension beyond "
                                            "2^31 - 1",
                                            layer.tops[i], shape_text(shape)));
                }
            }
            const bool in_place = blobs.count(layer.tops[i]) != 0 &&
                                  std::find(layer.bottoms.begin(), layer.bottoms.end(),
                                            layer.tops[i]) != layer.bottoms.end();
            if (!in_place) {
                // A test net keeps no gradients of its activations.
                bill.take(fmt::format("top '{}' {}", layer.tops[i], shape_text(shape)),
                          count_of(shape), train ? 2 : 1);
            }
            blobs[layer.tops[i]] = shape;
        }
    }

    void take_params(const LayerConfig& layer, const Planned& made, bool train, Bill& bill) {
        // The test net borrows the train net's parameters; its own layers have their own.
        const bool owns_params = train || m_train_params.count(layer.name) == 0;
        if (made.params.empty() || !owns_params) {
            return;
        }
        std::uint64_t count = 0;
        for (const Shape& shape : made.params) {
            count = add(count, count_of(shape));
        }
        // Value and gradient, and the solver's history (1 tensor, Adam's 2, each with the
        // gradient every Tensor carries).
        bill.take("parameters", count, 2);
        if (train) {
            bill.take("solver history", count, m_config.solver.type == "Adam" ? 4 : 2);
            m_train_params.insert(layer.name);
        }
    }

    [[noreturn]] void fail(const LayerConfig& layer, const std::string& message) const {
        throw Error(ErrorKind::config,
                    fmt::format("{}:{}: layer '{}' ({}): {}", m_config.file.string(), layer.line,
                                layer.name, layer.type, message));
    }

    // The tops, parameters and own buffers Net would make for this layer, by the layer's own
    // shape rule; nothing when a shape does not fit (the layer's setup reports that).
    std::optional<Planned> tops_of(const LayerConfig& layer,
                                   const std::vector<const Shape*>& bottom) {
        const LayerKind* kind = find_layer_kind(layer.type);
        if (kind == nullptr || (!kind->no_bottoms && bottom.empty())) {
            return std::nullopt;
        }
        if (kind->role == LayerRole::input) {
            m_batch = layer.batch_size;
        } else if (kind->no_bottoms && !layer.shape.empty()) {
            m_batch = layer.shape.front(); // Input's and DummyData's batch is their first size
        }
        try {
            return kind->plan(layer, bottom);
        } catch (const Error& e) {
            fail(layer, e.what());
        }
    }

    const NetConfig& m_config;
    const MemoryLimit& m_limit;
    std::uint64_t m_total = 0;
    std::int64_t m_batch = 0;
    std::set<std::string> m_train_params;
};

} // namespace

std::optional<std::uint64_t> cgroup_memory_limit(const std::filesystem::path& proc_cgroup,
                                                 const std::filesystem::path& cgroup_root) {
    std::optional<std::uint64_t> limit;
    const auto take = [&](const std::filesystem::path& file) {
        if (const auto value = read_limit(file); value && (!limit || *value < *limit)) {
            limit = value;
        }
    };
    std::ifstream in(proc_cgroup);
    // Lines "<id>:<controllers>:<path>": v2 is "0::<path>", v1 lists "memory" among the
    // controllers.
    for (std::string line; std::getline(in, line);) {
        const auto first = line.find(':');
        const auto second = first == std::string::npos ? first : line.find(':', first + 1);
        if (second == std::string::npos) {
            continue;
        }
        const std::string controllers = line.substr(first + 1, second - first - 1);
        const std::filesystem::path path =
            std::filesystem::path(line.substr(second + 1)).relative_path();
        if (controllers.empty()) {
            take(cgroup_root / path / "memory.max");
        } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
            take(cgroup_root / "memory" / path / "memory.limit_in_bytes");
        }
    }
    return limit;
}

std::string bytes_text(std::uint64_t bytes) {
    if (bytes == k_saturated) {
        return "more than 16 EiB";
    }
    const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    auto value = static_cast<double>(bytes);
    std::size_t unit = 0;
    while (value >= 1024.0 && unit + 1 < std::size(units)) {
        value /= 1024.0;
        ++unit;
    }
    return unit == 0 ? fmt::format("{} bytes", bytes)
                     : fmt::format("{:.1f} {}", value, units[unit]);
}

MemoryLimit memory_limit(const std::string& spec) {
    std::string text = spec;
    std::string source = "--max-memory";
    if (text.empty()) {
        if (const char* env = std::getenv("DLTRAIN_MAX_MEMORY"); env != nullptr && *env != '\0') {
            text = env;
            source = "DLTRAIN_MAX_MEMORY";
        }
    }
    if (text.empty()) {
        // All of this machine's memory, or the cgroup's (Slurm's --mem) when that is less: a net
        // that needs more cannot run here, whatever else runs beside it. A login node that checks
        // a job's net may have less than the job's node: --max-memory (which dljob sets from the
        // recipe's resources.memory) or DLTRAIN_MAX_MEMORY say what the job will have.
        const std::uint64_t physical = physical_memory();
        const auto cgroup = cgroup_memory_limit("/proc/self/cgroup", "/sys/fs/cgroup");
        if (cgroup && *cgroup < physical) {
            return MemoryLimit{cgroup, "this process's cgroup memory limit (the job's memory)"};
        }
        return MemoryLimit{physical, "this machine's physical memory"};
    }
    if (text == "none") {
        return MemoryLimit{std::nullopt, source + " none"};
    }
    const auto bytes = parse_size(text);
    if (!bytes) {
        throw Error(ErrorKind::usage,
                    fmt::format("{} '{}': expected bytes with an optional K, M, G or T (powers of "
                                "1024), e.g. 64G, or 'none'",
                                source, text));
    }
    return MemoryLimit{bytes, fmt::format("{} {}", source, text)};
}

std::uint64_t check_memory(const NetConfig& config, bool with_test, const MemoryLimit& limit) {
    Plan plan(config, limit);
    for (const NetState& state : net_states(config.solver)) {
        if (state.phase == Phase::train || with_test) {
            plan.walk(state);
        }
    }
    return plan.total();
}

} // namespace dl
