#include <dljob/adapters/machine_linux.hpp>
#include <dljob/util/cpus.hpp>
#include <dljob/util/files.hpp>
#include <dljob/util/text.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <system_error>
#include <utility>

namespace dljob::adapters {
namespace {

// /proc and cgroup files are a few KiB; anything larger is not what is looked for.
constexpr std::size_t max_small_file = 64 * 1024;
// cgroup paths are short; a deeper one is walked no further than this towards the root.
constexpr int max_cgroup_depth = 64;
constexpr std::int64_t mib = 1024 * 1024;

std::optional<std::string> small_file(const std::filesystem::path& path) {
    auto read = util::read_regular_file(path, max_small_file);
    if (read.status != util::BoundedRead::Status::ok) {
        return std::nullopt;
    }
    return std::move(read.content);
}

std::optional<std::int64_t> parse_count(std::string_view text) {
    text = util::trim(text);
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || value < 0) {
        return std::nullopt;
    }
    return value;
}

struct Limit {
    std::int64_t value = 0;
    std::string cgroup; // the cgroup whose file set it
};

// A cgroup v2 limit (memory.max, cpu.max) holds for the cgroup and everything below it, so the
// process's own is the smallest from its cgroup up to the root. `read` turns the file's text
// into a limit (nullopt: "max", no limit).
template <class Read>
std::optional<Limit> cgroup_limit(const std::filesystem::path& root, const std::string& file,
                                  Read read) {
    const auto self = small_file(root / "proc/self/cgroup");
    const auto path = self ? cgroup_v2_path(*self) : std::nullopt;
    if (!path) {
        return std::nullopt;
    }
    std::optional<Limit> best;
    std::filesystem::path cgroup = std::filesystem::path(*path).lexically_normal();
    for (int depth = 0; depth < max_cgroup_depth; ++depth) {
        if (const auto text = small_file(root / "sys/fs/cgroup" / cgroup.relative_path() / file)) {
            if (const auto limit = read(*text); limit && (!best || *limit < best->value)) {
                best = Limit{*limit, cgroup.string()};
            }
        }
        if (!cgroup.has_relative_path()) {
            break;
        }
        cgroup = cgroup.parent_path();
    }
    return best;
}

// cpu.max: "QUOTA PERIOD" in microseconds, or "max PERIOD"; 150000 100000 is 1.5 CPUs, which
// two threads keep busy.
std::optional<std::int64_t> cpus_of_cpu_max(const std::string& text) {
    const auto words = util::split_whitespace(text);
    if (words.size() != 2) {
        return std::nullopt;
    }
    const auto quota = parse_count(words[0]);
    const auto period = parse_count(words[1]);
    if (!quota || !period || *period == 0) {
        return std::nullopt;
    }
    return std::max<std::int64_t>(1, (*quota + *period - 1) / *period);
}

// memory.max: bytes, or "max".
std::optional<std::int64_t> mib_of_memory_max(const std::string& text) {
    const auto bytes = parse_count(text);
    if (!bytes) {
        return std::nullopt;
    }
    return *bytes / mib;
}

void find_cores(const std::filesystem::path& root, MachineFacts& facts) {
    const auto affinity = static_cast<int>(util::usable_cpus());
    facts.cores = affinity;
    facts.cores_found = fmt::format("{} CPU(s) in dljob's affinity mask", affinity);
    const auto quota = cgroup_limit(root, "cpu.max", cpus_of_cpu_max);
    if (quota && quota->value < affinity) {
        facts.cores = static_cast<int>(quota->value);
        facts.cores_found =
            fmt::format("{} CPU(s) by cpu.max of cgroup {}", facts.cores, quota->cgroup);
    }
}

void find_memory(const std::filesystem::path& root, MachineFacts& facts) {
    std::int64_t total_mib = 0;
    const auto meminfo = small_file(root / "proc/meminfo");
    if (const auto kib = meminfo ? meminfo_total_kib(*meminfo) : std::nullopt) {
        total_mib = *kib / 1024;
        facts.memory_found = "MemTotal of /proc/meminfo";
    } else {
        const long pages = ::sysconf(_SC_PHYS_PAGES);
        const long page_size = ::sysconf(_SC_PAGESIZE);
        total_mib =
            pages > 0 && page_size > 0 ? static_cast<std::int64_t>(pages) * page_size / mib : 0;
        facts.memory_found = "the physical pages sysconf counts";
    }
    const auto limit = cgroup_limit(root, "memory.max", mib_of_memory_max);
    if (limit && limit->value < total_mib) {
        total_mib = limit->value;
        facts.memory_found = fmt::format("memory.max of cgroup {}", limit->cgroup);
    }
    facts.memory = MemorySize::from_mib(total_mib);
}

bool is_uuid_entry(std::string_view entry) {
    return entry.starts_with("GPU-") || entry.starts_with("MIG-");
}

} // namespace

