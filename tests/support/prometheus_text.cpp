#include "support/prometheus_text.h"

#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "support/http_client.h"

namespace ferry::test {
namespace {

bool name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}
bool name_char(char c) {
  return name_start(c) || (c >= '0' && c <= '9');
}

bool is_metric_name(std::string_view s) {
  if (s.empty() || !name_start(s[0])) return false;
  for (const char c : s)
    if (!name_char(c)) return false;
  return true;
}

double parse_value(const std::string& v, const std::string& line) {
  if (v == "+Inf") return INFINITY;
  if (v == "-Inf") return -INFINITY;
  if (v == "NaN") return NAN;
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || std::isnan(d) || std::isinf(d))
    throw std::runtime_error("not a sample value: '" + v + "' in: " + line);
  return d;
}

// The family a sample belongs to: a histogram's _bucket, _sum and _count are its own.
std::string family_of(const std::string& name, const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string_view s(suffix);
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      const std::string base = name.substr(0, name.size() - s.size());
      const auto it = types.find(base);
      if (it != types.end() && (it->second == "histogram" || it->second == "summary")) return base;
    }
  }
  return name;
}

}  // namespace

double PrometheusText::at(const std::string& series) const {
  const auto it = samples.find(series);
  if (it == samples.end()) throw std::runtime_error("no sample " + series);
  return it->second;
}

PrometheusText parse_prometheus(const std::string& text) {
  PrometheusText out;
  if (!text.empty() && text.back() != '\n') throw std::runtime_error("the text does not end with a newline");
  std::set<std::string> helped;
  std::string current;  // the family whose samples come now
  std::set<std::string> finished;
  // Per histogram series (labels less le): the last cumulative count and the +Inf one.
  std::map<std::string, double> last_bucket, inf_bucket;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream ls(line);
      std::string hash, kind, name;
      ls >> hash >> kind >> name;
      if (kind != "HELP" && kind != "TYPE") continue;  // a plain comment
      if (!is_metric_name(name)) throw std::runtime_error("bad metric name in: " + line);
      if (kind == "HELP") {
        if (!helped.insert(name).second) throw std::runtime_error("HELP twice for " + name);
        continue;
      }
      std::string type;
      ls >> type;
      static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary", "untyped"};
      if (!kTypes.count(type)) throw std::runtime_error("bad type in: " + line);
      if (out.types.count(name)) throw std::runtime_error("TYPE twice for " + name);
      out.types[name] = type;
      if (!current.empty()) finished.insert(current);
      current = name;
      continue;
    }
    // name[{labels}] value [timestamp]
    std::size_t i = 0;
    while (i < line.size() && name_char(line[i])) ++i;
    const std::string name = line.substr(0, i);
    if (!is_metric_name(name)) throw std::runtime_error("bad sample name in: " + line);
    std::string labels, series_less_le, le;
    if (i < line.size() && line[i] == '{') {
      ++i;
      bool first = true;
      while (i < line.size() && line[i] != '}') {
        if (!first) {
          if (line[i] != ',') throw std::runtime_error("expected ',' in: " + line);
          ++i;
        }
        first = false;
        const std::size_t at = i;
        while (i < line.size() && name_char(line[i])) ++i;
        const std::string lname = line.substr(at, i - at);
        if (lname.empty() || (lname[0] >= '0' && lname[0] <= '9') || lname.find(':') != std::string::npos)
          throw std::runtime_error("bad label name in: " + line);
        if (i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"')
          throw std::runtime_error("expected =\" in: " + line);
        i += 2;
        std::string value;
        for (; i < line.size() && line[i] != '"'; ++i) {
          if (line[i] == '\\') {
            if (++i >= line.size()) break;
            if (line[i] != '\\' && line[i] != '"' && line[i] != 'n')
              throw std::runtime_error("bad escape in: " + line);
          }
          value += line[i];
        }
        if (i >= line.size()) throw std::runtime_error("unterminated label value in: " + line);
        ++i;  // the closing quote
        const std::string pair = line.substr(at, i - at);
        labels += (labels.empty() ? "" : ",") + pair;
        if (lname == "le")
          le = value;
        else
          series_less_le += (series_less_le.empty() ? "" : ",") + pair;
      }
      if (i >= line.size()) throw std::runtime_error("unterminated labels in: " + line);
      ++i;  // '}'
    }
    if (i >= line.size() || line[i] != ' ')
      throw std::runtime_error("expected a space before the value in: " + line);
    std::string rest = line.substr(i + 1);
    const std::size_t sp = rest.find(' ');
    const double value = parse_value(rest.substr(0, sp), line);
    if (sp != std::string::npos) (void)parse_value(rest.substr(sp + 1), line);  // a timestamp
    const std::string family = family_of(name, out.types);
    if (!out.types.count(family)) throw std::runtime_error("a sample before its TYPE: " + line);
    if (family != current || finished.count(family))
      throw std::runtime_error("a sample away from its family's block: " + line);
    const std::string series = name + (labels.empty() ? "" : "{" + labels + "}");
    if (!out.samples.emplace(series, value).second) throw std::runtime_error("series twice: " + series);
    const std::string type = out.types[family];
    if (type == "counter" && !(value >= 0)) throw std::runtime_error("a negative counter: " + line);
    if (type == "histogram") {
      const std::string key = family + "{" + series_less_le + "}";
      if (name == family + "_bucket") {
        if (le.empty()) throw std::runtime_error("a bucket without le: " + line);
        auto [it, fresh] = last_bucket.emplace(key, value);
        if (!fresh) {
          if (value < it->second) throw std::runtime_error("buckets not cumulative: " + line);
          it->second = value;
        }
        if (le == "+Inf") inf_bucket[key] = value;
      } else if (name == family + "_count") {
        if (!inf_bucket.count(key) || inf_bucket[key] != value)
          throw std::runtime_error("_count differs from the +Inf bucket (or it is missing): " + line);
      } else if (name != family + "_sum") {
        throw std::runtime_error("not a histogram sample: " + line);
      }
    }
  }
  return out;
}

Scrape scrape(std::uint16_t port, const std::string& path) {
  HttpConnection c(port, 10.0);
  c.send("GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  auto r = c.read_response();
  if (!r) throw std::runtime_error("the metrics endpoint closed without an answer");
  return {r->status, r->header("content-type"), r->body};
}

}  // namespace ferry::test
