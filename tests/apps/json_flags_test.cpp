// The -j/--json flag loader: the tokens it makes from a file parse back to the
// file's values. (tests/offload/cli_test.cpp runs it through `ferry server`.)
#include "json_flags.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/core/status.h"

namespace ferry::app {
namespace {

struct Flags {
  std::int64_t count = 0;
  std::uint32_t size = 0;
  double ratio = 0;
  std::string name;
};

// Parses `json` as the file of `ferry sub -j f.json`; CLI11's error if it refuses.
std::string parse(const std::string& json, Flags* f) {
  CLI::App app;
  CLI::App* sub = app.add_subcommand("sub");
  sub->add_option("--count", f->count);
  sub->add_option("--size", f->size);
  sub->add_option("--ratio", f->ratio);
  sub->add_option("-n,--name", f->name);
  std::string json_path;
  sub->add_option("-j,--json", json_path);
  const std::vector<std::string> args = json_flags_to_args(*sub, json, {"ferry", "sub"}, "f.json");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

// The tokens the loader makes for `json`, after "ferry sub".
std::vector<std::string> tokens(const std::string& json) {
  Flags f;
  CLI::App sub;
  sub.add_option("--count", f.count);
  std::vector<std::string> args = json_flags_to_args(sub, json, {"ferry", "sub"}, "f.json");
  return {args.begin() + 2, args.end()};
}

// Found by fuzz/json_flags_fuzz.cpp: numbers went through std::to_string, whose
// "%f" made 1e-7 "0.000000", and through get<long long>(), which made an unsigned
// number above INT64_MAX negative: 18446744073709551615 became -1, which an int
// or double flag took.
TEST(JsonFlags, NumbersReachTheirFlagsUnchanged) {
  Flags f;
  ASSERT_EQ(parse(R"({"ratio": 1e-7, "count": -5})", &f), "");
  EXPECT_EQ(f.ratio, 1e-7);
  EXPECT_EQ(f.count, -5);
  ASSERT_EQ(parse(R"({"ratio": 0.1, "size": 4294967295})", &f), "");
  EXPECT_EQ(f.ratio, 0.1);
  EXPECT_EQ(f.size, 4294967295u);
  ASSERT_EQ(parse(R"({"ratio": 18446744073709551615})", &f), "");
  EXPECT_EQ(f.ratio, 18446744073709551615.0) << "not -1";
  EXPECT_NE(parse(R"({"size": 4294967296})", &f), "") << "out of the flag's range: refused";
  // Big integers as the file writes them (what CLI11 then makes of them is the
  // command line's business).
  EXPECT_EQ(tokens(R"({"count": 18446744073709551615})"),
            (std::vector<std::string>{"--count", "18446744073709551615"}));
  EXPECT_EQ(tokens(R"({"count": 9223372036854775808})"),
            (std::vector<std::string>{"--count", "9223372036854775808"}));
}

TEST(JsonFlags, ValuesThatLookLikeFlagsStayValues) {
  Flags f;
  ASSERT_EQ(parse(R"({"name": "--count"})", &f), "");
  EXPECT_EQ(f.name, "--count");
}

TEST(JsonFlags, UnknownFlagsAndBadValuesAreRefusedNamingThem) {
  Flags f;
  try {
    parse(R"({"no-such-flag": 1})", &f);
    FAIL() << "an unknown flag was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-flag"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse(R"({"count": {"a": 1}})", &f), Error);
  EXPECT_THROW(parse(R"({"count": null})", &f), Error);
  EXPECT_THROW(parse("[1, 2]", &f), Error);
  EXPECT_THROW(parse("{", &f), Error);
  // Found by fuzz/json_flags_fuzz.cpp: "help" reached CLI11's --help, so a flags
  // file could make the program print its help and exit instead of running.
  EXPECT_THROW(parse(R"({"help": true})", &f), Error);
  EXPECT_THROW(parse(R"({"h": true})", &f), Error);
  // Found by fuzz/json_flags_fuzz.cpp: a boolean for an option that takes a
  // value put the bare option in argv, and it took the next flag's value.
  EXPECT_THROW(parse(R"({"count": 5, "name": true})", &f), Error);
  EXPECT_THROW(parse(R"({"count": false})", &f), Error);
}

}  // namespace
}  // namespace ferry::app
