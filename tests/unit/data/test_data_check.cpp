#include "support/env_of.hpp"
#include "support/run_process.hpp"
#include "unit/data/data_test_support.hpp"

#include <dljob/app/data/data_check.hpp>

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace dljob::app {
namespace {

using test::ScratchDir;

using test::env_of;

TEST(DataCheck, MissingCatalogDataNamesTheFetchCommand) {
    ScratchDir home;
    const auto notes = data_notes({"$HOME/data/mnist", "none"}, env_of({{"HOME", home.path()}}));
    ASSERT_EQ(notes.size(), 1U);
    EXPECT_NE(notes[0].find("dljob fetch-data mnist --to " + (home / "data/mnist")),
              std::string::npos)
        << notes[0];
}

TEST(DataCheck, MissingOtherDataNamesFetchDataWithAUrl) {
    ScratchDir home;
    const auto notes =
        data_notes({"~/data/imagenet", "node-local"}, env_of({{"HOME", home.path()}}));
    ASSERT_EQ(notes.size(), 1U);
    EXPECT_NE(notes[0].find("dljob fetch-data URL --to " + (home / "data/imagenet")),
              std::string::npos)
        << notes[0];
}

TEST(DataCheck, PresentDataOnALocalDiskAndJobOnlyVariablesSayNothing) {
    ScratchDir dir;
    test::write_file(dir.path() / "mnist/train-images-idx3-ubyte.gz", "x");
    EXPECT_TRUE(data_notes({dir / "mnist", "none"}, env_of({})).empty());
    // $SCRATCH is set only inside jobs on some sites: nothing to check on the submit host.
    EXPECT_TRUE(data_notes({"$SCRATCH/mnist", "none"}, env_of({})).empty());
    EXPECT_TRUE(data_notes({"", "none"}, env_of({})).empty());
}

TEST(DataCheck, SubmitOfARecipeWithMissingDataSaysWhichCommandGetsIt) {
    ScratchDir home;
    const auto run = test::run_shell(
        "HOME=" + home.path().string() + " DLJOB_STORE=" + (home / "jobs.db") +
        " DLJOB_RUNS_DIR=" + (home / "runs") + " " + DLJOB_BINARY + " submit " + DLJOB_SOURCE_DIR +
        "/recipes/mnist.yaml --site local --set resources.gpus=0 --dry-run");
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_NE(run.output.find("dljob: note: data.source " + (home / "data/mnist") +
                              " does not exist on this host; get it with: dljob fetch-data mnist"),
              std::string::npos)
        << run.output;
}

} // namespace
} // namespace dljob::app
