#include "support/bounded_child.hpp"

#include <dljob/adapters/yaml_document.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace dljob {
namespace {

class YamlDocument : public ::testing::Test {};

TEST_F(YamlDocument, KeepsLineAndColumnOfKeysAndValues) {
    auto doc = parse_yaml("name: x\nresources:\n  gpus: 4\n", "r.yaml");
    ASSERT_TRUE(doc) << doc.error().message;
    const auto* resources = doc->find("resources");
    ASSERT_NE(resources, nullptr);
    ASSERT_EQ(resources->entries.size(), 1U);
    EXPECT_EQ(resources->entries[0].key_mark.str(), "r.yaml:3:3");
    EXPECT_EQ(resources->entries[0].value.mark.str(), "r.yaml:3:9");
    EXPECT_EQ(resources->entries[0].value.scalar, "4");
}

TEST_F(YamlDocument, RejectsDuplicateKeysNamingBothPlaces) {
    auto doc = parse_yaml("name: a\nresources:\n  gpus: 1\n  gpus: 2\n", "dup.yaml");
    ASSERT_FALSE(doc);
    EXPECT_EQ(doc.error().code, ErrorCode::config_invalid);
    EXPECT_NE(doc.error().message.find("dup.yaml:4:3: duplicate key 'gpus'"), std::string::npos)
        << doc.error().message;
    EXPECT_NE(doc.error().message.find("line 3, column 3"), std::string::npos);
}

TEST_F(YamlDocument, RemembersQuotedScalars) {
    auto doc = parse_yaml("a: \"4\"\nb: 4\n", "q.yaml");
    ASSERT_TRUE(doc);
    EXPECT_TRUE(doc->find("a")->quoted);
    EXPECT_FALSE(doc->find("b")->quoted);
}

TEST_F(YamlDocument, ReportsSyntaxErrorsWithPosition) {
    auto doc = parse_yaml("a: [1, 2\nb: 3\n", "bad.yaml");
    ASSERT_FALSE(doc);
    EXPECT_EQ(doc.error().message.rfind("bad.yaml:", 0), 0U) << doc.error().message;
}

TEST_F(YamlDocument, RejectsSeveralDocuments) {
    EXPECT_FALSE(parse_yaml("a: 1\n---\nb: 2\n", "two.yaml"));
}

TEST_F(YamlDocument, AFileThatIsMissingOrADirectoryIsNamedAsSuch) {
    auto missing = parse_yaml_file("/nonexistent-dljob/recipe.yaml");
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code, ErrorCode::not_found);
    EXPECT_EQ(missing.error().message, "/nonexistent-dljob/recipe.yaml: no such file");
    auto directory = parse_yaml_file(std::filesystem::temp_directory_path());
    ASSERT_FALSE(directory);
    EXPECT_NE(directory.error().message.find("is a directory, not a YAML file"), std::string::npos)
        << directory.error().message;
}

// The classic "billion laughs": each line is a list of ten aliases to the line before, so 300
// bytes stand for 10^9 nodes. yaml-cpp shares aliased nodes; a walk that expands them does not.
std::string laughs(const std::string& item = "x") {
    std::string text = "a0: &a0 [" + item;
    for (int i = 1; i < 10; ++i) {
        text += ", " + item;
    }
    text += "]\n";
    for (int level = 1; level <= 8; ++level) {
        text += fmt::format("a{}: &a{} [*a{}", level, level, level - 1);
        for (int i = 1; i < 10; ++i) {
            text += fmt::format(", *a{}", level - 1);
        }
        text += "]\n";
    }
    return text;
}

struct HostileDocument {
    const char* name;
    std::function<std::string()> text;
    std::string refusal; // the start of the expected message: position and what was passed
};

