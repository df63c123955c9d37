#pragma once
// Several threads put, get and remove at once, through one tier or a chain. Each
// thread owns its own keys, so it knows exactly what each of its gets must return
// (the latest version it put, or NotFound after a remove), while the others'
// puts force evictions that move its objects between tiers: a lost, stale or torn
// object fails the test. Every thread also reads the others' keys, where any
// version is fine but its bytes must be self-consistent.

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <optional>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

#include "xfer/store/store_test_util.h"
#include "xfer/store/vector_pieces.h"
#include "xfer/store/storage.h"

namespace ferry::xfer::store::test {

struct StressParams {
  int threads = 4;
  int keys_per_thread = 12;
  int ops_per_thread = 1500;
  std::size_t max_size = 12000;
  // Through a chain: objects above its stream_above() are put and own keys read
  // by streaming (store/streaming.h), falling back where the chain says so.
  bool stream = false;
};

// A put, streamed where the params and the store say so.
template <class Store>
void stress_put(Store& store, const StressParams& p, PutItem& item, const std::vector<std::uint8_t>& v, Fault& fault) {
  if constexpr (std::is_base_of_v<Storage, Store>) {
    if (p.stream && v.size() > store.stream_above()) {
      int tier = -1;
      if (auto s = store.put_streamed(item.key, v.size(), VectorSource(v), &tier, fault)) {
        item.status = *s;
        return;
      }
    }
  }
  store.put({&item, 1}, fault);
}

template <class Store>
void stress_get(Store& store, const StressParams& p, GetItem& item, std::vector<std::uint8_t>& buf, Fault& fault) {
  if constexpr (std::is_base_of_v<Storage, Store>) {
    if (p.stream && buf.size() > store.stream_above()) {
      int tier = -1;
      if (auto s = store.get_streamed(item.key, buf.size(), VectorSink(buf), &item.size, &tier, fault)) {
        item.status = *s;
        return;
      }
    }
  }
  store.get({&item, 1}, fault);
}

// A value names its key and version in its first 16 bytes; the rest is derived from them.
inline std::vector<std::uint8_t> stress_value(std::uint64_t key_id, std::uint64_t version, std::size_t size) {
  auto v = random_bytes(size, key_id * 1'000'003 + version);
  if (size >= 16) {
    std::memcpy(v.data(), &key_id, 8);
    std::memcpy(v.data() + 8, &version, 8);
  }
  return v;
}

template <class Store>
void run_stress(Store& store, const StressParams& p) {
  const std::size_t total_keys = static_cast<std::size_t>(p.threads * p.keys_per_thread);
  std::vector<std::string> keys(total_keys);
  for (std::size_t k = 0; k < total_keys; ++k) keys[k] = "stress/" + std::to_string(k);
  std::atomic<int> failures{0};
  std::atomic<int> reported{0};
  const auto fail = [&](const std::string& what) {
    ++failures;
    if (reported++ < 10) ADD_FAILURE() << what;
  };

  std::vector<std::thread> threads;
  for (int t = 0; t < p.threads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1234 + t);
      // What each own key holds: nullopt after remove, else (version, size).
      std::vector<std::optional<std::pair<std::uint64_t, std::size_t>>> mine(p.keys_per_thread);
      std::uint64_t version = 0;
      std::vector<std::uint8_t> buf(p.max_size);
      for (int op = 0; op < p.ops_per_thread; ++op) {
        const int k = static_cast<int>(rng() % p.keys_per_thread);
        const std::size_t id = static_cast<std::size_t>(t * p.keys_per_thread + k);
        const int what = static_cast<int>(rng() % 10);
        if (what < 4) {  // put a new version of an own key
          const std::size_t size = 1 + rng() % p.max_size;
          const auto v = stress_value(id, ++version, size);
          PutItem item = put_item(keys[id], v);
          Fault fault;
          stress_put(store, p, item, v, fault);
          if (item.status != XferStatus::Ok) {
            fail("put " + keys[id] + ": " + fault.detail());
            mine[k].reset();  // a failed put may leave no copy: forget what we knew
            continue;
          }
          mine[k] = std::make_pair(version, size);
        } else if (what < 8) {  // read an own key: exactly the latest version
          GetItem item = get_item(keys[id], {buf.data(), buf.size()});
          Fault fault;
          stress_get(store, p, item, buf, fault);
          if (!mine[k]) {
            if (item.status != XferStatus::NotFound) fail("get " + keys[id] + " after remove: " + fault.detail());
            continue;
          }
          if (item.status != XferStatus::Ok) {
            fail("get " + keys[id] + ": " + fault.detail() + " (" + to_string(item.status) + ")");
            continue;
          }
          const auto want = stress_value(id, mine[k]->first, mine[k]->second);
          if (item.size != want.size() || std::memcmp(buf.data(), want.data(), want.size()) != 0)
            fail("get " + keys[id] + ": not the latest version");
        } else if (what < 9) {  // read anyone's key: any version, but whole
          const std::size_t other = rng() % total_keys;
          GetItem item = get_item(keys[other], {buf.data(), buf.size()});
          Fault fault;
          store.get({&item, 1}, fault);
          if (item.status == XferStatus::NotFound) continue;
          if (item.status != XferStatus::Ok) {
            fail("get " + keys[other] + ": " + fault.detail());
            continue;
          }
          std::uint64_t key_id = 0, ver = 0;
          if (item.size >= 16) {
            std::memcpy(&key_id, buf.data(), 8);
            std::memcpy(&ver, buf.data() + 8, 8);
            const auto want = stress_value(key_id, ver, item.size);
            if (key_id != other || std::memcmp(buf.data(), want.data(), item.size) != 0)
              fail("get " + keys[other] + ": torn or foreign bytes");
          }
        } else {  // remove an own key
          const bool had = remove_one(store, keys[id]);
          if (had != mine[k].has_value())
            fail("remove " + keys[id] + " returned " + (had ? "true" : "false"));
          mine[k].reset();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace ferry::xfer::store::test
