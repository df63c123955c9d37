#include "core/prometheus.h"

#include <cmath>
#include <cstdio>

namespace ferry::prom {
namespace {

// HELP text escapes backslash and newline; label values also the double quote.
void append_escaped(std::string& out, std::string_view text, bool quote) {
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

void append_number(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    out += buf;
  }
}

}  // namespace

void TextWriter::family(std::string_view name, std::string_view type, std::string_view help) {
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  append_escaped(out_, help, false);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += type;
  out_ += '\n';
}

void TextWriter::labels(std::initializer_list<Label> labels, std::string_view le) {
  if (labels.size() == 0 && le.empty()) return;
  out_ += '{';
  bool first = true;
  for (const Label& l : labels) {
    if (!first) out_ += ',';
    first = false;
    out_ += l.name;
    out_ += "=\"";
    append_escaped(out_, l.value, true);
    out_ += '"';
  }
  if (!le.empty()) {
    if (!first) out_ += ',';
    out_ += "le=\"";
    out_ += le;
    out_ += '"';
  }
  out_ += '}';
}

void TextWriter::sample(std::string_view name, std::initializer_list<Label> labels, double value) {
  out_ += name;
  this->labels(labels);
  out_ += ' ';
  append_number(out_, value);
  out_ += '\n';
}

void TextWriter::sample(std::string_view name, std::initializer_list<Label> labels, std::uint64_t value) {
  out_ += name;
  this->labels(labels);
  out_ += ' ';
  out_ += std::to_string(value);
  out_ += '\n';
}

void TextWriter::counter(std::string_view name, std::string_view help, std::uint64_t value) {
  family(name, "counter", help);
  sample(name, {}, value);
}

void TextWriter::gauge(std::string_view name, std::string_view help, double value) {
  family(name, "gauge", help);
  sample(name, {}, value);
}

void TextWriter::histogram(std::string_view name, std::initializer_list<Label> labels,
                           std::span<const double> upper_bounds, std::span<const std::uint64_t> counts,
                           double sum) {
  std::uint64_t cumulative = 0;
  const std::string base(name);
  for (std::size_t b = 0; b < counts.size(); ++b) {
    cumulative += counts[b];
    std::string le = "+Inf";
    if (b < upper_bounds.size() && std::isfinite(upper_bounds[b])) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", upper_bounds[b]);
      le = buf;
    }
    out_ += base + "_bucket";
    this->labels(labels, le);
    out_ += ' ' + std::to_string(cumulative) + '\n';
    if (le == "+Inf") break;
  }
  out_ += base + "_sum";
  this->labels(labels);
  out_ += ' ';
  append_number(out_, sum);
  out_ += '\n';
  out_ += base + "_count";
  this->labels(labels);
  out_ += ' ' + std::to_string(cumulative) + '\n';
}

void DurationHistogram::record(std::int64_t ns) noexcept {
  if (ns < 0) ns = 0;
  const double s = static_cast<double>(ns) / 1e9;
  std::size_t b = 0;
  while (b < kDurationBounds.size() && s > kDurationBounds[b]) ++b;
  counts_[b].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
}

std::uint64_t DurationHistogram::count() const noexcept {
  std::uint64_t n = 0;
  for (const auto& c : counts_) n += c.load(std::memory_order_relaxed);
  return n;
}

void DurationHistogram::write(TextWriter& w, std::string_view name,
                              std::initializer_list<Label> labels) const {
  std::array<std::uint64_t, kDurationBounds.size() + 1> counts;
  for (std::size_t b = 0; b < counts.size(); ++b) counts[b] = counts_[b].load(std::memory_order_relaxed);
  w.histogram(name, labels, kDurationBounds, counts,
              static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9);
}

}  // namespace ferry::prom
