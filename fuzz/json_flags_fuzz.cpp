// The -j/--json flag loader (apps/ferry/json_flags.cpp) on any file text.
//
// Input: the JSON file's text, for a subcommand with one option of each kind
// the real subcommands have, on the command line `ferry sub -j FILE --name=cli`.
// Beside ASan/UBSan, it checks:
//  - the loader throws nothing but ferry::Error, and throws where the file names
//    a flag the subcommand lacks, gives a value of a type no flag takes, or
//    gives true/false to an option that takes a value;
//  - otherwise argv comes back with the file's flags inserted after `sub`, and
//    the command line untouched;
//  - where every value suits its flag (a string for a string, an integer in
//    range for an int, any number for a double, strings for the repeatable one,
//    a boolean for the flag), CLI11 parses the result;
//  - whenever CLI11 parses it, each option holds exactly the file's value (the
//    last one, for a repeated one): a number is never rounded or wrapped on the
//    way; --name keeps "cli", as the command line wins.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ferry/core/status.h"
#include "fuzz_check.h"
#include "json_flags.h"

namespace {

struct Values {
  int port = -7;
  std::string name = "default";
  std::string text = "default";
  std::string shorty = "default";
  std::vector<std::string> list;
  bool flag = false;
  double ratio = -7.5;
  std::string json;
};

void add_options(CLI::App& sub, Values& v) {
  sub.add_option("-p,--port", v.port);
  sub.add_option("-n,--name", v.name);
  sub.add_option("--text", v.text);
  sub.add_option("-s", v.shorty);
  sub.add_option("--list", v.list)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub.add_flag("--flag", v.flag);
  sub.add_option("--ratio", v.ratio);
  sub.add_option("-j,--json", v.json);
}

enum class Opt { Skipped, Port, Text, Shorty, List, Flag, Ratio, Unknown };

Opt option_of(const std::string& key) {
  if (key == "json" || key == "j" || key == "name" || key == "n") return Opt::Skipped;
  if (key == "port" || key == "p") return Opt::Port;
  if (key == "text") return Opt::Text;
  if (key == "s") return Opt::Shorty;
  if (key == "list") return Opt::List;
  if (key == "flag") return Opt::Flag;
  if (key == "ratio") return Opt::Ratio;
  return Opt::Unknown;
}

// Whether CLI11 must take this JSON value for the option, as the same value.
bool suits(Opt opt, const nlohmann::json& e) {
  switch (opt) {
    case Opt::Port:
      // Not e <= INT_MAX: nlohmann's comparison wraps an unsigned number above INT64_MAX.
      if (e.is_number_unsigned()) return e.get<std::uint64_t>() <= std::numeric_limits<int>::max();
      return e.is_number_integer() && e.get<std::int64_t>() >= std::numeric_limits<int>::min() &&
             e.get<std::int64_t>() <= std::numeric_limits<int>::max();
    case Opt::Text:
    case Opt::Shorty:
    case Opt::List: return e.is_string();
    case Opt::Ratio: return e.is_number();
    default: return false;
  }
}

// What the file says the options must end up holding; `exact` is false where
// no outcome is promised (a value of the wrong type for its flag).
struct Want {
  bool must_throw = false;
  bool exact = true;
  std::optional<nlohmann::json> port, text, shorty, ratio;  // the value kept (TakeLast)
  std::optional<std::vector<std::string>> list;
  std::optional<bool> flag;
};

Want model(std::string_view text) {
  Want w;
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    w.must_throw = true;
    return w;
  }
  if (!doc.is_object()) {
    w.must_throw = true;
    return w;
  }
  nlohmann::json flat = nlohmann::json::object();  // as the loader documents
  for (auto& [key, value] : doc.items()) {
    if ((key == "doca_general_flags" || key == "doca_program_flags") && value.is_object()) {
      for (auto& [k, v] : value.items()) flat[k] = v;
    } else {
      flat[key] = value;
    }
  }
  // One option under two names: which value CLI11 keeps is no promise.
  const bool port_twice = flat.contains("p") && flat.contains("port");
  if (port_twice) w.exact = false;
  for (auto& [key, v] : flat.items()) {
    const Opt opt = option_of(key);
    if (opt == Opt::Skipped) continue;
    if (opt == Opt::Unknown || v.is_null() || v.is_object()) {
      w.must_throw = true;
      continue;
    }
    if (v.is_array())
      for (const auto& e : v)
        if (!e.is_string() && !e.is_number()) w.must_throw = true;  // only scalars repeat
    if (opt == Opt::Flag) {
      if (v.is_boolean())
        w.flag = v.get<bool>();
      else
        w.exact = false;
      continue;
    }
    if (v.is_boolean()) {  // true/false only switches a flag
      w.must_throw = true;
      continue;
    }
    const nlohmann::json elements = v.is_array() ? v : nlohmann::json::array({v});
    for (const auto& e : elements)
      if (!suits(opt, e)) w.exact = false;
    if (opt == Opt::List) {
      std::vector<std::string> items;
      for (const auto& e : elements)
        if (e.is_string()) items.push_back(e.get<std::string>());
      w.list = items;
    } else if (!elements.empty() && !(opt == Opt::Port && port_twice)) {
      (opt == Opt::Port     ? w.port
       : opt == Opt::Text   ? w.text
       : opt == Opt::Shorty ? w.shorty
                            : w.ratio) = elements.back();
    }
  }
  return w;
}

