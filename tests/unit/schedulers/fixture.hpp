#pragma once
// Reads a recorded scheduler output from tests/fixtures/scheduler-output/.

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace dljob::testing {

inline std::string scheduler_output(const std::string& name) {
    const std::string path =
        std::string(DLJOB_SOURCE_DIR) + "/tests/fixtures/scheduler-output/" + name;
    std::ifstream in(path);
    if (!in) {
        throw std::runtime_error("missing fixture " + path);
    }
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

} // namespace dljob::testing
