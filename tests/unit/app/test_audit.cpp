#include "support/run_process.hpp"
#include "unit/data/data_test_support.hpp"

#include <dljob/app/data/audit.hpp>

#include <gtest/gtest.h>

#include <string>

namespace dljob::app {
namespace {

using test::ScratchDir;

class AuditService : public ::testing::Test {
protected:
    void SetUp() override {
        for (int i = 0; i < 30; ++i) {
            test::write_file(m_dir.path() / "fmnist/train" / std::to_string(i % 3) /
                                 (std::to_string(i) + ".pgm"),
                             std::string(797, 'p'));
        }
    }
    ScratchDir m_dir;
};

TEST_F(AuditService, CountsFilesDirectoriesAndAllocatedBytes) {
    auto report = audit_data({m_dir / "fmnist", 500'000});
    ASSERT_TRUE(report) << report.error().message;
    EXPECT_EQ(report->files, 30U);
    EXPECT_EQ(report->directories, 4U);
    EXPECT_EQ(report->bytes, 30U * 797U);
    EXPECT_EQ(report->allocated_bytes, 30U * 4096U);
    EXPECT_EQ(report->small_files, 30U);
    EXPECT_FALSE(report->network); // /tmp is local here
    EXPECT_TRUE(report->findings.empty());
    EXPECT_NE(format_audit(*report).find("ok:"), std::string::npos);
}

TEST_F(AuditService, FlagsATreeNearTheFileQuotaAndPrintsTheFix) {
    auto report = audit_data({m_dir / "fmnist", 100});
    ASSERT_TRUE(report) << report.error().message;
    ASSERT_EQ(report->findings.size(), 1U);
    EXPECT_NE(report->findings[0].find("34 files and directories"), std::string::npos)
        << report->findings[0];
    EXPECT_NE(report->findings[0].find("100-object quota"), std::string::npos);
    const std::string text = format_audit(*report);
    EXPECT_NE(text.find("dljob pack " + (m_dir / "fmnist") + " -o fmnist.dlpack"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("dljob stage-data fmnist.dlpack --to tmp --extract"), std::string::npos)
        << text;
}

TEST_F(AuditService, TheCommandReportsAndAMissingPathIsNotFound) {
    auto run = test::run_shell(std::string(DLJOB_BINARY) + " audit-data " + (m_dir / "fmnist") +
                               " --file-quota 40");
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_NE(run.output.find("30 files, 4 directories"), std::string::npos) << run.output;
    EXPECT_NE(run.output.find("warning:"), std::string::npos) << run.output;
    auto missing = test::run_shell(std::string(DLJOB_BINARY) + " audit-data " + (m_dir / "nope"));
    EXPECT_EQ(missing.exit_code, 7) << missing.output;
}

} // namespace
} // namespace dljob::app
