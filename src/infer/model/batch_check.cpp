#include "infer/model/batch_check.h"

#include <string>

#include "ferry/core/status.h"

namespace ferry::infer {

void check_batch(const TokenBatch& batch, const ModelInfo& info, std::size_t max_batch,
                 std::size_t max_batch_tokens) {
  // starts is a public vector: anything may be in it, so size() (starts.size() - 1) is not trusted yet.
  if (batch.starts.empty() || batch.starts.front() != 0)
    throw Error("embed: a batch's starts must begin with 0");
  if (batch.starts.back() != batch.ids.size())
    throw Error("embed: the batch's starts end at " + std::to_string(batch.starts.back()) + " but it holds " +
                std::to_string(batch.ids.size()) + " ids");
  if (batch.size() > max_batch)
    throw Error("embed: " + std::to_string(batch.size()) + " sequences exceed the model's max_batch " +
                std::to_string(max_batch));
  if (batch.tokens() > max_batch_tokens)
    throw Error("embed: " + std::to_string(batch.tokens()) + " tokens exceed the model's max_batch_tokens " +
                std::to_string(max_batch_tokens));
  for (std::size_t i = 0; i < batch.size(); ++i) {
    // Checked as a difference of two unsigned values only once start <= end is known.
    if (batch.starts[i + 1] <= batch.starts[i])
      throw Error("embed: sequence " + std::to_string(i) + " is empty or its start goes backwards");
    const std::size_t length = batch.starts[i + 1] - batch.starts[i];
    if (length > info.max_positions)
      throw Error("embed: sequence " + std::to_string(i) + " holds " + std::to_string(length) +
                  " tokens, more than the model's " + std::to_string(info.max_positions) + " positions");
  }
  for (std::size_t t = 0; t < batch.ids.size(); ++t) {
    const std::int32_t id = batch.ids[t];
    if (id < 0 || static_cast<std::size_t>(id) >= info.vocab)
      throw Error("embed: token id " + std::to_string(id) + " at " + std::to_string(t) +
                  " is outside the vocabulary of " + std::to_string(info.vocab));
  }
}

}  // namespace ferry::infer
