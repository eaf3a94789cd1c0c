#pragma once
// Job-script rendering: a pure function of a RenderRequest and the templates. Every value a user
// controls is validated (directive values) or shell-quoted (script values) here, before the
// template sees it.

#include <dljob/domain/render_request.hpp>
#include <dljob/domain/result.hpp>
#include <dljob/domain/template_engine.hpp>
#include <dljob/render/shell.hpp> // command_line

#include <string>
#include <vector>

namespace dljob::render {

/// Renders the job script and the exact submit command. Refuses (ErrorCode::config_invalid) any
/// value a scheduler could misread, and maps job names the site rejects to `dlj-<hash>`, with a
/// note saying so.
Result<RenderedJob> render_job(const RenderRequest& request, TemplateEngine& templates);

/// The scheduler-visible job name for `wanted` under `behaviour`: `wanted` itself when it matches
/// the site's pattern and length, else "dlj-" + 8 hex digits of a hash of `wanted`.
std::string scheduler_job_name(const std::string& wanted, const SchedulerBehaviour& behaviour);

/// The submit options that make a job wait for `after` in `kind`'s own form (Slurm
/// --dependency=afterok:ID, PBS/Torque/Moab -W depend=afterok:ID, sqsub -w ID; local: none,
/// its wrapper waits): the family's (schedulers/family.hpp). Rendered into
/// RenderedJob::submit_argv and added by each adapter.
std::vector<std::string> dependency_options(const std::string& family, const JobDependency& after);

} // namespace dljob::render
