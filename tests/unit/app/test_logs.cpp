// `dljob logs --rank R`: one data-parallel rank's lines out of a job.log that every rank writes,
// under each launcher's tag (srun --label, Open MPI's --tag-output, Hydra's -prepend-rank), and a
// clear refusal where no line carries a tag. Real SQLite store, real files.

#include "unit/schedulers/fake_process_runner.hpp"

#include <dljob/adapters/sqlite_job_store.hpp>
#include <dljob/app/reports/logs.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace dljob::app {
namespace {

TEST(LogsRank, ReadsEachLaunchersTag) {
    EXPECT_EQ(rank_line("1: dltrain: iteration 10", 1), "dltrain: iteration 10"); // srun
    EXPECT_EQ(rank_line(" 3: padded", 3), "padded");                              // srun, 10+ tasks
    EXPECT_EQ(rank_line("[1,2]<stdout>:text", 2), "text");                        // Open MPI
    EXPECT_EQ(rank_line("[1,2]<stderr>: error", 2), " error");   // its stderr, as written
    EXPECT_EQ(rank_line("[12] hydra", 12), "hydra");             // MPICH's Hydra
    EXPECT_EQ(rank_line("1: dltrain", 0), std::nullopt);         // another rank's
    EXPECT_EQ(rank_line("[1,2]<stdout>:text", 1), std::nullopt); // rank 2, not job 1
    EXPECT_EQ(rank_line("0: rank zero", 0), "rank zero");
    // A job's own text that looks like a tag but is no launcher's: Open MPI's form without its
    // stream, and ranks with leading zeros (srun pads with spaces, no launcher with zeros).
    for (const char* untagged :
         {"dltrain: training", "", "1:no space", "[x] y", "[1,2]<out>:z", "[1,2]<stdout>",
          "12345678901: too many digits", "[1]no space", "[2,1] step 5", "[1,01]<stdout>:x",
          "01: padded with a zero", "[01] hydra?"}) {
        EXPECT_EQ(rank_line(untagged, 1), std::nullopt) << untagged;
    }
}

class LogsRankJob : public ::testing::Test {
protected:
    void SetUp() override {
        dir = std::filesystem::temp_directory_path() /
              ("dljob-logs-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir / "run");
        auto store = adapters::SqliteJobStore::open(dir / "jobs.db");
        ASSERT_TRUE(store) << store.error().message;
        context.emplace(std::move(store.value()),
                        std::make_unique<dljob::testing::FakeProcessRunner>());
        Job job;
        job.token = "0123456789";
        job.name = "t";
        job.site = "local";
        job.scheduler = "local";
        job.run_dir = (dir / "run").string();
        auto created = context->store().create(job);
        ASSERT_TRUE(created);
        id = std::to_string(created->id);
    }
    void TearDown() override { std::filesystem::remove_all(dir); }

    Result<void> logs(std::optional<int> rank, std::ostringstream& out) {
        LogOptions options;
        options.rank = rank;
        return print_logs(*context, id, options, out);
    }

    std::filesystem::path dir;
    std::optional<JobContext> context;
    std::string id;
};

TEST_F(LogsRankJob, PrintsOneRanksLinesWithoutTheirTag) {
    // The last line has no newline: a log cut by the walltime kill.
    std::ofstream(dir / "run" / "job.log")
        << "dljob: staging\n[1,0]<stdout>:dltrain: 2 ranks\n[1,1]<stderr>:rank 1 warning\n"
           "[1,0]<stdout>:iteration 10\n[1,1]<stdout>:last words";
    std::ostringstream zero;
    ASSERT_TRUE(logs(0, zero));
    EXPECT_EQ(zero.str(), "dltrain: 2 ranks\niteration 10\n");
    std::ostringstream one;
    ASSERT_TRUE(logs(1, one));
    EXPECT_EQ(one.str(), "rank 1 warning\nlast words\n");
    std::ostringstream all;
    ASSERT_TRUE(logs(std::nullopt, all));
    EXPECT_EQ(all.str().substr(0, 14), "dljob: staging");
    EXPECT_EQ(all.str().back(), 's') << "the whole log, as written";
}

TEST_F(LogsRankJob, AnUntaggedLogIsRefusedWithTheReason) {
    std::ofstream(dir / "run" / "job.log") << "dltrain: training\niteration 10\n";
    std::ostringstream out;
    auto printed = logs(0, out);
    ASSERT_FALSE(printed);
    EXPECT_NE(printed.error().message.find("no rank tags"), std::string::npos)
        << printed.error().message;
    EXPECT_NE(printed.error().hint.find("mpi.flavor"), std::string::npos) << printed.error().hint;
    EXPECT_EQ(out.str(), "");
}

} // namespace
} // namespace dljob::app
