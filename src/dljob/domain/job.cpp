#include <dljob/domain/job.hpp>

namespace dljob {

const char* to_string(SubmitPhase phase) noexcept {
    switch (phase) {
    case SubmitPhase::submitting:
        return "submitting";
    case SubmitPhase::submitted:
        return "submitted";
    case SubmitPhase::submit_unknown:
        return "submit_unknown";
    }
    return "submit_unknown";
}

std::optional<SubmitPhase> parse_submit_phase(std::string_view text) noexcept {
    if (text == "submitting") {
        return SubmitPhase::submitting;
    }
    if (text == "submitted") {
        return SubmitPhase::submitted;
    }
    if (text == "submit_unknown") {
        return SubmitPhase::submit_unknown;
    }
    return std::nullopt;
}

} // namespace dljob
