#pragma once
// Where dljob keeps its files: the XDG data directory unless the environment says otherwise.

#include <filesystem>

namespace dljob::util {

/// $XDG_DATA_HOME, else ~/.local/share (else ./.local/share when HOME is unset).
std::filesystem::path data_home();

/// $DLJOB_STORE, else <data_home>/dljob/jobs.db.
std::filesystem::path job_store_path();

/// $DLJOB_RUNS_DIR, else <data_home>/dljob/runs.
std::filesystem::path runs_dir();

} // namespace dljob::util
