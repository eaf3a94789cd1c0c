#include <dljob/app/data/pack.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/domain/error.hpp>
#include <dljob/domain/stage.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <chrono>
#include <memory>
#include <ostream>

namespace dljob::cli {

void set_pack_command(CLI::App& app, Context& context) {
    auto* command = app.add_subcommand(
        "pack",
        "Pack a directory tree, an image list of 'path label' lines or Caffe's LMDB or "
        "LevelDB of Datums into one tar archive with an index and a manifest (docs/data.md)");
    auto request = std::make_shared<app::PackRequest>();
    command
        ->add_option("SOURCE", request->source,
                     "Directory, image list file (train.txt), or Caffe LMDB or LevelDB of Datums")
        ->required();
    command->add_option("-o,--output", request->output, "Dataset directory to create")->required();
    command->add_option("--root", request->list_root,
                        "For an image list: the directory its paths start from (default: the "
                        "list's directory)");
    auto compress = std::make_shared<std::string>("none");
    auto shard_size = std::make_shared<std::string>();
    command->add_option("--compress", *compress,
                        "none (default), zstd or zstd:LEVEL: the tar as independent zstd frames "
                        "of 4 MiB each (tar --zstd and zstd -d read it; dltrain reads members "
                        "in place)");
    command->add_option("--shard-size", *shard_size,
                        "Split into data files of at most SIZE of tar each (e.g. 4G), each a "
                        "complete tar; a member is never split");
    command->callback([request, compress, shard_size, &context] {
        if (auto parsed = app::parse_compression(*compress, *request); !parsed) {
            throw Failure(parsed.error());
        }
        if (!shard_size->empty()) {
            request->shard_bytes = parse_bytes(*shard_size, "--shard-size");
            if (request->shard_bytes == 0) {
                throw Failure(ErrorCode::usage, "--shard-size 0: a shard must hold something",
                              "give a size such as 4G");
            }
        }
        // Progress only on a terminal: batch logs get the one summary line.
        const bool show_progress = isatty(STDERR_FILENO) == 1;
        auto last = std::chrono::steady_clock::now();
        std::function<void(const app::PackProgress&)> progress;
        if (show_progress) {
            progress = [&](const app::PackProgress& p) {
                const auto now = std::chrono::steady_clock::now();
                if (now - last >= std::chrono::milliseconds(200)) {
                    last = now;
                    context.err << fmt::format("\rpacking: {} files, {}   ", p.files,
                                               human_bytes(p.bytes))
                                << std::flush;
                }
            };
        }
        auto summary = app::pack_dataset(*request, progress);
        if (show_progress) {
            context.err << "\r\033[K" << std::flush;
        }
        if (!summary) {
            throw Failure(summary.error());
        }
        if (!summary->striping.empty()) {
            context.err << summary->striping << '\n';
        }
        const auto& m = summary->manifest;
        const std::string layout =
            m.shards.size() > 1 || m.compressed()
                ? fmt::format(" in {} data file{}{}", m.shards.size(),
                              m.shards.size() == 1 ? "" : "s",
                              m.compressed() ? fmt::format(", zstd level {}", m.compression_level)
                                             : std::string())
                : std::string();
        context.out << fmt::format("packed {} files and {} directories ({}) into {} ({}{}, "
                                   "xxh3-128 {})\n",
                                   m.files, m.directories, human_bytes(m.payload_bytes),
                                   summary->output, human_bytes(m.archive_bytes), layout,
                                   m.content_hash);
    });
}

} // namespace dljob::cli
