#include <dljob/app/data/audit.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/domain/error.hpp>

#include <CLI/CLI.hpp>

#include <memory>
#include <ostream>

namespace dljob::cli {

void set_audit_data_command(CLI::App& app, Context& context) {
    auto* command = app.add_subcommand(
        "audit-data", "Count a dataset tree's files and bytes, flag file-count quota and "
                      "network file-system trouble, and print the commands that fix it");
    auto request = std::make_shared<app::AuditRequest>();
    command->add_option("PATH", request->path, "Dataset directory")->required();
    command
        ->add_option("--file-quota", request->file_quota,
                     "The file system's file-count quota (objects)")
        ->capture_default_str();
    command->callback([request, &context] {
        auto report = app::audit_data(*request);
        if (!report) {
            throw Failure(report.error());
        }
        context.out << app::format_audit(*report);
    });
}

} // namespace dljob::cli
