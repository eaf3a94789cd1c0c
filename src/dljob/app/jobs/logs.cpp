#include <dljob/app/jobs/continuation.hpp>
#include <dljob/app/jobs/logs.hpp>
#include <dljob/app/jobs/status.hpp>

#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <ostream>
#include <thread>

namespace dljob::app {

std::filesystem::path job_log_path(const Job& job) {
    const std::filesystem::path dir(job.run_dir);
    if (auto earlier = dir / attempt_log_name(job.attempt); std::filesystem::exists(earlier)) {
        return earlier; // an attempt that was continued
    }
    if (std::filesystem::exists(dir / "job.log")) {
        return dir / "job.log";
    }
    std::filesystem::path newest;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const auto name = entry.path().filename().string();
        const bool output = name.ends_with(".out") || name.find(".o") != std::string::npos;
        if (output && entry.is_regular_file() && name != "job.sh" && name != "job.pbs" &&
            (newest.empty() ||
             entry.last_write_time() > std::filesystem::last_write_time(newest))) {
            newest = entry.path();
        }
    }
    return newest.empty() ? dir / "job.log" : newest;
}

Result<void> print_logs(JobContext& context, const std::string& id, bool follow,
                        std::ostream& out) {
    auto job = context.find_job(id);
    if (!job) {
        return fail(job.error());
    }
    std::streamoff offset = 0;
    StatusOptions options;
    options.min_interval_s = default_poll_interval();
    while (true) {
        const auto path = job_log_path(*job);
        std::ifstream in(path, std::ios::binary);
        if (in) {
            in.seekg(offset);
            std::string chunk((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
            offset += static_cast<std::streamoff>(chunk.size());
            out << chunk << std::flush;
        } else if (!follow) {
            return fail(
                ErrorCode::not_found,
                fmt::format("job {} has no output yet ({} does not exist)", id, path.string()),
                "the job may still be pending; 'dljob status' shows its state");
        }
        if (!follow) {
            return {};
        }
        std::vector<std::string> warnings;
        DLJOB_TRY(refresh_jobs(context, {*job}, options, warnings));
        auto fresh = context.find_job(id);
        if (!fresh) {
            return fail(fresh.error());
        }
        if (is_terminal(fresh->state) && fresh->phase == SubmitPhase::submitted) {
            if (offset > 0 || !in) {
                // One last read for what was written after the previous one.
                std::ifstream last(job_log_path(*fresh), std::ios::binary);
                if (last) {
                    last.seekg(offset);
                    out << std::string((std::istreambuf_iterator<char>(last)),
                                       std::istreambuf_iterator<char>())
                        << std::flush;
                }
            }
            return {};
        }
        job = fresh;
        std::this_thread::sleep_for(std::chrono::seconds(1));
    }
}

} // namespace dljob::app
