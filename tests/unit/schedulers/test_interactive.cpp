// `dljob shell`: the interactive command per scheduler family, built from the same rendered
// request a submit uses, and the session's rc file run by a real bash.
#include "unit/render/render_support.hpp"

#include <dljob/schedulers/interactive.hpp>
#include <dljob/util/files.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace dljob {
namespace {

using schedulers::InteractiveRequest;

struct Planned {
    InteractiveRequest request;
    schedulers::InteractivePlan plan;
};

RenderRequest session_request(const std::string& site, int gpus) {
    RenderRequest request = test::golden_request(site, "fashion-mnist");
    request.recipe.resources.gpus = gpus;
    request.recipe.resources.memory.reset();
    request.recipe.mail.address = "someone@example.org";
    request.recipe.mail.on_end = true;
    request.job_name = "interactive";
    request.job_token = "0123456789";
    return request;
}

Planned plan_for(const RenderRequest& render_request, bool slurm_wrapper = false) {
    auto templates = test::builtin_templates();
    auto rendered = render::render_job(render_request, templates);
    EXPECT_TRUE(rendered) << (rendered ? "" : rendered.error().message);
    Planned out;
    static SiteProfile site; // the request points into it
    site = render_request.site;
    out.request.site = &site;
    out.request.partition = site.find_partition(render_request.partition);
    out.request.rendered = rendered ? *rendered : RenderedJob{};
    out.request.token = render_request.job_token;
    out.request.rc_path = "/scratch/runs/s/session.rc";
    out.request.session_path = "/scratch/runs/s/session.sh";
    // What the PBS family's probe prints on Slurm's Torque wrapper (only it has --sbatchline).
    out.request.probe_output = slurm_wrapper ? "salloc --time=00:30:00 -N 1\n" : "";
    auto plan = schedulers::plan_interactive(out.request);
    EXPECT_TRUE(plan) << (plan ? "" : plan.error().message);
    if (plan) {
        out.plan = *plan;
    }
    return out;
}

bool has(const std::vector<std::string>& argv, const std::string& word) {
    return std::find(argv.begin(), argv.end(), word) != argv.end();
}

bool has_prefix(const std::vector<std::string>& argv, const std::string& prefix) {
    return std::any_of(argv.begin(), argv.end(),
                       [&](const std::string& a) { return a.rfind(prefix, 0) == 0; });
}

TEST(Interactive, SlurmAllocatesWithTheSubmitResourcesAndNamesTheShell) {
    const auto planned = plan_for(session_request("graham", 1));
    const auto& argv = planned.plan.argv;
    ASSERT_FALSE(argv.empty());
    EXPECT_EQ(argv.front(), "salloc");
    EXPECT_TRUE(has(argv, "--gpus-per-node=p100:1"));
    EXPECT_TRUE(has(argv, "--account=def-golden"));
    EXPECT_TRUE(has(argv, "--job-name=interactive"));
    EXPECT_TRUE(has(argv, "--comment=dljob:0123456789"));
    EXPECT_TRUE(has_prefix(argv, "--time="));
    for (const char* batch_only : {"--output=", "--signal=", "--no-requeue", "--mail-", "--open"}) {
        EXPECT_FALSE(has_prefix(argv, batch_only)) << batch_only;
    }
    const std::vector<std::string> tail{
        "srun",       "--overlap", "--pty",    "--nodes=1",
        "--ntasks=1", "/bin/bash", "--rcfile", "/scratch/runs/s/session.rc",
        "-i"};
    ASSERT_GE(argv.size(), tail.size());
    EXPECT_TRUE(std::equal(tail.begin(), tail.end(), argv.end() - static_cast<long>(tail.size())));
    EXPECT_TRUE(planned.plan.launch.empty());
}

TEST(Interactive, SlurmGresSyntaxComesFromTheSite) {
    auto request = session_request("slurm", 2);
    const auto planned = plan_for(request);
    EXPECT_TRUE(has(planned.plan.argv, "--gres=gpu:2"));
    EXPECT_FALSE(has_prefix(planned.plan.argv, "--gpus-per-node"));
}

TEST(Interactive, TorqueRunsTheSessionScriptInsideTheJobWithX) {
    const auto planned = plan_for(session_request("bigred2", 1));
    const std::vector<std::string> expected{"qsub",
                                            "-I",
                                            "-x",
                                            "-N",
                                            "dlj-0123456789",
                                            "-q",
                                            "gpu",
                                            "-l",
                                            "nodes=1:ppn=16,walltime=02:00:00",
                                            "/scratch/runs/s/session.sh"};
    EXPECT_EQ(planned.plan.argv, expected);
}

TEST(Interactive, BigRed2ShellIsOnAServiceNodeSoAprunIsProvided) {
    const auto planned = plan_for(session_request("bigred2", 1));
    EXPECT_EQ(planned.plan.launch, "aprun -n 1 -N 1 -d 16 -cc none");
    ASSERT_EQ(planned.plan.notes.size(), 1U);
    EXPECT_NE(planned.plan.notes[0].find("service (MOM) node"), std::string::npos);
}

TEST(Interactive, SlurmsTorqueWrapperGetsNoX) {
    const auto planned = plan_for(session_request("bigred2", 1), /*slurm_wrapper=*/true);
    EXPECT_FALSE(has(planned.plan.argv, "-x"));
    EXPECT_EQ(planned.plan.argv[1], "-I");
    EXPECT_EQ(planned.plan.argv.back(), "/scratch/runs/s/session.sh");
}

TEST(Interactive, MoabPassesAccountAndFeatures) {
    const auto planned = plan_for(session_request("helios", 2));
    const std::vector<std::string> expected{"msub",
                                            "-I",
                                            "-x",
                                            "-N",
                                            "dlj-0123456789",
                                            "-A",
                                            "def-golden",
                                            "-l",
                                            "nodes=1:gpus=2,walltime=02:00:00",
                                            "-l",
                                            "feature=k80",
                                            "/scratch/runs/s/session.sh"};
    EXPECT_EQ(planned.plan.argv, expected);
}

TEST(Interactive, SqsubHasNoInteractiveModeAndSaysWhatComesClosest) {
    const auto planned = plan_for(session_request("sharcnet", 1));
    EXPECT_TRUE(planned.plan.argv.empty());
    EXPECT_NE(planned.plan.refusal.find("no interactive mode"), std::string::npos);
    EXPECT_NE(planned.plan.refusal.find("nothing was allocated"), std::string::npos);
    EXPECT_NE(planned.plan.alternative.find("--nompirun screen -D -m"), std::string::npos);
    EXPECT_NE(planned.plan.alternative.find("--gpp=1"), std::string::npos);
    EXPECT_EQ(planned.plan.alternative.find("--idfile"), std::string::npos);
}

TEST(Interactive, LocalIsASubshell) {
    const auto planned = plan_for(session_request("local", 0));
    const std::vector<std::string> expected{"/bin/bash", "--rcfile", "/scratch/runs/s/session.rc",
                                            "-i"};
    EXPECT_EQ(planned.plan.argv, expected);
}

TEST(Interactive, PbsRefusesASessionPathQsubCannotCarry) {
    auto planned = plan_for(session_request("bigred2", 1));
    planned.request.session_path = "/scratch/my runs/session.sh";
    auto plan = schedulers::plan_interactive(planned.request);
    ASSERT_FALSE(plan);
    EXPECT_EQ(plan.error().code, ErrorCode::config_invalid);
}

TEST(Interactive, ScriptBlockTakesTheLinesBetweenMarkers) {
    const std::string text = "a\nstart\nb\nc\nend\nd\n";
    EXPECT_EQ(schedulers::script_block(text, "start", "end"),
              (std::vector<std::string>{"start", "b", "c"}));
    EXPECT_TRUE(schedulers::script_block(text, "missing", "end").empty());
}

// The session loads exactly the module lines the batch script of the same request runs.
TEST(Interactive, SessionRcReusesTheBatchScriptsModuleLinesOnEverySite) {
    auto templates = test::builtin_templates();
    for (const auto& site : test::builtin_sites()) {
        auto request = session_request(site, site == "local" || site == "slurm" ? 0 : 1);
        if (site == "slurm") {
            request.recipe.needs.clear();
        }
        auto rendered = render::render_job(request, templates);
        ASSERT_TRUE(rendered) << site << ": " << rendered.error().message;
        schedulers::SessionFiles files;
        files.site = site;
        files.scheduler = rendered->scheduler;
        files.token = request.job_token;
        files.stage = true;
        auto rc = schedulers::session_rc(files, rendered->script);
        ASSERT_TRUE(rc) << site;
        std::istringstream lines(rendered->script);
        std::string line;
        int modules = 0;
        while (std::getline(lines, line)) {
            if (line.rfind("dljob_module ", 0) == 0) {
                ++modules;
                EXPECT_NE(rc->find("\n" + line + "\n"), std::string::npos) << site << ": " << line;
            }
        }
        if (site != "local" && site != "slurm") {
            EXPECT_GT(modules, 0) << site;
        }
        EXPECT_LT(rc->find(".bashrc"), rc->find("DLJOB_RUN_DIR=")) << site;
        EXPECT_NE(rc->find("PS1="), std::string::npos) << site;
        EXPECT_EQ(rc->find("set -u"), std::string::npos) << site << ": no strict mode in a shell";
    }
}

TEST(Interactive, SessionRcRefusesAScriptWithoutTheBlocksItReuses) {
    schedulers::SessionFiles files;
    auto rc = schedulers::session_rc(files, "#!/bin/bash\necho hi\n");
    ASSERT_FALSE(rc);
    EXPECT_EQ(rc.error().code, ErrorCode::internal);
}

// The rc file in a real interactive bash: ~/.bashrc first, values, identity file, prompt.
TEST(Interactive, SessionRcRunsInBash) {
    const auto dir =
        std::filesystem::temp_directory_path() / ("dljob-shell-rc-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "home");
    std::filesystem::create_directories(dir / "run");
    ASSERT_EQ(
        util::write_file_atomic(dir / "home" / ".bashrc", "export FROM_BASHRC=yes\nPS1='user> '\n"),
        "");
    auto request = session_request("local", 0);
    request.run_dir = dir / "run";
    auto templates = test::builtin_templates();
    auto rendered = render::render_job(request, templates);
    ASSERT_TRUE(rendered) << rendered.error().message;
    schedulers::SessionFiles files;
    files.site = "local";
    files.scheduler = "local";
    files.token = request.job_token;
    files.notes = {"a note with 'quotes' and $dollars"};
    auto rc = schedulers::session_rc(files, rendered->script);
    ASSERT_TRUE(rc);
    ASSERT_EQ(util::write_file_atomic(dir / "session.rc", *rc), "");
    const std::string out_file = (dir / "out.txt").string();
    const std::string command =
        "cd / && HOME='" + (dir / "home").string() + "' /bin/bash --rcfile '" +
        (dir / "session.rc").string() +
        "' -i -c 'echo \"$DLJOB_SITE|$FROM_BASHRC|$PWD|$DLJOB_JOB_TOKEN|${PS1%% *}\"' >'" +
        out_file + "' 2>&1";
    ASSERT_EQ(std::system(command.c_str()), 0); // NOLINT(cert-env33-c,concurrency-mt-unsafe)
    const auto out = util::read_file(out_file).value_or("");
    EXPECT_NE(out.find("a note with 'quotes' and $dollars"), std::string::npos) << out;
    EXPECT_NE(out.find("local|yes|" + (dir / "run").string() + "|0123456789|[dljob"),
              std::string::npos)
        << out;
    const auto identity = util::read_file(dir / "run" / "job_identity").value_or("");
    EXPECT_NE(identity.find("token=0123456789\n"), std::string::npos) << identity;
    EXPECT_NE(identity.find("job_id=local-"), std::string::npos) << identity;
    std::filesystem::remove_all(dir);
}

// With a recipe that stages to node-local storage, the session copies a plain data tree where
// the batch job would ($TMPDIR is the generic Slurm site's node-local tier) and, as the batch
// job does at its end, removes the copy when the session ends unless data.keep_staged.
void stage_in_a_session(bool keep_staged) {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("dljob-shell-stage-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    for (const char* sub : {"home", "run", "node", "source/sub"}) {
        std::filesystem::create_directories(dir / sub);
    }
    ASSERT_EQ(util::write_file_atomic(dir / "source" / "sub" / "a.bin", "data"), "");
    auto request = session_request("slurm", 0);
    request.recipe.needs.clear();
    request.recipe.data.source = (dir / "source").string();
    request.recipe.data.stage_to = "node-local";
    request.recipe.data.keep_staged = keep_staged;
    request.run_dir = dir / "run";
    auto templates = test::builtin_templates();
    auto rendered = render::render_job(request, templates);
    ASSERT_TRUE(rendered) << rendered.error().message;
    schedulers::SessionFiles files;
    files.site = "slurm";
    files.scheduler = "slurm";
    files.token = request.job_token;
    files.stage = true;
    files.keep_staged = keep_staged;
    files.dljob_binary = "/nonexistent/dljob"; // a plain tree never calls it
    auto rc = schedulers::session_rc(files, rendered->script);
    ASSERT_TRUE(rc);
    ASSERT_EQ(util::write_file_atomic(dir / "session.rc", *rc), "");
    const std::string out_file = (dir / "out.txt").string();
    const std::string command =
        "HOME='" + (dir / "home").string() + "' TMPDIR='" + (dir / "node").string() +
        "' /bin/bash --rcfile '" + (dir / "session.rc").string() +
        "' -i -c 'echo \"DATA=$DLJOB_DATA_DIR\"; cat \"$DLJOB_DATA_DIR/sub/a.bin\"; echo' >'" +
        out_file + "' 2>&1";
    ASSERT_EQ(std::system(command.c_str()), 0); // NOLINT(cert-env33-c,concurrency-mt-unsafe)
    const auto staged = dir / "node" / "dljob-0123456789";
    const auto out = util::read_file(out_file).value_or("");
    EXPECT_NE(out.find("DATA=" + staged.string() + "\ndata\n"), std::string::npos) << out;
    EXPECT_EQ(out.find("warning"), std::string::npos) << out;
    if (keep_staged) {
        EXPECT_EQ(util::read_file(staged / "sub" / "a.bin").value_or(""), "data");
    } else {
        EXPECT_FALSE(std::filesystem::exists(staged)) << "the copy outlived the session";
    }
    EXPECT_TRUE(std::filesystem::exists(dir / "source" / "sub" / "a.bin"));
    std::filesystem::remove_all(dir);
}

TEST(Interactive, SessionRcStagesTheRecipesDataAndRemovesItAtTheEnd) {
    stage_in_a_session(false);
}

TEST(Interactive, SessionRcKeepsStagedDataWhenTheRecipeSaysSo) {
    stage_in_a_session(true);
}

} // namespace
} // namespace dljob
