// A corpus of hostile values through every user-controlled field of every built-in site:
// each value is refused with config_invalid, or the rendered script passes
// `bash -n`, its directives parse back to exactly the intended set (none smuggled), and running
// it with stand-ins never runs an injected command. `shellcheck -S warning` reads the scripts of
// a diagonal of each site's field-by-value grid, moved one step along per site: every field and
// every value is linted on every site where it renders. A value reaches a script only through the
// renderer's quoting, and shellcheck of all ~200 near-identical scripts per site was most of this
// test's time (~20 s a site).

#include "script_sandbox.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

namespace dljob::test {
namespace {

std::vector<std::string> corpus(const std::filesystem::path& canary) {
    const std::string touch = "touch " + canary.string();
    return {"it's",
            "say \"hi\"",
            "$(" + touch + ")",
            "`" + touch + "`",
            "x; " + touch,
            "x && " + touch,
            "x\n" + touch,
            "x\n#SBATCH --partition=bigmem\n#PBS -q evil",
            "x\r" + touch,
            "*",
            "?[a]*",
            "-rf",
            "--partition=evil",
            "héllo wörld ☃",
            std::string(5000, 'a'),
            "${IFS}$(" + touch + ")",
            "back\\slash"};
}

struct Field {
    const char* name;
    std::function<void(RenderRequest&, const std::string&)> set;
};

std::vector<Field> fields() {
    return {
        {"job_name", [](RenderRequest& r, const std::string& v) { r.job_name = v; }},
        {"recipe_name", [](RenderRequest& r, const std::string& v) { r.recipe.name = v; }},
        {"account", [](RenderRequest& r, const std::string& v) { r.account = v; }},
        {"job_token", [](RenderRequest& r, const std::string& v) { r.job_token = v; }},
        {"run_dir", [](RenderRequest& r, const std::string& v) { r.run_dir /= v; }},
        {"data_source",
         [](RenderRequest& r, const std::string& v) { r.recipe.data.source = "$HOME/data/" + v; }},
        {"train_config",
         [](RenderRequest& r, const std::string& v) { r.recipe.train.config = "/cfg/" + v; }},
        {"module", [](RenderRequest& r, const std::string& v) { r.recipe.modules = {v}; }},
        {"need", [](RenderRequest& r, const std::string& v) { r.recipe.needs = {v}; }},
        {"mail",
         [](RenderRequest& r, const std::string& v) {
             r.recipe.mail.address = v;
             r.recipe.mail.on_end = true;
         }},
        {"queue",
         [](RenderRequest& r, const std::string& v) {
             for (auto& p : r.site.partitions) {
                 p.queue = v;
             }
         }},
        {"feature",
         [](RenderRequest& r, const std::string& v) {
             for (auto& p : r.site.partitions) {
                 p.features = {v};
             }
         }},
        {"extra_directive",
         [](RenderRequest& r, const std::string& v) {
             for (auto& p : r.site.partitions) {
                 p.extra_directives = {v};
             }
         }},
        {"storage_path",
         [](RenderRequest& r, const std::string& v) {
             for (auto& t : r.site.storage) {
                 t.path = "$HOME/" + v;
             }
         }},
        {"signal",
         [](RenderRequest& r, const std::string& v) { r.site.behaviour.warning_signal = v; }},
    };
}

std::string directive_prefix(const std::string& kind) {
    if (kind == "slurm") {
        return "#SBATCH";
    }
    return kind == "pbs" || kind == "moab" ? "#PBS" : "";
}

// Every directive must be one the renderer means: present, with the same value, in the submit
// command (which is built from the same plan), so a value cannot add or change a directive.
void expect_directives_match_submit(const RenderedJob& job, const std::string& context) {
    const std::string prefix = directive_prefix(job.scheduler);
    if (prefix.empty()) {
        EXPECT_EQ(job.script.find("\n#SBATCH"), std::string::npos) << context;
        EXPECT_EQ(job.script.find("\n#PBS"), std::string::npos) << context;
        return;
    }
    const auto parsed = parse_directives(job.script, prefix);
    EXPECT_TRUE(parsed.stray.empty()) << context << ": directive-like line after the header";
    std::string argv_line;
    for (const auto& arg : job.submit_argv) {
        argv_line += arg + "\x1f";
    }
    for (const auto& directive : parsed.header) {
        std::string as_argv = directive;
        const auto space = as_argv.find(' ');
        if (space != std::string::npos) {
            as_argv[space] = '\x1f';
        }
        EXPECT_NE(argv_line.find("\x1f" + as_argv + "\x1f"), std::string::npos)
            << context << ": directive '" << directive << "' is not in the submit command";
    }
    const std::string name_directive = prefix == "#SBATCH" ? "--job-name=" + job.scheduler_job_name
                                                           : "-N " + job.scheduler_job_name;
    EXPECT_NE(std::find(parsed.header.begin(), parsed.header.end(), name_directive),
              parsed.header.end())
        << context;
}

class HostileValues : public ::testing::TestWithParam<std::string> {
protected:
    ScriptSandbox m_sandbox;
};

TEST_P(HostileValues, AreRefusedOrQuotedAndNeverExecuted) {
    const std::string site = GetParam();
    std::vector<std::filesystem::path> scripts;
    std::vector<std::filesystem::path> linted;
    int rendered_count = 0;
    int index = 0;
    const auto sites = builtin_sites();
    const auto site_offset =
        static_cast<std::size_t>(std::find(sites.begin(), sites.end(), site) - sites.begin());
    const auto all_fields = fields();
    const auto values = corpus(m_sandbox.canary);
    for (std::size_t f = 0; f < all_fields.size(); ++f) {
        const auto& field = all_fields[f];
        for (std::size_t v = 0; v < values.size(); ++v) {
            const auto& value = values[v];
            // The diagonal: each field once, each value at least once (17 values, 15 fields).
            const bool lint_this = (f + site_offset) % values.size() == v ||
                                   (v + site_offset) % all_fields.size() == f;
            const std::string context =
                fmt::format("site {} field {} value #{}", site, field.name, index);
            // The command recipe carries the value in argv and environment too; the train
            // recipe adds only the network config path.
            const bool train_field = std::string(field.name) == "train_config";
            for (const char* recipe : {train_field ? "mnist" : "pytorch-mnist"}) {
                RenderRequest req = golden_request(site, recipe);
                m_sandbox.adopt(req, fmt::format("r{}", index++));
                if (req.recipe.kind == RecipeKind::command) {
                    req.recipe.command.argv = {(m_sandbox.bin / "fake-train").string(), value};
                    req.recipe.command.environment = {
                        {"HOSTILE", EnvironmentSetting::Mode::set, {value}}};
                }
                field.set(req, value);
                auto templates = builtin_templates();
                auto job = render::render_job(req, templates);
                if (!job) {
                    EXPECT_EQ(job.error().code, ErrorCode::config_invalid) << context;
                    continue;
                }
                ++rendered_count;
                expect_directives_match_submit(*job, context);
                // A name the site cannot take is mapped visibly, never cut.
                if (job->scheduler_job_name != req.job_name) {
                    EXPECT_EQ(job->scheduler_job_name.rfind("dlj-", 0), 0U) << context;
                    EXPECT_FALSE(job->notes.empty()) << context;
                }
                const auto result = m_sandbox.run(req, *job);
                scripts.push_back(req.run_dir / job->script_name);
                if (lint_this) {
                    linted.push_back(scripts.back());
                }
                EXPECT_FALSE(std::filesystem::exists(m_sandbox.canary))
                    << context << ": an injected command ran\n"
                    << result.output;
                std::filesystem::remove(m_sandbox.canary); // so the next value is judged alone
                EXPECT_TRUE(std::filesystem::exists(req.run_dir / "exit_code"))
                    << context << ": the script did not reach its epilogue\n"
                    << result.output;
                if (req.recipe.kind == RecipeKind::command && result.exit_code == 0) {
                    const auto argv = read_nul_separated(req.run_dir / "train.argv");
                    ASSERT_EQ(argv.size(), 1U) << context;
                    if (value.rfind("~", 0) != 0 && value.find('$') == std::string::npos) {
                        EXPECT_EQ(argv[0], value) << context;
                    }
                }
            }
        }
    }
    EXPECT_GT(rendered_count, 0);
    // bash -n over every script that rendered, shellcheck over the diagonal's, one call each.
    const auto quoted = [](const std::vector<std::filesystem::path>& paths) {
        std::string words;
        for (const auto& path : paths) {
            words.append(" ").append(ScriptSandbox::quote(path.string()));
        }
        return words;
    };
    const auto syntax =
        run_shell("for f in" + quoted(scripts) + "; do bash -n \"$f\" || exit 1; done");
    EXPECT_EQ(syntax.exit_code, 0) << syntax.output;
    EXPECT_GE(linted.size(), all_fields.size() / 2) << "too few scripts rendered to lint";
    const auto lint = run_shell("shellcheck -S warning" + quoted(linted));
    EXPECT_EQ(lint.exit_code, 0) << lint.output.substr(0, 4000);
}

INSTANTIATE_TEST_SUITE_P(EverySite, HostileValues, ::testing::ValuesIn(builtin_sites()),
                         [](const auto& param_info) { return param_info.param; });

} // namespace
} // namespace dljob::test
