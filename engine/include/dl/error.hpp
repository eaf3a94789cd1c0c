#pragma once
// The engine's own error type (it never includes dljob's). The kind decides dltrain's exit code
// (docs/engine.md): messages name the file, line, key and the valid choices where there are any.

#include <stdexcept>
#include <string>

namespace dl {

enum class ErrorKind {
    usage,    // bad command line: exit 2
    config,   // invalid config or missing/invalid data file: exit 3
    training, // training failed (NaN loss, I/O failure while running): exit 1
    device,   // a CUDA, cuDNN or cuBLAS call failed, or no usable GPU: exit 1
    stopped,  // a stop signal or the deadline came before the first step: exit 75
};

class Error : public std::runtime_error {
public:
    Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), m_kind(kind) {}
    [[nodiscard]] ErrorKind kind() const { return m_kind; }

private:
    ErrorKind m_kind;
};

/// For the readers of data files, whose every refusal is a config error (exit 3).
[[noreturn]] inline void fail_config(const std::string& message) {
    throw Error(ErrorKind::config, message);
}

/// Exit codes of dltrain, one place for all of them.
namespace exit_code {
inline constexpr int finished = 0;
inline constexpr int failed = 1;
inline constexpr int usage = 2;
inline constexpr int invalid_config = 3;
inline constexpr int checkpointed = 75; // EX_TEMPFAIL: checkpointed before the walltime, resume me
} // namespace exit_code

inline int exit_code_for(ErrorKind kind) {
    switch (kind) {
    case ErrorKind::usage:
        return exit_code::usage;
    case ErrorKind::config:
        return exit_code::invalid_config;
    case ErrorKind::training:
    case ErrorKind::device:
        return exit_code::failed;
    case ErrorKind::stopped:
        return exit_code::checkpointed;
    }
    return exit_code::failed;
}

} // namespace dl
