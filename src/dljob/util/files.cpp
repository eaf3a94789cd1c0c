#include <dljob/util/files.hpp>

#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

namespace dljob::util {

std::string write_file_atomic(const std::filesystem::path& path, std::string_view content,
                              bool executable) {
    // Appended piece by piece: GCC 12 at -O3 reports a false -Wrestrict for
    // `"." + std::string&&` (GCC bug 105329), which stops a Release build with warnings as errors.
    std::string name = ".";
    name += path.filename().string();
    name += ".tmp";
    name += random_hex(6);
    const std::filesystem::path temp = path.parent_path() / name;
    const int fd =
        ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, executable ? 0755 : 0644);
    if (fd < 0) {
        return std::string("cannot create ") + temp.string() + ": " + std::strerror(errno);
    }
    std::size_t written = 0;
    while (written < content.size()) {
        const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            std::string message =
                std::string("cannot write ") + temp.string() + ": " + std::strerror(errno);
            ::close(fd);
            ::unlink(temp.c_str());
            return message;
        }
        written += static_cast<std::size_t>(n);
    }
    if (::fsync(fd) != 0 || ::close(fd) != 0) {
        std::string message =
            std::string("cannot flush ") + temp.string() + ": " + std::strerror(errno);
        ::unlink(temp.c_str());
        return message;
    }
    if (::rename(temp.c_str(), path.c_str()) != 0) {
        std::string message = std::string("cannot rename ") + temp.string() + " to " +
                              path.string() + ": " + std::strerror(errno);
        ::unlink(temp.c_str());
        return message;
    }
    return {};
}

std::optional<std::string> read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return std::nullopt;
    }
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

std::int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string random_hex(std::size_t length) {
    static constexpr std::array<char, 16> digits{'0', '1', '2', '3', '4', '5', '6', '7',
                                                 '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};
    std::random_device device;
    std::string out;
    out.reserve(length);
    for (std::size_t i = 0; i < length; ++i) {
        out.push_back(digits.at(device() % digits.size()));
    }
    return out;
}

} // namespace dljob::util
