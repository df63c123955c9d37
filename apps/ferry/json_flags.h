#pragma once
// -j/--json flag files: a JSON object of flags, turned into command-line tokens
// before CLI11 parses the command line. Apart from general_flags.cpp so that the
// fuzz target (fuzz/json_flags_fuzz.cpp) links it without main().

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace ferry::app {

// Reads the -j/--json file named in argv (if any) and returns argv with its flags
// inserted after the subcommand name, skipping every flag the command line gives
// itself (command-line flags win). Accepts a flat object {"flag-name": value}
// and DOCA's {"doca_general_flags": {...}, "doca_program_flags": {...}}.
// Throws ferry::Error for unreadable JSON or unknown flags.
std::vector<std::string> apply_json_flags(CLI::App& app, const std::vector<std::string>& argv);

// The pure half of apply_json_flags(): `json` is the file's text, `sub` the
// subcommand argv[1] names, `source` what error messages call the file. Returns
// argv with the file's flags inserted after argv[1]. Throws ferry::Error.
std::vector<std::string> json_flags_to_args(const CLI::App& sub, std::string_view json,
                                            const std::vector<std::string>& argv, const std::string& source);

}  // namespace ferry::app
