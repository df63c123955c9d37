#include "json_flags.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ferry/core/status.h"

namespace ferry::app {
namespace {

// A value as its flag's text. Integers as the file writes them (get<long long>()
// wrapped one above INT64_MAX into a negative number); other numbers with the
// 17 digits that give back the same double (std::to_string's "%f" made 1e-7 "0.000000").
std::string scalar_text(const nlohmann::json& v, const std::string& key) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return v.dump();
  if (v.is_number()) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.17g", v.get<double>());
    return text;
  }
  throw Error("JSON flag '" + key + "' has a value of unsupported type " + std::string(v.type_name()));
}

// True when the command line (after the subcommand) names this option.
bool given_on_command_line(const CLI::Option* opt, const std::vector<std::string>& argv, std::size_t from) {
  for (std::size_t i = from; i < argv.size(); ++i) {
    std::string tok = argv[i];
    if (tok.size() < 2 || tok[0] != '-') continue;
    if (const auto eq = tok.find('='); eq != std::string::npos) tok.resize(eq);
    if (tok.size() > 2 && tok[1] != '-') tok.resize(2);  // "-p5000" -> "-p"
    if (opt->check_name(tok)) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> json_flags_to_args(const CLI::App& sub, std::string_view json,
                                            const std::vector<std::string>& argv, const std::string& source) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    throw Error("--json file " + source + " is not valid JSON: " + e.what());
  }
  if (!doc.is_object()) throw Error("--json file " + source + " must hold a JSON object");
  nlohmann::json flat = nlohmann::json::object();
  for (auto& [key, value] : doc.items()) {
    if ((key == "doca_general_flags" || key == "doca_program_flags") && value.is_object()) {
      for (auto& [k, v] : value.items()) flat[k] = v;
    } else {
      flat[key] = value;
    }
  }

  std::vector<std::string> extra;
  for (auto& [key, value] : flat.items()) {
    if (key == "json" || key == "j") continue;
    const std::string name = (key.size() == 1 ? "-" : "--") + key;
    const CLI::Option* opt = sub.get_option_no_throw(name);
    // --help is an action, not a setting: a flags file that asks for it would
    // print the help and exit instead of running.
    if (opt == nullptr || opt == sub.get_help_ptr() || opt == sub.get_help_all_ptr())
      throw Error("--json file " + source + ": '" + key + "' is not a flag of 'ferry " + argv[1] + "'");
    if (given_on_command_line(opt, argv, 2)) continue;
    if (value.is_boolean()) {
      // true/false switches a flag; an option that takes a value would be
      // left without one, and CLI11 would take the next flag's value as its own.
      if (opt->get_expected_min() > 0)
        throw Error("--json file " + source + ": '" + key + "' takes a value, not " +
                    (value.get<bool>() ? "true" : "false"));
      if (value.get<bool>()) extra.push_back(name);
    } else if (value.is_array()) {
      for (const auto& v : value) {
        extra.push_back(name);
        extra.push_back(scalar_text(v, key));
      }
    } else {
      extra.push_back(name);
      extra.push_back(scalar_text(value, key));
    }
  }
  std::vector<std::string> out(argv.begin(), argv.begin() + 2);
  out.insert(out.end(), extra.begin(), extra.end());
  out.insert(out.end(), argv.begin() + 2, argv.end());
  return out;
}

std::vector<std::string> apply_json_flags(CLI::App& app, const std::vector<std::string>& argv) {
  // argv[0] is the program, argv[1] the subcommand.
  if (argv.size() < 2) return argv;
  CLI::App* sub = nullptr;
  try {
    sub = app.get_subcommand(argv[1]);
  } catch (const CLI::OptionNotFound&) {
    return argv;  // let the parser report the unknown subcommand
  }
  std::string path;
  for (std::size_t i = 2; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if ((a == "-j" || a == "--json") && i + 1 < argv.size())
      path = argv[i + 1];
    else if (a.rfind("--json=", 0) == 0)
      path = a.substr(7);
  }
  if (path.empty()) return argv;

  std::ifstream in(path);
  if (!in) throw Error("cannot read --json file " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return json_flags_to_args(*sub, text.str(), argv, path);
}

}  // namespace ferry::app
