#include <dljob/app/sites/sites_service.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/domain/error.hpp>

#include <CLI/CLI.hpp>

#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace dljob::cli {

void set_sites_command(CLI::App& app, Context& context) {
    auto* command = app.add_subcommand(
        "sites", "List the site profiles dljob knows (built-in, yours under ~/.config/dljob/sites, "
                 "--site-file), or show one resolved");
    auto site_files = std::make_shared<std::vector<std::filesystem::path>>();
    command->add_option("--site-file", *site_files, "Also read this site profile (repeatable)");
    auto* show = command->add_subcommand(
        "show", "Print a site's resolved profile and where each value came from");
    auto name = std::make_shared<std::string>();
    show->add_option("NAME", *name, "Site name (see dljob sites)")->required();
    show->add_option("--site-file", *site_files, "Also read this site profile (repeatable)");
    show->callback([name, site_files, &context] {
        const app::SiteCatalog catalog{*site_files};
        auto text = app::describe_site(catalog, *name);
        if (!text) {
            throw Failure(text.error());
        }
        context.out << *text;
    });
    command->callback([command, site_files, &context] {
        if (!command->get_subcommands().empty()) {
            return;
        }
        const app::SiteCatalog catalog{*site_files};
        context.out << app::format_site_list(catalog.list());
    });
}

} // namespace dljob::cli
