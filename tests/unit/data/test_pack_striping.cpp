#include <dljob/app/data/pack.hpp>

#include <gtest/gtest.h>

namespace dljob::app {
namespace {

TEST(PackStriping, OnLustreThePackDirectoryGetsOneMebibyteStripesOverFourTargets) {
    EXPECT_EQ(lustre_stripe_command("lustre", "/lustre/u/fm.dlpack.partial.1"),
              (std::vector<std::string>{"lfs", "setstripe", "--stripe-size", "1M", "--stripe-count",
                                        "4", "/lustre/u/fm.dlpack.partial.1"}));
}

TEST(PackStriping, ElsewhereNothingIsRunOrSaid) {
    for (const char* fs : {"ext4", "xfs", "tmpfs", "nfs", "gpfs", "local", ""}) {
        EXPECT_TRUE(lustre_stripe_command(fs, "/x").empty()) << fs;
    }
}

} // namespace
} // namespace dljob::app
