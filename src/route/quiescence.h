#pragma once
// Termination detection by counting (the "double check" YGM and Quicksilver use):
// each round sums, over every rank, the messages sent and the messages handled.
// Quiescence is two consecutive rounds with sent == handled and the same totals.
//
// Why two rounds: a round reads each rank's counters at a different moment, so
// one round with sent == handled can still miss a message that a handler sent
// after its rank was read. Counters only grow, and every read of round k+1
// happens after every read of round k (round k+1 starts after round k's
// all-reduce completed everywhere it was read). Equal totals in both rounds
// therefore mean no counter moved in between: at any instant between the two
// rounds, every message ever sent had been handled and no handler was running.
// The ring modes add one rule for that to hold (see client_port.h): a rank
// publishes its handled count only when every message its handlers sent is
// already published and counted as sent.

#include <cstdint>

namespace ferry::route::detail {

class Quiescence {
 public:
  void reset() noexcept { have_previous_ = false; }

  // Feeds one round's global totals; true once quiescent.
  bool complete_round(std::uint64_t sent, std::uint64_t handled) noexcept {
    const bool quiet =
        sent == handled && have_previous_ && sent == previous_sent_ && handled == previous_handled_;
    previous_sent_ = sent;
    previous_handled_ = handled;
    have_previous_ = true;
    return quiet;
  }

  std::uint64_t last_sent() const noexcept { return previous_sent_; }
  std::uint64_t last_handled() const noexcept { return previous_handled_; }

 private:
  bool have_previous_ = false;
  std::uint64_t previous_sent_ = 0;
  std::uint64_t previous_handled_ = 0;
};

}  // namespace ferry::route::detail