int count_gpu_device_files(const std::filesystem::path& dev) {
    int count = 0;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dev, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.size() > 6 && name.starts_with("nvidia") &&
            util::all_digits(std::string_view(name).substr(6))) {
            ++count;
        }
    }
    return count;
}

VisibleGpus visible_gpus(int devices, const std::optional<std::string>& cuda_visible_devices) {
    if (devices == 0) {
        return {0, "no /dev/nvidia[0-9]* device: no NVIDIA driver or GPU"};
    }
    const std::string files = fmt::format("{} /dev/nvidia[0-9]* device(s)", devices);
    if (!cuda_visible_devices) {
        return {devices, files};
    }
    int listed = 0;
    for (const auto entry : util::split(*cuda_visible_devices, ',')) {
        const auto word = util::trim(entry);
        const auto index = util::parse_int(word);
        if (!(index && *index >= 0 && *index < devices) && !is_uuid_entry(word)) {
            break; // CUDA reads the list up to its first entry that names no GPU
        }
        ++listed;
    }
    listed = std::min(listed, devices);
    return {listed, fmt::format("{} of {}, as CUDA_VISIBLE_DEVICES='{}' names them", listed, files,
                                *cuda_visible_devices)};
}

std::optional<std::int64_t> meminfo_total_kib(std::string_view meminfo) {
    for (const auto line : util::split_lines(meminfo)) {
        if (!line.starts_with("MemTotal:")) {
            continue;
        }
        const auto words = util::split_whitespace(line.substr(9));
        if (words.empty() || (words.size() > 1 && words[1] != "kB")) {
            return std::nullopt;
        }
        return parse_count(words[0]);
    }
    return std::nullopt;
}

std::optional<std::string> cgroup_v2_path(std::string_view proc_self_cgroup) {
    for (const auto line : util::split_lines(proc_self_cgroup)) {
        if (line.starts_with("0::/")) {
            return std::string(line.substr(3));
        }
    }
    return std::nullopt;
}

LinuxMachine::LinuxMachine(std::filesystem::path root, GetEnv getenv)
    : m_root(std::move(root)), m_getenv(std::move(getenv)) {
    if (!m_getenv) {
        m_getenv = [](const std::string& name) -> std::optional<std::string> {
            // NOLINTNEXTLINE(concurrency-mt-unsafe): read while the command starts
            const char* value = std::getenv(name.c_str());
            return value != nullptr ? std::optional<std::string>(value) : std::nullopt;
        };
    }
}

MachineFacts LinuxMachine::describe() const {
    MachineFacts facts;
    find_cores(m_root, facts);
    find_memory(m_root, facts);
    const auto gpus =
        visible_gpus(count_gpu_device_files(m_root / "dev"), m_getenv("CUDA_VISIBLE_DEVICES"));
    facts.gpus = gpus.count;
    facts.gpus_found = gpus.found;
    return facts;
}

} // namespace dljob::adapters
