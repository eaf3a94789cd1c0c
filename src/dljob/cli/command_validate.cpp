#include <dljob/app/jobs/validate_service.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/domain/error.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <memory>
#include <ostream>

namespace dljob::cli {

void set_validate_command(CLI::App& app, Context& context) {
    auto* command = app.add_subcommand(
        "validate", "Check recipes and site profiles (unknown or duplicate keys, types, ranges, "
                    "impossible combinations); exit 3 when any is invalid");
    auto files = std::make_shared<std::vector<std::filesystem::path>>();
    command->add_option("FILE", *files, "Recipe or site-profile files")->required();
    command->callback([files, &context] {
        const auto results = app::validate_files(*files);
        int invalid = 0;
        for (const auto& result : results) {
            if (result.ok) {
                context.out << fmt::format("{}: ok ({})\n", result.file.string(), result.kind);
                for (const auto& note : result.notes) {
                    context.err << "dljob: note: " << note << '\n';
                }
                continue;
            }
            ++invalid;
            context.err << "dljob: error: " << result.message << '\n';
            if (!result.hint.empty()) {
                context.err << "hint: " << result.hint << '\n';
            }
        }
        if (invalid > 0) {
            context.exit_code = exit_code_for(ErrorCode::config_invalid);
        }
    });
}

} // namespace dljob::cli
