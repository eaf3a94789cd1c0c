#include <dljob/adapters/yaml_document.hpp>

#include <gtest/gtest.h>

#include <filesystem>

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

} // namespace
} // namespace dljob
