// The route's run parser (src/route/run.h) on the bytes of a received buffer or
// ring chunk, and the run writer routers use to merge and split runs.
//
// Input: one byte that sets the writer's buffer capacity (64..8192 bytes, a
// multiple of 8), then a buffer of runs. The buffer is walked as receivers walk
// it: run after run until one is refused. Beside ASan/UBSan, it checks:
//  - an accepted run lies inside the buffer, is a multiple of 8 long, has at
//    least one payload and room for all of them;
//  - every accepted run, appended payload by payload-block to RunCursor-written
//    buffers of the chosen capacity (as a router copies runs into delivery
//    chunks, splitting where one is full), reads back as runs with the same
//    keys and the same payload bytes in the same order, none lost or added.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "route/run.h"

using namespace ferry::route::detail;

namespace {

struct Payloads {
  std::vector<std::uint8_t> bytes;
  std::uint64_t count = 0;
};

// Reads a writer's buffers back: their runs must all be valid and fill each buffer exactly.
void read_back(const std::vector<std::vector<std::uint8_t>>& buffers, const RunHeader& key, Payloads* out) {
  for (const auto& b : buffers) {
    std::size_t off = 0;
    while (off < b.size()) {
      RunHeader h;
      const std::uint32_t rb = read_run(b.data(), b.size(), off, &h);
      FUZZ_CHECK(rb != 0);
      FUZZ_CHECK(h.dest == key.dest && h.src == key.src && h.handler == key.handler && h.len() == key.len());
      const std::size_t n = std::size_t{h.len()} * h.count;
      out->bytes.insert(out->bytes.end(), b.data() + off + kRunHeaderBytes,
                        b.data() + off + kRunHeaderBytes + n);
      out->count += h.count;
      off += rb;
    }
    FUZZ_CHECK(off == b.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint32_t capacity = 64 + 8 * static_cast<std::uint32_t>(data[0] % 1017);
  // The parser reads 8-byte words: give it an aligned copy, as receive buffers are.
  std::vector<std::uint64_t> words((size - 1 + 7) / 8 + 1);
  std::memcpy(words.data(), data + 1, size - 1);
  const auto* buf = reinterpret_cast<const std::uint8_t*>(words.data());
  const std::size_t len = size - 1;

  std::size_t off = 0;
  while (off < len) {
    RunHeader h;
    const std::uint32_t rb = read_run(buf, len, off, &h);
    if (rb == 0) break;
    FUZZ_CHECK(rb % 8 == 0 && rb >= kRunHeaderBytes && rb <= len - off);
    FUZZ_CHECK(h.count >= 1 && std::uint64_t{h.len()} * h.count <= rb - kRunHeaderBytes);
    const std::uint8_t* payloads = buf + off + kRunHeaderBytes;
    off += rb;
    if (run_bytes(h.len(), 1) > capacity) continue;  // larger than any chunk of this capacity

    // Copy the run into buffers of `capacity`, in two blocks (as a run from two
    // chunks would come), opening the next buffer whenever one is full.
    std::vector<std::vector<std::uint8_t>> out;
    std::vector<std::uint8_t> cur(capacity);
    std::uint32_t used = 0;
    RunCursor cursor;
    const std::uint32_t first = h.count / 2;
    const std::uint32_t blocks[2][2] = {{0, first}, {first, h.count - first}};
    for (const auto& blk : blocks) {
      std::uint32_t done = 0;
      while (done < blk[1]) {
        const std::uint32_t n = cursor.append_payloads(
            cur.data(), &used, capacity, h, payloads + std::size_t{blk[0] + done} * h.len(), blk[1] - done);
        FUZZ_CHECK(used <= capacity && used % 8 == 0);
        done += n;
        if (done < blk[1]) {
          FUZZ_CHECK(used != 0);  // an empty buffer always takes a payload that fits a run of one
          cur.resize(used);
          out.push_back(cur);
          cur.assign(capacity, 0);
          used = 0;
          cursor.reset();
        }
      }
    }
    if (used != 0) {
      cur.resize(used);
      out.push_back(cur);
    }
    Payloads back;
    read_back(out, h, &back);
    FUZZ_CHECK(back.count == h.count);
    FUZZ_CHECK(back.bytes.size() == std::size_t{h.len()} * h.count);
    FUZZ_CHECK(back.bytes.empty() || std::memcmp(back.bytes.data(), payloads, back.bytes.size()) == 0);
  }
  return 0;
}
