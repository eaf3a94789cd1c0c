#include "data/text_lines.hpp"

#include "io/regular_file.hpp"

namespace dl::data {

std::vector<TextLine> read_text_lines(const std::filesystem::path& file, const char* what,
                                      std::uint64_t max_bytes) {
    const std::vector<char> text = io::RegularFile(file, what).read_all(max_bytes);
    std::vector<TextLine> lines;
    std::size_t start = 0;
    int number = 0;
    while (start < text.size()) {
        std::size_t end = start;
        while (end < text.size() && text[end] != '\n') {
            ++end;
        }
        std::string line(text.begin() + static_cast<std::ptrdiff_t>(start),
                         text.begin() + static_cast<std::ptrdiff_t>(end));
        start = end + 1;
        ++number;
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) {
            line.pop_back();
        }
        if (!line.empty()) {
            lines.push_back(TextLine{std::move(line), number});
        }
    }
    return lines;
}

} // namespace dl::data
