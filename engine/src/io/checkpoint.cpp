// Checkpoint files. Layout (little-endian), iter_<N>.ckpt:
//   "DLCKPT01", u32 version, i32 iteration, u64 train cursor, u64 test cursor,
//   u32 length + RNG state text, u32 parameter count, per parameter (u32 name length, name,
//   u32 rank, i32 dims, f32 values), u32 history count, per history (u64 count, f32 values),
//   u64 XXH64 of every byte before it.
// Written to iter_<N>.ckpt.tmp, fsynced, renamed, directory fsynced; then the completion marker
// iter_<N>.done ("size=<bytes> xxh64=<hex>") is written the same way, last. A checkpoint without
// its marker, or whose size or checksum disagrees, is not used.

#include "io/checksum.hpp"

#include <dl/checkpoint.hpp>
#include <dl/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <sstream>
#include <vector>

namespace dl {
namespace {

constexpr char k_magic[8] = {'D', 'L', 'C', 'K', 'P', 'T', '0', '1'};
constexpr std::uint32_t k_version = 1;
namespace fs = std::filesystem;

class Writer {
public:
    template <typename T> void put(const T& value) {
        const auto* bytes = reinterpret_cast<const char*>(&value);
        m_bytes.insert(m_bytes.end(), bytes, bytes + sizeof(T));
    }
    void put_bytes(const void* data, std::size_t size) {
        const auto* bytes = static_cast<const char*>(data);
        m_bytes.insert(m_bytes.end(), bytes, bytes + size);
    }
    void put_string(const std::string& text) {
        put(static_cast<std::uint32_t>(text.size()));
        put_bytes(text.data(), text.size());
    }
    std::vector<char>& bytes() { return m_bytes; }

private:
    std::vector<char> m_bytes;
};

class Reader {
public:
    Reader(const std::vector<char>& bytes, fs::path file)
        : m_bytes(bytes), m_file(std::move(file)) {}
    template <typename T> T get() {
        T value{};
        get_bytes(&value, sizeof(T));
        return value;
    }
    void get_bytes(void* out, std::size_t size) {
        if (m_pos + size > m_bytes.size()) {
            throw Error(ErrorKind::training,
                        fmt::format("checkpoint {} ends early", m_file.string()));
        }
        std::memcpy(out, m_bytes.data() + m_pos, size);
        m_pos += size;
    }
    std::string get_string() {
        std::string text(get<std::uint32_t>(), '\0');
        get_bytes(text.data(), text.size());
        return text;
    }
    void skip(std::size_t size) {
        if (m_pos + size > m_bytes.size()) {
            throw Error(ErrorKind::training,
                        fmt::format("checkpoint {} ends early", m_file.string()));
        }
        m_pos += size;
    }

private:
    const std::vector<char>& m_bytes;
    fs::path m_file;
    std::size_t m_pos = 0;
};

void fsync_directory(const fs::path& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

// Temporary file, fsync, rename, fsync of the directory: the file is whole or absent.
void write_atomically(const fs::path& path, const char* data, std::size_t size) {
    const fs::path tmp = path.string() + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        throw Error(ErrorKind::training,
                    fmt::format("cannot write {}: {}", tmp.string(), std::strerror(errno)));
    }
    std::size_t done = 0;
    while (done < size) {
        const ssize_t n = ::write(fd, data + done, size - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            const int error = errno;
            ::close(fd);
            throw Error(ErrorKind::training,
                        fmt::format("cannot write {}: {}", tmp.string(), std::strerror(error)));
        }
        done += static_cast<std::size_t>(n);
    }
    if (::fsync(fd) != 0 || ::close(fd) != 0) {
        throw Error(ErrorKind::training, fmt::format("cannot fsync {}", tmp.string()));
    }
    fs::rename(tmp, path);
    fsync_directory(path.parent_path());
}

std::vector<char> read_all(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

fs::path marker_for(const fs::path& file) {
    fs::path marker = file;
    marker.replace_extension(".done");
    return marker;
}

std::vector<std::pair<int, fs::path>> list_checkpoints(const fs::path& dir) {
    std::vector<std::pair<int, fs::path>> found;
    std::error_code error;
    if (!fs::is_directory(dir, error)) {
        return found;
    }
    const std::regex pattern(R"(iter_(\d+)\.ckpt)");
    for (const auto& entry : fs::directory_iterator(dir, error)) {
        std::smatch match;
        const std::string name = entry.path().filename().string();
        if (std::regex_match(name, match, pattern)) {
            found.emplace_back(std::stoi(match[1].str()), entry.path());
        }
    }
    std::sort(found.begin(), found.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    return found;
}

} // namespace

fs::path write_checkpoint(const fs::path& dir, const TrainingState& state, const Net& net,
                          const Solver& solver, int keep) {
    fs::create_directories(dir);
    Writer out;
    out.put_bytes(k_magic, sizeof(k_magic));
    out.put(k_version);
    out.put(static_cast<std::int32_t>(state.iteration));
    out.put(state.train_cursor);
    out.put(state.test_cursor);
    out.put_string(state.rng_state);
    out.put(static_cast<std::uint32_t>(net.params().size()));
    for (const auto& param : net.params()) {
        out.put_string(param.name);
        const auto& shape = param.tensor->shape();
        out.put(static_cast<std::uint32_t>(shape.size()));
        for (const int dim : shape) {
            out.put(static_cast<std::int32_t>(dim));
        }
        // Host copies whatever the backend: a checkpoint written on a GPU loads on a CPU.
        const std::vector<float> values = param.tensor->read_data();
        out.put_bytes(values.data(), values.size() * sizeof(float));
    }
    out.put(static_cast<std::uint32_t>(solver.history().size()));
    for (const auto& history : solver.history()) {
        out.put(static_cast<std::uint64_t>(history.count()));
        const std::vector<float> values = history.read_data();
        out.put_bytes(values.data(), values.size() * sizeof(float));
    }
    const std::uint64_t sum = io::checksum(out.bytes().data(), out.bytes().size());
    out.put(sum);

    fs::path file = dir / fmt::format("iter_{:08d}.ckpt", state.iteration);
    write_atomically(file, out.bytes().data(), out.bytes().size());
    const std::string marker = fmt::format("size={} xxh64={:016x}\n", out.bytes().size(), sum);
    write_atomically(marker_for(file), marker.data(), marker.size());

    // Keep the newest `keep`: the marker goes first, so a half-deleted one is never trusted.
    const auto all = list_checkpoints(dir);
    for (std::size_t i = static_cast<std::size_t>(std::max(keep, 1)); i < all.size(); ++i) {
        std::error_code error;
        fs::remove(marker_for(all[i].second), error);
        fs::remove(all[i].second, error);
    }
    return file;
}

namespace {

/// checkpoint_problem, leaving the file's bytes in `bytes` so a reader needs no second read.
std::optional<std::string> problem_reading(const fs::path& file, std::vector<char>& bytes) {
    const fs::path marker = marker_for(file);
    std::ifstream marker_in(marker);
    if (!marker_in) {
        return fmt::format("no completion marker {}", marker.filename().string());
    }
    std::string line;
    std::getline(marker_in, line);
    std::size_t size = 0;
    std::string hex;
    {
        std::istringstream fields(line);
        std::string size_field;
        std::string sum_field;
        fields >> size_field >> sum_field;
        if (size_field.rfind("size=", 0) != 0 || sum_field.rfind("xxh64=", 0) != 0) {
            return fmt::format("unreadable completion marker {}", marker.filename().string());
        }
        size = std::stoull(size_field.substr(5));
        hex = sum_field.substr(6);
    }
    bytes = read_all(file);
    if (bytes.size() != size) {
        return fmt::format("size {} bytes, the marker says {} (truncated?)", bytes.size(), size);
    }
    if (bytes.size() < sizeof(k_magic) + sizeof(std::uint64_t) ||
        std::memcmp(bytes.data(), k_magic, sizeof(k_magic)) != 0) {
        return std::string("not a dltrain checkpoint (bad magic)");
    }
    const std::size_t body = bytes.size() - sizeof(std::uint64_t);
    std::uint64_t stored = 0;
    std::memcpy(&stored, bytes.data() + body, sizeof(stored));
    const std::uint64_t actual = io::checksum(bytes.data(), body);
    if (actual != stored || fmt::format("{:016x}", actual) != hex) {
        return fmt::format("checksum mismatch (xxh64 {:016x}, expected {})", actual, hex);
    }
    return std::nullopt;
}

} // namespace

std::optional<std::string> checkpoint_problem(const fs::path& file) {
    std::vector<char> bytes;
    return problem_reading(file, bytes);
}

std::optional<fs::path>
find_latest_checkpoint(const fs::path& dir, const std::function<void(const std::string&)>& warn) {
    for (const auto& [iteration, file] : list_checkpoints(dir)) {
        if (auto problem = checkpoint_problem(file)) {
            warn(fmt::format("skipping checkpoint {}: {}", file.string(), *problem));
            continue;
        }
        return file;
    }
    return std::nullopt;
}

namespace {

/// The bytes of a checkpoint that passed checkpoint_problem; `what` names it in the error.
std::vector<char> read_valid(const fs::path& file, const char* what) {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) {
        throw Error(ErrorKind::config, fmt::format("{} {} does not exist", what, file.string()));
    }
    std::vector<char> bytes;
    if (auto problem = problem_reading(file, bytes)) {
        throw Error(ErrorKind::config,
                    fmt::format("{} {} is not usable: {}", what, file.string(), *problem));
    }
    return bytes;
}

/// Everything before the parameters.
TrainingState get_front(Reader& in, const fs::path& file) {
    char magic[sizeof(k_magic)];
    in.get_bytes(magic, sizeof(magic));
    if (in.get<std::uint32_t>() != k_version) {
        throw Error(ErrorKind::config,
                    fmt::format("checkpoint {}: unknown version", file.string()));
    }
    TrainingState state;
    state.iteration = in.get<std::int32_t>();
    state.train_cursor = in.get<std::uint64_t>();
    state.test_cursor = in.get<std::uint64_t>();
    state.rng_state = in.get_string();
    return state;
}

struct StoredParam {
    std::string name;
    std::vector<int> shape;
    [[nodiscard]] std::size_t count() const {
        std::size_t n = 1;
        for (const int dim : shape) {
            n *= static_cast<std::size_t>(dim);
        }
        return n;
    }
};

/// A parameter's name and shape; its values follow.
StoredParam get_param(Reader& in) {
    StoredParam param;
    param.name = in.get_string();
    param.shape.resize(in.get<std::uint32_t>());
    for (int& dim : param.shape) {
        dim = in.get<std::int32_t>();
    }
    return param;
}

std::string shape_text(const std::vector<int>& shape) {
    return fmt::format("{}", fmt::join(shape, "x"));
}

} // namespace

TrainingState read_checkpoint(const fs::path& file, Net& net, Solver* solver) {
    const std::vector<char> bytes = read_valid(file, "checkpoint");
    Reader in(bytes, file);
    TrainingState state = get_front(in, file);
    const auto count = in.get<std::uint32_t>();
    const auto& params = net.params();
    if (count != params.size()) {
        throw Error(ErrorKind::config,
                    fmt::format("checkpoint {} has {} parameters, the network has {}",
                                file.string(), count, params.size()));
    }
    for (const auto& param : params) {
        const StoredParam stored = get_param(in);
        if (stored.name != param.name || stored.shape != param.tensor->shape()) {
            throw Error(ErrorKind::config,
                        fmt::format("checkpoint {}: parameter {} does not match the network's {} "
                                    "({})",
                                    file.string(), stored.name, param.name,
                                    param.tensor->shape_string()));
        }
        std::vector<float> values(param.tensor->count());
        in.get_bytes(values.data(), values.size() * sizeof(float));
        param.tensor->write_data(values.data());
    }
    const auto histories = in.get<std::uint32_t>();
    if (solver != nullptr) {
        if (histories != solver->history().size()) {
            throw Error(ErrorKind::config,
                        fmt::format("checkpoint {} was written by another solver type ({} history "
                                    "tensors, this solver has {})",
                                    file.string(), histories, solver->history().size()));
        }
        for (auto& history : solver->history()) {
            if (in.get<std::uint64_t>() != history.count()) {
                throw Error(
                    ErrorKind::config,
                    fmt::format("checkpoint {}: solver history size mismatch", file.string()));
            }
            std::vector<float> values(history.count());
            in.get_bytes(values.data(), values.size() * sizeof(float));
            history.write_data(values.data());
        }
        solver->set_iteration(state.iteration);
    }
    std::istringstream rng(state.rng_state);
    rng >> net.rng();
    return state;
}

WeightsCopy copy_weights(const fs::path& file, Net& net) {
    const std::vector<char> bytes = read_valid(file, "weights file");
    Reader in(bytes, file);
    (void)get_front(in, file); // a fresh run: no iteration, cursors, RNG or solver history
    std::map<std::string, const Param*> wanted;
    for (const auto& param : net.params()) {
        wanted.emplace(param.name, &param);
    }
    WeightsCopy copy;
    const auto count = in.get<std::uint32_t>();
    for (std::uint32_t i = 0; i < count; ++i) {
        const StoredParam stored = get_param(in);
        const auto found = wanted.find(stored.name);
        if (found == wanted.end()) {
            in.skip(stored.count() * sizeof(float));
            copy.unused.push_back(stored.name);
            continue;
        }
        const Tensor& tensor = *found->second->tensor;
        if (stored.shape != tensor.shape()) {
            throw Error(ErrorKind::config,
                        fmt::format("weights file {}: parameter {} is {} there and {} in the "
                                    "network (rename the layer to train it from its filler)",
                                    file.string(), stored.name, shape_text(stored.shape),
                                    shape_text(tensor.shape())));
        }
        std::vector<float> values(stored.count());
        in.get_bytes(values.data(), values.size() * sizeof(float));
        found->second->tensor->write_data(values.data());
        copy.copied.push_back(stored.name);
        wanted.erase(found);
    }
    if (copy.copied.empty()) {
        throw Error(ErrorKind::config,
                    fmt::format("weights file {} has no parameter of this network (it has: {})",
                                file.string(), fmt::join(copy.unused, ", ")));
    }
    for (const auto& param : net.params()) {
        if (wanted.count(param.name) != 0) {
            copy.kept.push_back(param.name);
        }
    }
    return copy;
}

} // namespace dl
