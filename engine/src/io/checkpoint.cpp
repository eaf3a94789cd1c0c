// Checkpoint files. Layout (little-endian), iter_<N>.ckpt:
//   "DLCKPT01", u32 version, i32 iteration, u64 train cursor, u32 test-net count and per test
//   net a u64 cursor and (version 3) u32 length + its state's text (version 2: the cursors alone;
//   version 1: one u64 test cursor),
//   u32 length + RNG state text, u32 parameter count, per parameter (u32 name length, name,
//   u32 rank, i32 dims, f32 values), u32 history count, per history (u64 count, f32 values),
//   u64 XXH64 of every byte before it.
// Written to iter_<N>.ckpt.tmp, fsynced, renamed, directory fsynced; then the completion marker
// iter_<N>.done ("size=<bytes> xxh64=<hex>") is written the same way, last. A checkpoint without
// its marker, or whose size or checksum disagrees, is not used.

#include "io/atomic_file.hpp"
#include "io/checksum.hpp"
#include "io/regular_file.hpp"

#include <dl/checkpoint.hpp>
#include <dl/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <variant>
#include <vector>

namespace dl {
namespace {

constexpr char k_magic[8] = {'D', 'L', 'C', 'K', 'P', 'T', '0', '1'};
constexpr std::uint32_t k_version = 3;
// Caffe's solvers have a test net per test_state; more than this is no file dltrain wrote.
constexpr std::uint32_t k_max_test_nets = 1024;
namespace fs = std::filesystem;

/// Streams the checkpoint to its temporary file through a small buffer, with the checksum of
/// every byte written so far: a model of hundreds of MB is never held twice in memory.
class Writer {
public:
    explicit Writer(io::AtomicFile& file) : m_file(file) { m_buffer.reserve(k_buffer); }
    template <typename T> void put(const T& value) { put_bytes(&value, sizeof(T)); }
    void put_bytes(const void* data, std::size_t size) {
        const auto* bytes = static_cast<const char*>(data);
        m_sum.update(bytes, size);
        m_size += size;
        if (m_buffer.size() + size > k_buffer) {
            flush();
        }
        if (size >= k_buffer) {
            m_file.write(bytes, size);
            return;
        }
        m_buffer.insert(m_buffer.end(), bytes, bytes + size);
    }
    void put_string(const std::string& text) {
        put(static_cast<std::uint32_t>(text.size()));
        put_bytes(text.data(), text.size());
    }
    /// A tensor's values, from its own memory where the host can read it (no copy of a model's
    /// hundreds of MB), else through a host copy (a GPU's).
    void put_values(const Tensor& tensor) {
        if (tensor.memory().host_accessible()) {
            put_bytes(tensor.data(), tensor.count() * sizeof(float));
            return;
        }
        const std::vector<float> values = tensor.read_data();
        put_bytes(values.data(), values.size() * sizeof(float));
    }
    /// Writes the checksum of everything before it (itself not summed); returns it.
    std::uint64_t finish() {
        const std::uint64_t sum = m_sum.digest();
        put_bytes(&sum, sizeof(sum));
        flush();
        return sum;
    }
    [[nodiscard]] std::uint64_t size() const { return m_size; }

private:
    static constexpr std::size_t k_buffer = std::size_t{1} << 20;
    void flush() {
        m_file.write(m_buffer.data(), m_buffer.size());
        m_buffer.clear();
    }
    io::AtomicFile& m_file;
    io::StreamingChecksum m_sum;
    std::vector<char> m_buffer;
    std::uint64_t m_size = 0;
};

// Every length is checked against the bytes left before anything is allocated for it: the file
// passed its checksum, but a checksum only says the bytes are the ones written, not by whom.
class Reader {
public:
    Reader(const std::vector<char>& bytes, std::size_t end, fs::path file)
        : m_bytes(bytes), m_end(end), m_file(std::move(file)) {}
    template <typename T> T get(const char* what) {
        T value{};
        get_bytes(&value, sizeof(T), what);
        return value;
    }
    void get_bytes(void* out, std::size_t size, const char* what) {
        need(size, what);
        std::memcpy(out, m_bytes.data() + m_pos, size);
        m_pos += size;
    }
    std::string get_string(const char* what) {
        const auto length = get<std::uint32_t>(what);
        need(length, what);
        std::string text(m_bytes.data() + m_pos, length);
        m_pos += length;
        return text;
    }
    void skip(std::size_t size, const char* what) {
        need(size, what);
        m_pos += size;
    }
    [[nodiscard]] std::size_t left() const { return m_end - m_pos; }
    [[nodiscard]] std::size_t position() const { return m_pos; }

