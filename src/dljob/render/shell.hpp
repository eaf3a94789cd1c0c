#pragma once
// The shell encoders live in util/shell.hpp (schedulers use them too, and schedulers sit below
// render); render's code and its tests keep their names.

#include <dljob/util/shell.hpp>

namespace dljob::render {

using util::command_line;
using util::is_directive_safe;
using util::shell_quote;
using util::shell_word_with_variables;

} // namespace dljob::render
