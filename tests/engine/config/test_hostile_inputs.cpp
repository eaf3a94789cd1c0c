// The hostile-input corpus, tests/engine/hostile/: nets, solvers, mean files and weights that
// crashed dltrain, hung it or were trained on without a word, each now refused. Every file says
// what it was (its first comment line) and what dltrain must do with it:
//   # expect-exit: N          the exit status (3: a config error, named)
//   # expect: TEXT            what the output must say (the reason, not just any error)
//   # command: train [ARGS]   two training steps with ARGS instead of `check` (the default)
//   # lmdb: NAME FILE...      an LMDB NAME in the workspace whose records are FILE's bytes, in
//                             order (Caffe's Datums: the corpus's .datum files)
// A case runs in a workspace holding the corpus's files beside generated IDX data (8x8 images,
// labels 0 to 2) and must end with its status within 60 s: never a signal, a hang or a
// sanitizer's report. Two controls (valid-net*) must pass, so a runner that fails everything
// fails. ctest runs the corpus a second time against a dltrain built with AddressSanitizer and
// UndefinedBehaviorSanitizer (scripts/sanitize-hostile.sh), where a read or write out of bounds
// is a report and an exit status of its own even when the output looks right.

#include "datum_support.hpp"
#include "engine_test_support.hpp"
#include "support/run_process.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using dljob::test::run_shell;

fs::path hostile_dir() {
    return fs::path(DLJOB_SOURCE_DIR) / "tests" / "engine" / "hostile";
}

/// The corpus's configs (every .prototxt and .yaml), by name.
std::vector<std::string> hostile_cases() {
    std::vector<std::string> names;
    std::error_code ec;
    for (fs::directory_iterator it(hostile_dir(), ec), end; !ec && it != end; it.increment(ec)) {
        const std::string ext = it->path().extension().string();
        if (ext == ".prototxt" || ext == ".yaml") {
            names.push_back(it->path().filename().string());
        }
    }
    std::sort(names.begin(), names.end());
    return names;
}

struct Expectation {
    int exit_code = -1;
    std::string command = "check";
    std::vector<std::string> output; // what the output must say
    std::vector<std::string> lmdb;   // NAME FILE...
};

Expectation expectation_of(const fs::path& file) {
    Expectation expect;
    std::ifstream in(file);
    for (std::string line; std::getline(in, line) && line.rfind('#', 0) == 0;) {
        if (line.rfind("# expect-exit: ", 0) == 0) {
            expect.exit_code = std::stoi(line.substr(15));
        } else if (line.rfind("# expect: ", 0) == 0) {
            expect.output.push_back(line.substr(10));
        } else if (line.rfind("# command: ", 0) == 0) {
            expect.command = line.substr(11);
        } else if (line.rfind("# lmdb: ", 0) == 0) {
            std::istringstream words(line.substr(8));
            for (std::string word; words >> word;) {
                expect.lmdb.push_back(word);
            }
        }
    }
    return expect;
}

class HostileInputs : public ::testing::TestWithParam<std::string> {
protected:
    dl_test::TempDir m_dir;
};

TEST_P(HostileInputs, EndsWithItsExitStatusAndNoSignalHangOrSanitizerReport) {
    const std::string name = GetParam();
    const Expectation expect = expectation_of(hostile_dir() / name);
    ASSERT_GE(expect.exit_code, 0) << name << " has no '# expect-exit: N' line";
    const fs::path ws = m_dir.path();
    dl_test::make_tiny_workspace(ws, 2);
    fs::copy(hostile_dir(), ws, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    if (!expect.lmdb.empty()) {
        std::vector<std::string> records;
        for (std::size_t i = 1; i < expect.lmdb.size(); ++i) {
            records.push_back(dl_test::read_file(hostile_dir() / expect.lmdb[i]));
        }
        dl_test::write_lmdb(ws / expect.lmdb.front(), records);
    }
    const bool train = expect.command.rfind("train", 0) == 0;
    std::string command = "cd " + ws.string() + " && timeout -s KILL 60 " +
                          std::string(DLTRAIN_BINARY) + " " + expect.command + " --config " +
                          (ws / name).string() + " --data-dir " + ws.string();
    if (train) {
        command +=
            " --run-dir " + (ws / "run").string() + " --device cpu --threads 1 --deadline none";
    }
    const auto result = run_shell(command);
    EXPECT_EQ(result.exit_code, expect.exit_code) << command << "\n" << result.output;
    // Exit statuses past 128 are signals (137: the timeout's KILL), 86 and 87 the sanitizers'.
    EXPECT_LT(result.exit_code, 64) << result.output;
    for (const std::string& text : expect.output) {
        EXPECT_NE(result.output.find(text), std::string::npos) << "no '" << text << "' in:\n"
                                                               << result.output;
    }
    EXPECT_EQ(result.output.find("AddressSanitizer"), std::string::npos) << result.output;
    EXPECT_EQ(result.output.find("runtime error:"), std::string::npos) << result.output;
    if (expect.exit_code == 3) {
        // A config error names a file: the case's own, or the file its command names.
        const std::string named_file =
            train && expect.command.find("--weights ") != std::string::npos
                ? expect.command.substr(expect.command.find("--weights ") + 10)
                : name;
        EXPECT_NE(result.output.find("dltrain: error: "), std::string::npos) << result.output;
        EXPECT_NE(result.output.find(named_file), std::string::npos)
            << "the error does not name " << named_file << ":\n"
            << result.output;
        EXPECT_FALSE(fs::exists(ws / "run")) << "a refused run left a run directory";
    }
}

std::string case_name(const ::testing::TestParamInfo<std::string>& info) {
    std::string name = info.param;
    std::replace_if(
        name.begin(), name.end(), [](char c) { return std::isalnum(c) == 0; }, '_');
    return name;
}

INSTANTIATE_TEST_SUITE_P(Corpus, HostileInputs, ::testing::ValuesIn(hostile_cases()), case_name);

} // namespace
