#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace vaecodec::app {

// Note [Existing outputs]
// As ffmpeg does: `-y` replaces an output that exists, `-n` never does, and without either an existing output
// is asked about when stdin is a terminal ("Overwrite? [y/N]", one question for all of a run's outputs) and
// refused in one line otherwise (a script, a pipe, a job array), exit status 1 and nothing written. The check
// runs before a model is loaded. A batch's --skip-existing is not affected: its finished outputs are skipped
// before this check, so what is left does not exist. Appended files (--manifest) are not outputs here.
struct OverwriteOptions {
  bool yes = false;  // -y
  bool no = false;   // -n
};

// Adds -y/--overwrite and -n/--no-overwrite to `sub` (the two exclude each other).
void add_overwrite_options(CLI::App& sub, OverwriteOptions& options);

// Throws vaecodec::Error when any of `outputs` exists and may not be replaced (Note [Existing outputs]).
// `ask` answers the question in a terminal (tests give their own); empty: a line read from stdin, asked only
// when stdin is a terminal.
void check_overwrite(const std::vector<std::filesystem::path>& outputs, const OverwriteOptions& options,
                     const std::function<bool(const std::string& question)>& ask = {});

}  // namespace vaecodec::app
