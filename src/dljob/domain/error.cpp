#include <dljob/domain/error.hpp>

namespace dljob {

// Exit codes are part of the CLI contract (docs/cli.md): scripts branch on them, so values are
// never reused. 2 for usage follows CLI convention (getopt tools, argparse, CLI11).
int exit_code_for(ErrorCode code) noexcept {
    switch (code) {
    case ErrorCode::usage:
        return 2;
    case ErrorCode::config_invalid:
        return 3;
    case ErrorCode::scheduler_rejected:
        return 4;
    case ErrorCode::scheduler_unreachable:
        return 5;
    case ErrorCode::store:
        return 6;
    case ErrorCode::not_found:
        return 7;
    case ErrorCode::io:
        return 8;
    case ErrorCode::timeout:
        return 9;
    case ErrorCode::interrupted:
        return 130; // 128 + SIGINT, as shells report it
    case ErrorCode::internal:
        return 70; // EX_SOFTWARE from sysexits.h
    }
    return 70;
}

const char* to_string(ErrorCode code) noexcept {
    switch (code) {
    case ErrorCode::usage:
        return "usage";
    case ErrorCode::config_invalid:
        return "config_invalid";
    case ErrorCode::not_found:
        return "not_found";
    case ErrorCode::scheduler_rejected:
        return "scheduler_rejected";
    case ErrorCode::scheduler_unreachable:
        return "scheduler_unreachable";
    case ErrorCode::timeout:
        return "timeout";
    case ErrorCode::store:
        return "store";
    case ErrorCode::io:
        return "io";
    case ErrorCode::interrupted:
        return "interrupted";
    case ErrorCode::internal:
        return "internal";
    }
    return "internal";
}

} // namespace dljob
