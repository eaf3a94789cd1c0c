#pragma once
// Typed errors. Inside the library, fallible functions return Result<T>; at the edges (the CLI's
// one try in cli::run) an Error becomes a message on stderr and a documented exit code.

#include <stdexcept>
#include <string>
#include <utility>

namespace dljob {

/// What went wrong, coarse enough to choose an exit code (docs/cli.md lists them).
enum class ErrorCode {
    usage,                 // bad command line
    config_invalid,        // a recipe, site profile or other input file is wrong
    not_found,             // a named job, site, file or dataset does not exist
    scheduler_rejected,    // the scheduler refused the request
    scheduler_unreachable, // the scheduler's commands failed or are missing
    timeout,               // an external command or transfer took too long
    store,                 // the job store (SQLite) failed or is from a newer dljob
    io,                    // reading or writing files failed
    interrupted,           // Ctrl-C or a signal
    internal,              // a bug in dljob
};

/// The exit code `dljob` returns for each ErrorCode.
int exit_code_for(ErrorCode code) noexcept;

/// Lower-case name of the code, as shown in --json output and logs.
const char* to_string(ErrorCode code) noexcept;

/// A value describing a failure: what happened (message) and what to do about it (hint).
struct Error {
    ErrorCode code = ErrorCode::internal;
    std::string message;
    std::string hint;
};

/// The exception that carries an Error across layers that cannot return Result (constructors,
/// callbacks). Caught only in cli::run.
class Failure : public std::runtime_error {
public:
    explicit Failure(Error error) : std::runtime_error(error.message), m_error(std::move(error)) {}
    Failure(ErrorCode code, std::string message, std::string hint = {})
        : Failure(Error{code, std::move(message), std::move(hint)}) {}
    [[nodiscard]] const Error& error() const noexcept { return m_error; }

private:
    Error m_error;
};

} // namespace dljob
