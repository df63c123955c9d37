// TokenBatch's methods, the pooling names and l2_normalize (declared in
// ferry/infer/model.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ferry/core/status.h"
#include "ferry/infer/model.h"

namespace ferry::infer {

std::size_t TokenBatch::longest() const noexcept {
  std::size_t longest = 0;
  for (std::size_t i = 0; i < size(); ++i)
    longest = std::max<std::size_t>(longest, starts[i + 1] - starts[i]);
  return longest;
}

void TokenBatch::add(std::span<const std::int32_t> sequence) {
  // starts holds 32-bit offsets: a batch beyond 4 Gi tokens cannot be described.
  if (ids.size() + sequence.size() > std::numeric_limits<std::uint32_t>::max())
    throw Error("TokenBatch::add: more than 2^32 - 1 tokens in one batch");
  ids.insert(ids.end(), sequence.begin(), sequence.end());
  starts.push_back(static_cast<std::uint32_t>(ids.size()));
}

void TokenBatch::clear() noexcept {
  ids.clear();
  starts.assign(1, 0);  // capacity is kept: no allocation, hence noexcept
}

const char* pooling_name(Pooling p) noexcept {
  switch (p) {
    case Pooling::Mean: return "mean";
    case Pooling::Cls: return "cls";
    case Pooling::LastToken: return "last_token";
  }
  return "?";
}

std::optional<Pooling> pooling_from_name(std::string_view name) noexcept {
  if (name == "mean") return Pooling::Mean;
  if (name == "cls") return Pooling::Cls;
  if (name == "last_token" || name == "last-token") return Pooling::LastToken;
  return std::nullopt;
}

void l2_normalize(std::span<float> v) noexcept {
  // Summed in double: a 384- or 1024-wide f32 sum loses digits the cosine test checks.
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  if (sum == 0) return;
  const auto scale = static_cast<float>(1.0 / std::sqrt(sum));
  for (float& x : v) x *= scale;
}

}  // namespace ferry::infer