    [[noreturn]] void fail(const std::string& message) const {
        throw Error(ErrorKind::config,
                    fmt::format("checkpoint {} at byte {}: {}", m_file.string(), m_pos, message));
    }

private:
    void need(std::size_t size, const char* what) const {
        if (size > m_end - m_pos) {
            fail(fmt::format("{} needs {} bytes but only {} are left before the checksum", what,
                             size, m_end - m_pos));
        }
    }
    const std::vector<char>& m_bytes;
    std::size_t m_end; // the checksum's offset
    fs::path m_file;
    std::size_t m_pos = 0;
};

// A marker is one short line; anything longer is not one.
constexpr std::uint64_t k_max_marker_bytes = 4096;
// Names are layer names plus ".<index>"; ranks are at most 4 in this engine.
constexpr std::uint32_t k_max_name_bytes = 4096;
constexpr std::uint32_t k_max_rank = 8;

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
        int iteration = 0;
        // More digits than an int holds is no name dltrain wrote: not a checkpoint of this run.
        if (std::regex_match(name, match, pattern) &&
            std::from_chars(name.data() + match.position(1),
                            name.data() + match.position(1) + match.length(1), iteration)
                    .ec == std::errc()) {
            found.emplace_back(iteration, entry.path());
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
    fs::path file = dir / fmt::format("iter_{:08d}.ckpt", state.iteration);
    io::AtomicFile stored(file);
    Writer out(stored);
    out.put_bytes(k_magic, sizeof(k_magic));
    out.put(k_version);
    out.put(static_cast<std::int32_t>(state.iteration));
    out.put(state.train_cursor);
    out.put(static_cast<std::uint32_t>(state.test_cursors.size()));
    for (std::size_t i = 0; i < state.test_cursors.size(); ++i) {
        out.put(state.test_cursors[i]);
        out.put_string(i < state.test_nets.size() ? state.test_nets[i] : std::string());
    }
    out.put_string(state.rng_state);
    out.put(static_cast<std::uint32_t>(net.params().size()));
    for (const auto& param : net.params()) {
        out.put_string(param.name);
        const auto& shape = param.tensor->shape();
        out.put(static_cast<std::uint32_t>(shape.size()));
        for (const int dim : shape) {
            out.put(static_cast<std::int32_t>(dim));
        }
        // The host's values whatever the backend: a checkpoint written on a GPU loads on a CPU.
        out.put_values(*param.tensor);
    }
    out.put(static_cast<std::uint32_t>(solver.history().size()));
    for (const auto& history : solver.history()) {
        out.put(static_cast<std::uint64_t>(history.count()));
        out.put_values(history);
    }
    const std::uint64_t sum = out.finish();
    stored.commit();
    const std::string marker = fmt::format("size={} xxh64={:016x}\n", out.size(), sum);
    io::write_atomically(marker_for(file), marker.data(), marker.size());

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

struct StoredParam {
    std::string name;
    std::vector<int> shape;
    std::size_t count = 0;  // values
    std::size_t offset = 0; // of the first value in the file
};

struct StoredHistory {
    std::size_t count = 0;
    std::size_t offset = 0;
};

/// A checkpoint's bytes, every length checked against the file before it was believed.
struct Layout {
    TrainingState state;
    std::vector<StoredParam> params;
    std::vector<StoredHistory> histories;
};

/// A name read from a file, fit for a message: a crafted one may hold any bytes.
std::string printable(const std::string& name) {
    std::string text;
    for (const char c : name) {
        const auto byte = static_cast<unsigned char>(c);
        text += byte >= 0x20 && byte < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", byte);
    }
    return text;
}

/// `count` float32 values as bytes, or nothing when that overflows.
std::optional<std::size_t> value_bytes(std::uint64_t count) {
    std::size_t bytes = 0;
    if (count > std::numeric_limits<std::size_t>::max() ||
        __builtin_mul_overflow(static_cast<std::size_t>(count), sizeof(float), &bytes)) {
        return std::nullopt;
    }
    return bytes;
}

/// Walks the whole layout (docs/engine.md, "Checkpoint format") without allocating more than the
/// file holds; throws dl::Error(config) saying what is wrong and where.
// The iteration, the data cursors and the RNG state, after the magic and version.
TrainingState read_state(Reader& in, std::uint32_t version) {
    TrainingState state;
    state.iteration = in.get<std::int32_t>("the iteration");
    if (state.iteration < 0) {
        in.fail(fmt::format("iteration {} is negative", state.iteration));
    }
    state.train_cursor = in.get<std::uint64_t>("the train cursor");
    const std::uint32_t test_nets =
        version == 1 ? 1 : in.get<std::uint32_t>("the number of test cursors");
    const std::size_t entry = version >= 3 ? 12 : 8; // a cursor, and a state's length
    if (test_nets > k_max_test_nets || test_nets > in.left() / entry) {
        in.fail(fmt::format("{} test cursors (at most {}, and {} bytes each must remain)",
                            test_nets, k_max_test_nets, entry));
    }
    for (std::uint32_t i = 0; i < test_nets; ++i) {
        state.test_cursors.push_back(in.get<std::uint64_t>("a test cursor"));
        if (version >= 3) {
            state.test_nets.push_back(in.get_string("a test net's state"));
        }
    }
    state.rng_state = in.get_string("the RNG state");
    {
        std::istringstream text(state.rng_state);
        std::mt19937 rng; // NOLINT(bugprone-random-generator-seed): the state is read next
        text >> rng;
        if (text.fail()) {
            in.fail("the RNG state is not a std::mt19937 state");
        }
    }
    return state;
}

// Parameter `i`: its name, shape and where its values are.
StoredParam read_param(Reader& in, std::uint32_t i) {
    StoredParam param;
    const std::size_t at = in.position();
    const auto name_length = in.get<std::uint32_t>("a parameter name's length");
    if (name_length > k_max_name_bytes) {
        in.fail(fmt::format("parameter {} has a name of {} bytes (at most {})", i, name_length,
                            k_max_name_bytes));
    }
    param.name.resize(name_length);
    in.get_bytes(param.name.data(), name_length, "a parameter name");
    const auto rank = in.get<std::uint32_t>("a parameter's rank");
    if (rank > k_max_rank) {
        in.fail(fmt::format("parameter {} ('{}') has rank {} (at most {})", i,
                            printable(param.name), rank, k_max_rank));
    }
    param.shape.resize(rank);
    std::uint64_t count = 1;
    for (int& dim : param.shape) {
        dim = in.get<std::int32_t>("a parameter's dimension");
        if (dim < 0 || __builtin_mul_overflow(count, static_cast<std::uint64_t>(dim), &count)) {
            in.fail(fmt::format("parameter '{}' (entry at byte {}) has dimension {}",
                                printable(param.name), at, dim));
        }
    }
    const auto size = value_bytes(count);
    if (!size) {
        in.fail(fmt::format("parameter '{}' has {} values", printable(param.name), count));
    }
    param.count = static_cast<std::size_t>(count);
    param.offset = in.position();
    in.skip(*size, "a parameter's values");
    return param;
}

// Solver history `i`: its size and where its values are.
StoredHistory read_history(Reader& in, std::uint32_t i) {
    StoredHistory history;
    const auto count = in.get<std::uint64_t>("a solver history's size");
    const auto size = value_bytes(count);
    if (!size) {
        in.fail(fmt::format("solver history {} has {} values", i, count));
    }
    history.count = static_cast<std::size_t>(count);
    history.offset = in.position();
    in.skip(*size, "a solver history's values");
    return history;
}

Layout parse_layout(const std::vector<char>& bytes, const fs::path& file) {
    Reader in(bytes, bytes.size() - sizeof(std::uint64_t), file);
    Layout layout;
    in.skip(sizeof(k_magic), "the magic");
    const auto version = in.get<std::uint32_t>("the version");
    if (version < 1 || version > k_version) {
        in.fail(fmt::format("unknown version {} (this dltrain reads versions 1 to {})", version,
                            k_version));
    }
    layout.state = read_state(in, version);
    // The smallest entry is a name length and a rank (8 bytes): a count the rest of the file
    // cannot hold is refused before anything is reserved for it.
    const auto param_count = in.get<std::uint32_t>("the parameter count");
    if (param_count > in.left() / 8) {
        in.fail(
            fmt::format("{} parameters do not fit in the {} bytes left", param_count, in.left()));
    }
    layout.params.reserve(param_count);
    for (std::uint32_t i = 0; i < param_count; ++i) {
        layout.params.push_back(read_param(in, i));
    }
    const auto history_count = in.get<std::uint32_t>("the solver history count");
    if (history_count > in.left() / 8) {
        in.fail(fmt::format("{} solver history tensors do not fit in the {} bytes left",
                            history_count, in.left()));
    }
    layout.histories.reserve(history_count);
    for (std::uint32_t i = 0; i < history_count; ++i) {
        layout.histories.push_back(read_history(in, i));
    }
    if (in.left() != 0) {
        in.fail(
            fmt::format("{} bytes follow the solver history (the layout ends there)", in.left()));
    }
    return layout;
}

/// The size and checksum a completion marker names, or why it names none.
struct Marker {
    std::uint64_t size = 0;
    std::string hex;
};

std::variant<Marker, std::string> read_marker(const fs::path& marker) {
    std::error_code ec;
    if (!fs::exists(marker, ec)) {
        return fmt::format("no completion marker {}", marker.filename().string());
    }
    std::vector<char> text;
    try {
        text = io::RegularFile(marker, "completion marker").read_all(k_max_marker_bytes);
    } catch (const Error& e) {
        return std::string(e.what());
    }
    const std::string line(text.begin(), std::find(text.begin(), text.end(), '\n'));
    std::istringstream fields(line);
    std::string size_field;
    std::string sum_field;
    fields >> size_field >> sum_field;
    Marker parsed;
    auto unreadable = fmt::format("unreadable completion marker {}", marker.filename().string());
    if (size_field.rfind("size=", 0) != 0 || sum_field.rfind("xxh64=", 0) != 0) {
        return unreadable;
    }
    const char* first = size_field.data() + 5;
    const char* last = size_field.data() + size_field.size();
    const auto [end, error] = std::from_chars(first, last, parsed.size);
    if (error != std::errc() || end != last || first == last) {
        return unreadable;
    }
    parsed.hex = sum_field.substr(6);
    return parsed;
}

/// checkpoint_problem, leaving the file's bytes and layout for a reader, so it needs no second
/// read.
std::optional<std::string> problem_reading(const fs::path& file, std::vector<char>& bytes,
                                           Layout& layout) {
    Marker expected;
    try {
        // The file itself first: a FIFO is refused whether or not it has a marker.
        const io::RegularFile in(file, "checkpoint");
        auto marker = read_marker(marker_for(file));
        if (const auto* problem = std::get_if<std::string>(&marker)) {
            return *problem;
        }
        expected = std::get<Marker>(marker);
        // The size is compared before the file is read: a marker never makes dltrain read (or
        // allocate) more than the file holds.
        if (in.size() != expected.size) {
            return fmt::format("size {} bytes, the marker says {} (truncated?)", in.size(),
                               expected.size);
        }
        bytes = in.read_all(expected.size);
    } catch (const Error& e) {
        return std::string(e.what());
    }
    if (bytes.size() != expected.size) {
        return fmt::format("size {} bytes, the marker says {} (truncated?)", bytes.size(),
                           expected.size);
    }
    if (bytes.size() < sizeof(k_magic) + sizeof(std::uint64_t) ||
        std::memcmp(bytes.data(), k_magic, sizeof(k_magic)) != 0) {
        return std::string("not a dltrain checkpoint (bad magic)");
    }
    const std::size_t body = bytes.size() - sizeof(std::uint64_t);
    std::uint64_t stored = 0;
    std::memcpy(&stored, bytes.data() + body, sizeof(stored));
    const std::uint64_t actual = io::checksum(bytes.data(), body);
    if (actual != stored || fmt::format("{:016x}", actual) != expected.hex) {
        return fmt::format("checksum mismatch (xxh64 {:016x}, expected {})", actual, expected.hex);
    }
    try {
        layout = parse_layout(bytes, file);
    } catch (const Error& e) {
        return std::string(e.what());
    }
    return std::nullopt;
}

} // namespace

std::vector<std::uint64_t> test_cursors_for(const TrainingState& saved,
                                            const std::vector<std::string>& nets) {
    std::vector<std::uint64_t> cursors(nets.size(), 0);
    if (saved.test_nets.size() != saved.test_cursors.size()) { // version 1 or 2: by position
        for (std::size_t i = 0; i < nets.size() && i < saved.test_cursors.size(); ++i) {
            cursors[i] = saved.test_cursors[i];
        }
        return cursors;
    }
    std::vector<bool> taken(saved.test_nets.size(), false);
    for (std::size_t i = 0; i < nets.size(); ++i) {
        for (std::size_t j = 0; j < saved.test_nets.size(); ++j) {
            if (!taken[j] && saved.test_nets[j] == nets[i]) {
                taken[j] = true;
                cursors[i] = saved.test_cursors[j];
                break;
            }
        }
    }
    return cursors;
}

std::optional<std::string> checkpoint_problem(const fs::path& file) {
    std::vector<char> bytes;
    Layout layout;
    return problem_reading(file, bytes, layout);
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

/// A checkpoint that passed checkpoint_problem; `what` names it in the error.
struct ValidCheckpoint {
    std::vector<char> bytes;
    Layout layout;

    /// `count` floats from `offset`, which parse_layout checked lie inside the file.
    [[nodiscard]] std::vector<float> values(std::size_t offset, std::size_t count) const {
        std::vector<float> out(count);
        std::memcpy(out.data(), bytes.data() + offset, count * sizeof(float));
        return out;
    }
};

ValidCheckpoint read_valid(const fs::path& file, const char* what) {
    std::error_code ec;
    if (!fs::exists(file, ec)) {
        throw Error(ErrorKind::config, fmt::format("{} {} does not exist", what, file.string()));
    }
    ValidCheckpoint valid;
    if (auto problem = problem_reading(file, valid.bytes, valid.layout)) {
        throw Error(ErrorKind::config,
                    fmt::format("{} {} is not usable: {}", what, file.string(), *problem));
    }
    return valid;
}

std::string shape_text(const std::vector<int>& shape) {
    return fmt::format("{}", fmt::join(shape, "x"));
}

} // namespace

TrainingState read_checkpoint(const fs::path& file, Net& net, Solver* solver) {
    const ValidCheckpoint valid = read_valid(file, "checkpoint");
    const Layout& layout = valid.layout;
    const auto& params = net.params();
    if (layout.params.size() != params.size()) {
        throw Error(ErrorKind::config,
                    fmt::format("checkpoint {} has {} parameters, the network has {}",
                                file.string(), layout.params.size(), params.size()));
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
        const StoredParam& stored = layout.params[i];
        const Param& param = params[i];
        if (stored.name != param.name || stored.shape != param.tensor->shape()) {
            throw Error(ErrorKind::config,
                        fmt::format("checkpoint {}: parameter {} ({}) does not match the "
                                    "network's {} ({})",
                                    file.string(), printable(stored.name), shape_text(stored.shape),
                                    param.name, param.tensor->shape_string()));
        }
        param.tensor->write_data(valid.values(stored.offset, stored.count).data());
    }
    if (solver != nullptr) {
        if (layout.histories.size() != solver->history().size()) {
            throw Error(ErrorKind::config,
                        fmt::format("checkpoint {} was written by another solver type ({} history "
                                    "tensors, this solver has {})",
                                    file.string(), layout.histories.size(),
                                    solver->history().size()));
        }
        for (std::size_t i = 0; i < layout.histories.size(); ++i) {
            const StoredHistory& stored = layout.histories[i];
            Tensor& history = solver->history()[i];
            if (stored.count != history.count()) {
                throw Error(ErrorKind::config,
                            fmt::format("checkpoint {}: solver history {} has {} values, this "
                                        "solver's has {}",
                                        file.string(), i, stored.count, history.count()));
            }
            history.write_data(valid.values(stored.offset, stored.count).data());
        }
        solver->set_iteration(layout.state.iteration);
    }
    std::istringstream rng(layout.state.rng_state);
    rng >> net.rng();
    return layout.state;
}

WeightsCopy copy_weights(const fs::path& file, Net& net) {
    // A fresh run: no iteration, cursors, RNG or solver history of the file is used.
    const ValidCheckpoint valid = read_valid(file, "weights file");
    std::map<std::string, const Param*> wanted;
    for (const auto& param : net.params()) {
        wanted.emplace(param.name, &param);
    }
    WeightsCopy copy;
    for (const StoredParam& stored : valid.layout.params) {
        const auto found = wanted.find(stored.name);
        if (found == wanted.end()) {
            copy.unused.push_back(printable(stored.name));
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
        found->second->tensor->write_data(valid.values(stored.offset, stored.count).data());
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