// Each document is small (or merely 1 MiB) to write, and without its bound would cost gigabytes
// or the stack; each is refused with its position and the limit, in a child process with 1 GiB
// of address space so that a missing bound fails the test instead of exhausting the machine.
std::vector<HostileDocument> hostile_documents() {
    const std::string nested = fmt::format("nested deeper than {} levels", YamlLimits::max_depth);
    const std::string nodes =
        fmt::format("the document reaches more than {} nodes here", YamlLimits::max_nodes);
    const std::string bytes = fmt::format("the document reaches more than {} bytes of values here",
                                          YamlLimits::max_expanded_bytes);
    return {
        // 12349 nodes reached before line 5; each *a3 adds 11111, so the 8th passes 100000.
        {"billion_laughs", [] { return laughs(); }, "h.yaml:5:45: " + nodes},
        // Each {k: v} is 3 nodes: 34570 before line 5's aliases of 31111 each; the 3rd passes.
        {"laughs_of_mappings", [] { return laughs("{k: v}"); }, "h.yaml:5:20: " + nodes},
        {"one_long_value_aliased",
         [] {
             std::string text = "a: &x \"" + std::string(100'000, 'y') + "\"\nb: [*x";
             for (int i = 1; i < 100; ++i) {
                 text += ", *x";
             }
             return text + "]\n";
         },
         "h.yaml:2:"},
        {"many_plain_nodes",
         [] {
             std::string text = "[1";
             for (int i = 1; i < 150'000; ++i) {
                 text += ",1";
             }
             return text + "]\n";
         },
         // The root list, then 99999 items: the next item, 100001st node, is at column 200000.
         "h.yaml:1:200000: " + nodes},
        {"alias_cycle", [] { return std::string("&a [*a, *a]\n"); },
         "h.yaml:1:5: an alias inside the node its anchor names (a cycle)"},
        // yaml-cpp 0.7.0 stops at 500 levels on its own, as "h.yaml:1:1: bad file".
        {"deep_flow_lists", [] { return std::string(100'000, '[') + std::string(100'000, ']'); },
         "h.yaml:1:66: " + nested},
        // yaml-cpp reads the unclosed first '{' as the key of an implicit mapping (one level
        // more), so the key of the 64th '{' (column 253) is the first node 65 levels deep.
        {"deep_flow_mappings_unclosed",
         [] {
             std::string text;
             for (int i = 0; i < 100'000; ++i) {
                 text += "{a: ";
             }
             return text;
         },
         "h.yaml:1:254: " + nested},
        {"deep_block_lists",
         [] {
             std::string text;
             for (int i = 0; i < 100'000; ++i) {
                 text += "- ";
             }
             return text + "x\n";
         },
         "h.yaml:1:131: " + nested},
        {"deep_block_mappings",
         [] {
             std::string text;
             for (int i = 0; i < 1000; ++i) {
                 text += std::string(static_cast<std::size_t>(i), ' ') + fmt::format("k{}:\n", i);
             }
             return text;
         },
         "h.yaml:65:65: " + nested},
        {"over_one_mebibyte",
         [] {
             std::string text = "a: >\n";
             while (text.size() <= YamlLimits::max_bytes) {
                 text += "  " + std::string(97, 'x') + "\n";
             }
             return text;
         },
         // Byte 1048576 is on the 10487th line (a 5-byte line, then lines of 100), column 72.
         fmt::format("h.yaml:10487:72: the document goes on past {} bytes (1 MiB)",
                     YamlLimits::max_bytes)},
    };
}

class HostileDocuments : public ::testing::TestWithParam<HostileDocument> {};

TEST_P(HostileDocuments, AreRefusedWithPositionAndLimitBeforeTheyCostMemory) {
    const auto& document = GetParam();
    const auto outcome = test::run_bounded([&] {
        const auto parsed = parse_yaml(document.text(), "h.yaml");
        if (parsed) {
            return std::string("accepted");
        }
        return fmt::format("{} {}\n{}", to_string(parsed.error().code), parsed.error().message,
                           parsed.error().hint);
    });
    ASSERT_TRUE(outcome.returned) << outcome.output;
    EXPECT_EQ(outcome.output.rfind("config_invalid " + document.refusal, 0), 0U)
        << outcome.output.substr(0, 400);
}

INSTANTIATE_TEST_SUITE_P(Corpus, HostileDocuments, ::testing::ValuesIn(hostile_documents()),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

TEST_F(YamlDocument, AnchorsAndAliasesWithinTheLimitsStillWork) {
    auto doc = parse_yaml("base: &b {gpus: 2, memory: 4G}\nuse: *b\nlist: [*b, *b]\n", "a.yaml");
    ASSERT_TRUE(doc) << doc.error().message;
    ASSERT_NE(doc->find("use"), nullptr);
    ASSERT_NE(doc->find("use")->find("gpus"), nullptr);
    EXPECT_EQ(doc->find("use")->find("gpus")->scalar, "2");
    EXPECT_EQ(doc->find("list")->items.size(), 2U);
    std::string deep_enough;
    for (int i = 0; i < YamlLimits::max_depth; ++i) {
        deep_enough += "[";
    }
    deep_enough += "1" + std::string(static_cast<std::size_t>(YamlLimits::max_depth), ']');
    EXPECT_TRUE(parse_yaml(deep_enough, "d.yaml")) << "64 levels around a value are allowed";
}

class YamlFiles : public ::testing::Test {
protected:
    void SetUp() override {
        m_dir =
            std::filesystem::temp_directory_path() / fmt::format("dljob-yaml-files-{}", ::getpid());
        std::filesystem::remove_all(m_dir);
        std::filesystem::create_directories(m_dir);
    }
    void TearDown() override { std::filesystem::remove_all(m_dir); }

    // parse_yaml_file in a bounded child: a read that blocks or never ends fails the test.
    static std::string refusal(const std::filesystem::path& path) {
        const auto outcome = test::run_bounded([&] {
            const auto parsed = parse_yaml_file(path);
            if (parsed) {
                return std::string("accepted");
            }
            return fmt::format("{} {}", to_string(parsed.error().code), parsed.error().message);
        });
        return outcome.returned ? outcome.output : "did not return: " + outcome.output;
    }

    std::filesystem::path m_dir;
};

TEST_F(YamlFiles, AFifoIsRefusedWithoutWaitingForAWriter) {
    const auto fifo = m_dir / "recipe.yaml";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
    EXPECT_EQ(refusal(fifo),
              "config_invalid " + fifo.string() + ": is a FIFO (named pipe), not a YAML file");
    // Through a symlink too: the check follows it.
    const auto link = m_dir / "link.yaml";
    std::filesystem::create_symlink(fifo, link);
    EXPECT_EQ(refusal(link),
              "config_invalid " + link.string() + ": is a FIFO (named pipe), not a YAML file");
}

TEST_F(YamlFiles, DevicesAndSocketsAreRefusedWithoutBeingRead) {
    EXPECT_EQ(refusal("/dev/zero"),
              "config_invalid /dev/zero: is a character device, not a YAML file");
    EXPECT_EQ(refusal("/dev/null"),
              "config_invalid /dev/null: is a character device, not a YAML file");
    const auto socket_path = m_dir / "s.yaml";
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    ASSERT_LT(socket_path.string().size(), sizeof(address.sun_path));
    std::strncpy(address.sun_path, socket_path.c_str(), sizeof(address.sun_path) - 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0)
        << std::strerror(errno);
    EXPECT_EQ(refusal(socket_path),
              "config_invalid " + socket_path.string() + ": is a socket, not a YAML file");
    ::close(fd);
}

TEST_F(YamlFiles, AFileOverTheSizeLimitIsRefusedUnread) {
    // Sparse: 10 GB that take no disk, and would take 10 GB of memory to read.
    const auto big = m_dir / "big.yaml";
    const int fd = ::open(big.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 10'000'000'000), 0) << std::strerror(errno);
    ::close(fd);
    EXPECT_EQ(refusal(big), fmt::format("config_invalid {}: 10000000000 bytes, more than {} bytes "
                                        "(1 MiB), the most a YAML document may have",
                                        big.string(), YamlLimits::max_bytes));
    // One byte over is refused, the limit itself is read (and here is a YAML error of its own).
    std::filesystem::resize_file(big, YamlLimits::max_bytes + 1);
    EXPECT_EQ(refusal(big).rfind(fmt::format("config_invalid {}: more than", big.string()), 0), 0U);
    std::filesystem::resize_file(big, YamlLimits::max_bytes);
    EXPECT_EQ(refusal(big).find("more than"), std::string::npos) << refusal(big).substr(0, 300);
}

} // namespace
} // namespace dljob
