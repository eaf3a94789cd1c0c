#pragma once
// Helpers for the data tests: scratch directories, small files, tree comparison, and a
// hand-made ustar writer for crafted (hostile) archives that no well-behaved tool would write.

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace dljob::test {

namespace fs = std::filesystem;

/// A fresh directory under /tmp, removed with everything in it at the end of the test.
class ScratchDir {
public:
    ScratchDir() {
        std::string pattern = (fs::temp_directory_path() / "dljob-data-test-XXXXXX").string();
        if (mkdtemp(pattern.data()) == nullptr) {
            throw std::runtime_error("mkdtemp failed");
        }
        m_path = pattern;
    }
    ~ScratchDir() {
        std::error_code ec;
        fs::remove_all(m_path, ec);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
    ScratchDir(ScratchDir&&) = delete;
    ScratchDir& operator=(ScratchDir&&) = delete;

    [[nodiscard]] const fs::path& path() const { return m_path; }
    [[nodiscard]] std::string operator/(const std::string& relative) const {
        return (m_path / relative).string();
    }

private:
    fs::path m_path;
};

inline void write_file(const fs::path& path, const std::string& content) {
    fs::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary);
    out << content;
}

inline std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

/// Every entry below `root`: "d" for directories, "l:<target>" for links, "f:<content>" for
/// files (with "+x" when executable), keyed by relative path.
inline std::map<std::string, std::string> snapshot(const fs::path& root) {
    std::map<std::string, std::string> tree;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
        const std::string relative = entry.path().lexically_relative(root).string();
        if (entry.is_symlink()) {
            tree[relative] = "l:" + fs::read_symlink(entry.path()).string();
        } else if (entry.is_directory()) {
            tree[relative] = "d";
        } else {
            const bool exec =
                (entry.status().permissions() & fs::perms::owner_exec) != fs::perms::none;
            tree[relative] = std::string(exec ? "f+x:" : "f:") + read_file(entry.path());
        }
    }
    return tree;
}

/// Names directly inside `dir`.
inline std::vector<std::string> names_in(const fs::path& dir) {
    std::vector<std::string> names;
    if (fs::exists(dir)) {
        for (const auto& entry : fs::directory_iterator(dir)) {
            names.push_back(entry.path().filename().string());
        }
    }
    std::sort(names.begin(), names.end());
    return names;
}

/// Writes ustar archives byte by byte, so tests can make the entries safe tools never write.
class TarBuilder {
public:
    TarBuilder& file(const std::string& name, const std::string& content,
                     std::uint32_t mode = 0644) {
        return entry(name, '0', mode, content, "");
    }
    TarBuilder& directory(const std::string& name, std::uint32_t mode = 0755) {
        return entry(name, '5', mode, "", "");
    }
    TarBuilder& symlink(const std::string& name, const std::string& target) {
        return entry(name, '2', 0777, "", target);
    }
    TarBuilder& hardlink(const std::string& name, const std::string& target) {
        return entry(name, '1', 0644, "", target);
    }
    TarBuilder& special(const std::string& name, char type) {
        return entry(name, type, 0644, "", "");
    }

    /// A member header followed by `content`; `declared_size` overrides the size field.
    TarBuilder& entry(const std::string& name, char type, std::uint32_t mode,
                      const std::string& content, const std::string& link,
                      std::int64_t declared_size = -1) {
        std::array<char, 512> header{};
        std::memcpy(header.data(), name.data(), std::min<std::size_t>(name.size(), 100));
        octal(header.data() + 100, 8, mode);
        octal(header.data() + 108, 8, 0);
        octal(header.data() + 116, 8, 0);
        octal(header.data() + 124, 12,
              declared_size >= 0 ? static_cast<std::uint64_t>(declared_size) : content.size());
        octal(header.data() + 136, 12, 946684800);
        header[156] = type;
        std::memcpy(header.data() + 157, link.data(), std::min<std::size_t>(link.size(), 100));
        std::memcpy(header.data() + 257, "ustar", 6);
        std::memcpy(header.data() + 263, "00", 2);
        std::memset(header.data() + 148, ' ', 8);
        unsigned sum = 0;
        for (const char c : header) {
            sum += static_cast<unsigned char>(c);
        }
        std::snprintf(header.data() + 148, 8, "%06o", sum);
        header[155] = ' ';
        m_bytes.append(header.data(), header.size());
        m_bytes += content;
        m_bytes.append((512 - content.size() % 512) % 512, '\0');
        return *this;
    }

    /// The archive with its two end-of-archive blocks.
    [[nodiscard]] std::string bytes() const { return m_bytes + std::string(1024, '\0'); }
    /// The archive cut after `size` bytes (no end blocks).
    [[nodiscard]] std::string truncated(std::size_t size) const { return m_bytes.substr(0, size); }

private:
    static void octal(char* field, std::size_t width, std::uint64_t value) {
        std::array<char, 32> digits{};
        std::snprintf(digits.data(), digits.size(), "%0*llo", static_cast<int>(width - 1),
                      static_cast<unsigned long long>(value));
        std::memcpy(field, digits.data(), width - 1);
    }
    std::string m_bytes;
};

} // namespace dljob::test
