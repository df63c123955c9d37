// The redis-cluster tier's readings of what nodes send (src/xfer/store/redis/
// cluster_slots.cpp, and resp_io.cpp's read_reply for whole replies): a node is
// a peer, and may be another user's, or not Redis at all.
//
// Input: one byte of options (bit 0: read the reply as CLUSTER SLOTS rather
// than SHARDS; bit 1: TLS ports), then a reply stream, read from a memfd (as in
// resp_fuzz). Each whole reply goes to the slot-map parser, and an error reply's
// text to the redirect parser. Beside ASan/UBSan it checks what a parser
// accepts: every range within 0..16383 and ordered, every port within 0..65535
// and a host named, a redirect's slot in range, its port 1..65535 and its host
// free of spaces.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "xfer/store/redis/cluster_slots.h"
#include "xfer/store/redis/resp_io.h"

using namespace ferry::xfer::store;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const bool slots = data[0] & 1;
  const bool tls = data[0] & 2;
  const std::string_view s(reinterpret_cast<const char*>(data + 1), size - 1);
  if (s.size() > 512 * 1024) return 0;

  const int fd = memfd_create("cluster-fuzz", MFD_CLOEXEC);
  FUZZ_CHECK(fd >= 0);
  FUZZ_CHECK(s.empty() || write(fd, s.data(), s.size()) == static_cast<ssize_t>(s.size()));
  FUZZ_CHECK(lseek(fd, 0, SEEK_SET) == 0);

  RespReader reader;
  for (int replies = 0; replies < 16; ++replies) {
    RespValue v;
    if (read_reply(reader, fd, &v).failed()) break;
    if (v.is_error()) {
      if (const auto r = parse_redirect(v.str, "asked")) {
        FUZZ_CHECK(r->slot < kClusterSlots);
        FUZZ_CHECK(r->to.port >= 1 && r->to.port <= 65535);
        FUZZ_CHECK(!r->to.host.empty() && r->to.host.find(' ') == std::string::npos);
        FUZZ_CHECK(v.str.rfind(r->ask ? "ASK " : "MOVED ", 0) == 0);
      }
      continue;
    }
    std::string why;
    const auto ranges =
        slots ? parse_cluster_slots(v, "asked", &why) : parse_cluster_shards(v, "asked", tls, &why);
    if (!ranges) {
      FUZZ_CHECK(!why.empty());
      continue;
    }
    for (const SlotRange& r : *ranges) {
      FUZZ_CHECK(r.first <= r.last && r.last < kClusterSlots);
      FUZZ_CHECK(r.primary.port >= 0 && r.primary.port <= 65535);
      FUZZ_CHECK(!r.primary.host.empty());
      (void)r.primary.text();
    }
  }
  ::close(fd);
  return 0;
}