// nlohmann's own == wraps an unsigned number into a signed one: compare by sign first.
bool same_integer(std::int64_t got, const nlohmann::json& want) {
  if (want.is_number_unsigned())
    return got >= 0 && static_cast<std::uint64_t>(got) == want.get<std::uint64_t>();
  return got == want.get<std::int64_t>();
}

// CLI11 reads a double through long double (strtold), which may round the last bit.
bool same_double(double got, double want) {
  return got == want || std::nextafter(want, got) == got;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> argv = {"ferry", "sub", "-j", "flags.json", "--name=cli"};

  const Want want = model(text);

  CLI::App app;
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  CLI::App* sub = app.add_subcommand("sub");
  Values v;
  add_options(*sub, v);

  std::vector<std::string> out;
  try {
    out = ferry::app::json_flags_to_args(*sub, text, argv, "flags.json");
  } catch (const ferry::Error&) {
    FUZZ_CHECK(want.must_throw);
    return 0;
  }
  FUZZ_CHECK(!want.must_throw);
  FUZZ_CHECK(out.size() >= argv.size());
  FUZZ_CHECK(out[0] == argv[0] && out[1] == argv[1]);
  FUZZ_CHECK(std::equal(argv.begin() + 2, argv.end(), out.end() - (argv.size() - 2)));
  std::vector<const char*> cargs;
  for (const auto& a : out) cargs.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(cargs.size()), cargs.data());
  } catch (const CLI::ParseError& e) {
    if (want.exact) {
      std::fprintf(stderr, "CLI11 refused the loader's argv: %s\n", e.what());
      for (const auto& a : out) std::fprintf(stderr, "  [%s]\n", a.c_str());
    }
    FUZZ_CHECK(!want.exact && "every value suits its flag, yet the result does not parse");
    return 0;
  }
  // Parsed: whatever else the file held, a value CLI11 took is the file's value,
  // never another one (an integer out of range is refused, not wrapped).
  FUZZ_CHECK(v.name == "cli");
  FUZZ_CHECK(v.json == "flags.json");
  if (want.port && want.port->is_number_integer()) FUZZ_CHECK(same_integer(v.port, *want.port));
  if (want.text && want.text->is_string()) FUZZ_CHECK(v.text == want.text->get<std::string>());
  if (want.shorty && want.shorty->is_string()) FUZZ_CHECK(v.shorty == want.shorty->get<std::string>());
  if (want.exact && want.list) FUZZ_CHECK(v.list == *want.list);
  if (want.flag) FUZZ_CHECK(v.flag == *want.flag);
  if (want.ratio && want.ratio->is_number()) {
    const double r = want.ratio->get<double>();
    if (!same_double(v.ratio, r)) std::fprintf(stderr, "ratio %.17g, the file's %.17g\n", v.ratio, r);
    FUZZ_CHECK(same_double(v.ratio, r));
  }
  return 0;
}
