#include <dljob/cli/cli.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/domain/error.hpp>
#include <dljob/util/terminal.hpp>

#include <CLI/CLI.hpp>
#include <dljob_build_info.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <exception>
#include <iostream>
#include <span>

namespace dljob::cli {
namespace {

// Every verb, in the order `dljob --help` lists them (explicit, no self-registration). A verb is
// added here, one line, when the issue that implements it lands; there are no placeholders.
const std::vector<SetCommand>& commands() {
    static const std::vector<SetCommand> table{
        set_fetch_data_command, set_pack_command,   set_stage_data_command,
        set_audit_data_command, set_sites_command,  set_render_command,
        set_validate_command,   set_submit_command, set_status_command,
        set_logs_command,       set_cancel_command, set_show_command,
        set_plot_command,       set_shell_command,  set_continue_job_command,
        set_doctor_command,     set_sweep_command,
    };
    return table;
}

std::string version_line() {
    return fmt::format("dljob {} (git {})", build_info::version, build_info::git_revision);
}

} // namespace

// Messages quote what files hold (keys, values, lines of output): their control characters are
// shown, not obeyed, wherever the message goes.
void print_error(std::ostream& err, const Error& error) {
    err << "dljob: error: " << util::terminal_safe(error.message) << '\n';
    if (!error.hint.empty()) {
        err << "hint: " << util::terminal_safe(error.hint) << '\n';
    }
}

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    CLI::App app{"dljob: run deep-learning training jobs on shared HPC clusters.\n"
                 "One recipe, any cluster: dljob renders the job script for the site's "
                 "scheduler, submits it and tracks it.",
                 "dljob"};
    app.set_version_flag("--version", version_line(), "Print the version and git revision");
    app.footer("Exit codes: 0 ok, 2 usage, 3 invalid input, 4 rejected by the scheduler, "
               "5 scheduler unreachable, 6 job store, 7 not found, 8 I/O, 9 timeout, "
               "70 internal error, 130 interrupted (docs/cli.md).");
    Context context{out, err};
    for (SetCommand set_command : commands()) {
        set_command(app, context);
    }
    // No require_subcommand(1): CLI11 would then answer "A subcommand is required" even for an
    // unknown verb or flag, hiding the word the user got wrong. A missing verb is checked below.
    app.require_subcommand(0, 1);

    try {
        // CLI11 wants argv order reversed for its vector overload.
        std::vector<std::string> reversed(args.rbegin(), args.rend());
        app.parse(reversed);
        if (app.get_subcommands().empty()) {
            err << app.help();
            return exit_code_for(ErrorCode::usage);
        }
        return context.exit_code;
    } catch (const CLI::CallForHelp&) {
        out << app.help();
        return 0;
    } catch (const CLI::CallForAllHelp&) {
        out << app.help("", CLI::AppFormatMode::All);
        return 0;
    } catch (const CLI::CallForVersion&) {
        out << version_line() << '\n';
        return 0;
    } catch (const CLI::ParseError& e) {
        err << "dljob: error: " << e.what() << '\n' << "Run 'dljob --help' for usage.\n";
        return exit_code_for(ErrorCode::usage);
    } catch (const Failure& failure) {
        print_error(err, failure.error());
        return exit_code_for(failure.error().code);
    } catch (const std::exception& e) {
        print_error(err, Error{ErrorCode::internal, e.what(),
                               "this is a bug in dljob; please report it with the command"});
        return exit_code_for(ErrorCode::internal);
    }
}

int run(int argc, char** argv) {
    std::vector<std::string> args;
    for (const char* arg : std::span(argv, static_cast<std::size_t>(argc)).subspan(1)) {
        args.emplace_back(arg);
    }
    // A terminal obeys escape sequences, and logs, recipes and metrics are text from files: what
    // goes to one shows control characters instead (util/terminal.hpp). Piped or redirected,
    // the output stays byte for byte what the files hold.
    if (::isatty(STDOUT_FILENO) == 1) {
        util::TerminalSafeBuf safe(std::cout.rdbuf());
        std::ostream out(&safe);
        const int code = run(args, out, std::cerr);
        out.flush();
        return code;
    }
    return run(args, std::cout, std::cerr);
}

} // namespace dljob::cli
