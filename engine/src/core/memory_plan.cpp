// The memory a net needs, from its config alone. It follows Net's construction layer by layer
// (the tops each layer makes, its parameters, the buffers it keeps) in 64-bit arithmetic that
// saturates instead of wrapping, so a shape of 10^10 elements is a number to compare, not an
// allocation to survive.

#include "core/memory_plan.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdlib>
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

using Shape = std::vector<std::int64_t>;

std::uint64_t count_of(const Shape& shape) {
    std::uint64_t count = 1;
    for (const std::int64_t dim : shape) {
        count = mul(count, static_cast<std::uint64_t>(dim));
    }
    return count;
}

std::string shape_text(const Shape& shape) {
    return fmt::format("{}", fmt::join(shape, "x"));
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

    void walk(Phase phase) {
        std::map<std::string, Shape> blobs;
        const bool train = phase == Phase::train;
        for (const LayerConfig& layer : m_config.layers) {
            if (layer.phase && *layer.phase != phase) {
                continue;
            }
            std::vector<const Shape*> bottoms;
            for (const auto& name : layer.bottoms) {
                const auto found = blobs.find(name);
                if (found == blobs.end()) {
                    return; // the net names the missing blob
                }
                bottoms.push_back(&found->second);
            }
            auto made = tops_of(layer, bottoms);
            if (!made) {
                return; // a shape that does not fit: the layer's own check says how
            }
            std::uint64_t bytes = 0;
            std::string parts;
            const auto take = [&](const std::string& what, std::uint64_t count, int copies) {
                const std::uint64_t size = mul(mul(count, sizeof(float)), copies);
                bytes = add(bytes, size);
                parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", what, bytes_text(size));
            };
            for (std::size_t i = 0; i < layer.tops.size() && i < made->tops.size(); ++i) {
                const Shape& shape = made->tops[i];
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
                    take(fmt::format("top '{}' {}", layer.tops[i], shape_text(shape)),
                         count_of(shape), train ? 2 : 1);
                }
                blobs[layer.tops[i]] = shape;
            }
            if (made->buffer > 0) {
                take(made->buffer_what, made->buffer, made->buffer_copies);
            }
            if (layer.type == "Data") {
                // The input stage: two slots of a batch (and its labels) on their way in.
                std::uint64_t batch = 0;
                for (const Shape& shape : made->tops) {
                    batch = add(batch, count_of(shape));
                }
                take("input stage", batch, 2);
            }
            // The test net borrows the train net's parameters; its own layers have their own.
            const bool owns_params = train || m_train_params.count(layer.name) == 0;
            if (!made->params.empty() && owns_params) {
                std::uint64_t count = 0;
                for (const Shape& shape : made->params) {
                    count = add(count, count_of(shape));
                }
                // Value and gradient, and the solver's history (1 tensor, Adam's 2, each with
                // the gradient every Tensor carries).
                take("parameters", count, 2);
                if (train) {
                    take("solver history", count, m_config.solver.type == "Adam" ? 4 : 2);
                    m_train_params.insert(layer.name);
                }
            }
            m_total = add(m_total, bytes);
            if (m_limit.bytes && m_total > *m_limit.bytes) {
                fail(layer,
                     fmt::format("needs {} ({} bytes: {}) at batch {}; with the layers "
                                 "before it the {} net needs {} ({} bytes), more than the "
                                 "limit of {} ({} bytes, {}); --max-memory SIZE or "
                                 "DLTRAIN_MAX_MEMORY change the limit",
                                 bytes_text(bytes), bytes, parts, m_batch, train ? "train" : "test",
                                 bytes_text(m_total), m_total, bytes_text(*m_limit.bytes),
                                 *m_limit.bytes, m_limit.source));
            }
        }
    }

    [[nodiscard]] std::uint64_t total() const { return m_total; }

