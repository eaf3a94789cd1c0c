#pragma once
// Shell encoders for values that reach a job script: each returns one line
// of bash that evaluates to exactly the input, so no value can end a line, run a command or
// smuggle a directive.

#include <string>
#include <string_view>
#include <vector>

namespace dljob::util {

/// 'text' with ' written as '\''; values with control characters use $'...' with \xHH escapes so
/// the result stays on one line.
std::string shell_quote(std::string_view value);

/// A word whose `~` prefix, `$NAME` and `${NAME}` are left to the job's shell (as "${NAME-}":
/// an unset variable expands to nothing instead of killing the script before it can write
/// exit_code) and every other character is quoted. `~` counts only as the first character.
std::string shell_word_with_variables(std::string_view value);

/// True when `value` may appear as-is in a directive or comment: [A-Za-z0-9._/+,:=@%-]+.
bool is_directive_safe(std::string_view value);

/// One line of shell that prints as the argv (each element shell-quoted unless
/// is_directive_safe), for comments, `dljob render` and `dljob shell`.
std::string command_line(const std::vector<std::string>& argv);

} // namespace dljob::util
