// A site whose modules give a cuDNN older than dltrain's CUDA plugin takes (the seeds' Big Red II
// and Helios stacks): `render` and `submit` note it for a GPU train: job, `validate` of the
// profile and `doctor` say it too, each with what would work there; newer stacks say nothing.

#include "render_support.hpp"

#include <dljob/app/jobs/validate_service.hpp>
#include <dljob/config/site_loader.hpp>

#include <algorithm>
#include <fstream>

namespace dljob::test {
namespace {

bool any_mentions(const std::vector<std::string>& notes, const std::string& text) {
    return std::any_of(notes.begin(), notes.end(), [&](const std::string& note) {
        return note.find(text) != std::string::npos;
    });
}

TEST(CudnnStack, TheProfilesOfCudnn5And6SitesSayWhatTheyGiveAndWhere) {
    const auto helios = load_site("helios");
    ASSERT_TRUE(helios.modules.cudnn_major);
    EXPECT_EQ(*helios.modules.cudnn_major, 5);
    const std::string blocker = gpu_training_blocker(helios);
    EXPECT_NE(blocker.find("cuDNN 5 (its profile's modules.cudnn_major)"), std::string::npos)
        << blocker;
    EXPECT_NE(blocker.find("needs cuDNN 8 or later"), std::string::npos) << blocker;
    EXPECT_NE(blocker.find("resources.gpus: 0"), std::string::npos) << blocker;
    EXPECT_NE(gpu_training_blocker(load_site("bigred2")).find("give no cuDNN"), std::string::npos);
    for (const char* site : {"graham", "narval", "beluga", "slurm", "local"}) {
        EXPECT_EQ(gpu_training_blocker(load_site(site)), "") << site;
    }
}

TEST(CudnnStack, RenderNotesItForAGpuTrainJobOnlyThere) {
    auto templates = builtin_templates();
    for (const char* site : {"helios", "bigred2"}) {
        auto job = render::render_job(golden_request(site, "fashion-mnist"), templates);
        ASSERT_TRUE(job) << job.error().message;
        EXPECT_TRUE(any_mentions(job->notes, "but dltrain's CUDA plugin needs cuDNN 8")) << site;
        auto cpu = golden_request(site, "fashion-mnist");
        cpu.recipe.resources.gpus = 0;
        cpu.recipe.resources.cores = 1;
        auto on_cpu = render::render_job(cpu, templates);
        ASSERT_TRUE(on_cpu) << on_cpu.error().message;
        EXPECT_FALSE(any_mentions(on_cpu->notes, "cuDNN")) << site;
    }
    auto graham = render::render_job(golden_request("graham", "fashion-mnist"), templates);
    ASSERT_TRUE(graham) << graham.error().message;
    EXPECT_FALSE(any_mentions(graham->notes, "needs cuDNN"));
}

TEST(CudnnStack, ValidateOfTheProfileSaysItAndAnOutOfRangeValueIsRefusedAtItsLine) {
    const auto results = app::validate_files({source_dir / "site-profiles" / "helios.yaml",
                                              source_dir / "site-profiles" / "graham.yaml"});
    ASSERT_EQ(results.size(), 2U);
    EXPECT_TRUE(results[0].ok) << results[0].message;
    EXPECT_TRUE(any_mentions(results[0].notes, "needs cuDNN 8 or later"));
    EXPECT_TRUE(results[1].ok) << results[1].message;
    EXPECT_FALSE(any_mentions(results[1].notes, "cuDNN"));

    const auto dir =
        std::filesystem::temp_directory_path() / ("dljob-cudnn-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::string text = read_text(source_dir / "site-profiles" / "helios.yaml");
    const std::string line = "cudnn_major: 5";
    const auto at = text.find(line);
    ASSERT_NE(at, std::string::npos);
    text.replace(at, line.size(), "cudnn_major: 123");
    const auto file = dir / "helios.yaml";
    std::ofstream(file) << text;
    auto loaded = config::load_site_profile(file);
    ASSERT_FALSE(loaded);
    EXPECT_EQ(loaded.error().code, ErrorCode::config_invalid);
    EXPECT_NE(loaded.error().message.find("modules.cudnn_major"), std::string::npos)
        << loaded.error().message;
    EXPECT_NE(loaded.error().message.find(file.string() + ":"), std::string::npos)
        << loaded.error().message;
    std::filesystem::remove_all(dir);
}

} // namespace
} // namespace dljob::test