private:
    struct Made {
        std::vector<Shape> tops;
        std::vector<Shape> params;
        std::uint64_t buffer = 0; // floats or int32s of a layer's own buffer
        int buffer_copies = 1;
        std::string buffer_what;
    };

    [[noreturn]] void fail(const LayerConfig& layer, const std::string& message) const {
        throw Error(ErrorKind::config,
                    fmt::format("{}:{}: layer '{}' ({}): {}", m_config.file.string(), layer.line,
                                layer.name, layer.type, message));
    }

    /// A padded size in the layers' int arithmetic, or a config error naming the layer.
    std::int64_t padded(const LayerConfig& layer, std::int64_t size) const {
        const std::int64_t value = size + 2 * static_cast<std::int64_t>(layer.pad);
        if (value > INT_MAX) {
            fail(layer, fmt::format("pad {} makes the {}-pixel input {} pixels, beyond 2^31 - 1",
                                    layer.pad, size, value));
        }
        return value;
    }

    // The tops, parameters and own buffers Net would make for this layer; nothing when a shape
    // does not fit (the layer's setup reports that).
    std::optional<Made> tops_of(const LayerConfig& layer, const std::vector<const Shape*>& bottom) {
        Made made;
        const std::string& type = layer.type;
        if (type == "Data") {
            if (layer.shape.size() != 3) {
                return std::nullopt;
            }
            m_batch = layer.batch_size;
            const std::vector<int> image = input_shape(layer);
            made.tops.push_back({layer.batch_size, image[0], image[1], image[2]});
            if (!layer.label_source.empty()) {
                made.tops.push_back({layer.batch_size});
            }
            return made;
        }
        if (bottom.empty()) {
            return std::nullopt;
        }
        const Shape& x = *bottom[0];
        if (type == "Convolution" || type == "Pooling") {
            if (x.size() != 4 || layer.kernel_size < 1 || layer.stride < 1) {
                return std::nullopt;
            }
            const std::int64_t height = padded(layer, x[2]);
            const std::int64_t width = padded(layer, x[3]);
            if (height < layer.kernel_size || width < layer.kernel_size) {
                return std::nullopt;
            }
            if (type == "Convolution") {
                if (layer.group < 1 || x[1] % layer.group != 0 ||
                    layer.num_output % layer.group != 0) {
                    return std::nullopt;
                }
                made.tops.push_back({x[0], layer.num_output,
                                     (height - layer.kernel_size) / layer.stride + 1,
                                     (width - layer.kernel_size) / layer.stride + 1});
                made.params.push_back(
                    {layer.num_output, x[1] / layer.group, layer.kernel_size, layer.kernel_size});
                if (layer.bias_term) {
                    made.params.push_back({layer.num_output});
                }
                return made;
            }
            if (layer.pad >= layer.kernel_size) {
                return std::nullopt;
            }
            // Caffe's ceil mode, as PoolGeometry computes it.
            const auto pooled = [&](std::int64_t size, std::int64_t with_pad) {
                std::int64_t out =
                    (with_pad - layer.kernel_size + layer.stride - 1) / layer.stride + 1;
                if (layer.pad > 0 && (out - 1) * layer.stride >= size + layer.pad) {
                    --out;
                }
                return out;
            };
            made.tops.push_back({x[0], x[1], pooled(x[2], height), pooled(x[3], width)});
            made.buffer = count_of(made.tops[0]); // the argmax, an int32 per output
            made.buffer_what = "pooling indexes";
            return made;
        }
        if (type == "InnerProduct") {
            Shape rest(x.begin() + 1, x.end());
            const std::uint64_t inner = count_of(rest);
            if (inner > INT_MAX) {
                fail(layer, fmt::format("its input {} has {} values per item, beyond 2^31 - 1",
                                        shape_text(x), inner));
            }
            made.tops.push_back({x[0], layer.num_output});
            made.params.push_back({layer.num_output, static_cast<std::int64_t>(inner)});
            if (layer.bias_term) {
                made.params.push_back({layer.num_output});
            }
            return made;
        }
        if (type == "ReLU" || type == "Sigmoid" || type == "TanH" || type == "Dropout") {
            made.tops.push_back(x);
            if (type == "Dropout") {
                made.buffer = count_of(x);
                made.buffer_what = "dropout mask";
            }
            return made;
        }
        if (type == "LRN" || type == "Eltwise") {
            made.tops.push_back(x);
            made.buffer = count_of(x); // LRN's scale; Eltwise's max mask (int32)
            made.buffer_what = type == "LRN" ? "LRN scale" : "eltwise mask";
            return made;
        }
        if (type == "BatchNorm" || type == "Scale") {
            if (x.size() < 2) {
                return std::nullopt;
            }
            made.tops.push_back(x);
            made.params.push_back({x[1]});
            if (type == "BatchNorm") {
                made.params.push_back({x[1]});
                made.params.push_back({1});
            } else if (layer.bias_term) {
                made.params.push_back({x[1]});
            }
            made.buffer = count_of(x); // the copy an in-place layer keeps for backward
            made.buffer_what = "saved input";
            return made;
        }
        if (type == "Concat") {
            const auto axis = static_cast<std::size_t>(layer.axis);
            if (axis >= x.size()) {
                return std::nullopt;
            }
            Shape top = x;
            for (std::size_t b = 1; b < bottom.size(); ++b) {
                if (bottom[b]->size() != x.size()) {
                    return std::nullopt;
                }
                top[axis] += (*bottom[b])[axis];
            }
            made.tops.push_back(top);
            return made;
        }
        if (type == "SoftmaxWithLoss" || type == "Accuracy") {
            made.tops.push_back({1});
            if (type == "SoftmaxWithLoss") {
                made.buffer = count_of(x); // the probabilities, a Tensor with its gradient
                made.buffer_copies = 2;
                made.buffer_what = "probabilities";
            }
            return made;
        }
        return std::nullopt;
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
    plan.walk(Phase::train);
    if (with_test) {
        plan.walk(Phase::test);
    }
    return plan.total();
}

} // namespace dl
