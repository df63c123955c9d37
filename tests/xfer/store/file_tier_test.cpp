#include "xfer/store/file_tier.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "ferry/core/status.h"
#include "xfer/store/aligned_buffer.h"
#include "xfer/store/file_format.h"
#include "xfer/store/file_names.h"
#include "xfer/store/store_test_util.h"

namespace ferry::xfer::store {
namespace {

using test::get_one;
using test::put_one;
using test::random_bytes;
using test::TempDir;

namespace fs = std::filesystem;

FileTierOptions opts(const std::string& dir, bool direct = false) {
  FileTierOptions o;
  o.dir = dir;
  o.direct = direct;
  o.queue_depth = 8;
  return o;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::size_t temp_files_in(const std::string& dir) {
  std::size_t n = 0;
  for (const auto& name : files_in(dir)) n += is_temp_file_name(name);
  return n;
}

void flip_byte(const std::string& path, std::uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f) << path;
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c ^= 0x10;
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

TEST(FileNames, KeysBecomeSafeNames) {
  EXPECT_EQ(object_file_name("model@1@0@abc@bf16"), "model@1@0@abc@bf16.kv");
  EXPECT_EQ(object_file_name("../x"), "%2E.%2Fx.kv");
  EXPECT_EQ(object_file_name(std::string("a\0/b", 4)), "a%00%2Fb.kv");
  EXPECT_EQ(object_file_name("~"), "%7E.kv");
  const std::string hashed = object_file_name(std::string(500, 'z'));
  EXPECT_EQ(hashed.size(), 1 + 32 + 3u);
  EXPECT_EQ(hashed[0], '~');
  EXPECT_NE(hashed, object_file_name(std::string(501, 'z')));
  EXPECT_TRUE(is_object_file_name("a.kv"));
  EXPECT_TRUE(is_object_file_name("x.tmp.3.kv"))
      << "a key that looks like a temporary name is still an object";
  EXPECT_FALSE(is_temp_file_name("x.tmp.3.kv"));
  EXPECT_TRUE(is_temp_file_name(temp_file_name("a.kv")));
  EXPECT_FALSE(is_object_file_name(temp_file_name("a.kv")));
  EXPECT_FALSE(is_object_file_name(".ferry-lock"));
}

TEST(FileFormat, HeaderRoundTripAndRejectsDamage) {
  AlignedBuffer h(kFileHeaderSize);
  encode_file_header("key", 12345, 0xabcdef, h.data());
  DecodedHeader d;
  ASSERT_EQ(decode_file_header(h.data(), &d), "");
  EXPECT_EQ(d.key, "key");
  EXPECT_EQ(d.size, 12345u);
  EXPECT_EQ(d.checksum, 0xabcdefu);
  h.data()[kFileHeaderFixed + 1] ^= std::byte{1};  // the key
  EXPECT_NE(decode_file_header(h.data(), &d).find("header checksum"), std::string::npos);
  h.data()[0] ^= std::byte{1};
  EXPECT_NE(decode_file_header(h.data(), &d).find("magic"), std::string::npos);
}

class FileTierModes : public ::testing::TestWithParam<bool> {
 protected:
  // Makes the tier, or skips when the file system refuses O_DIRECT (tmpfs).
  std::unique_ptr<FileTier> make(const std::string& dir) {
    try {
      return std::make_unique<FileTier>(opts(dir, GetParam()));
    } catch (const Error& e) {
      if (GetParam() && std::string(e.what()).find("O_DIRECT") != std::string::npos) return nullptr;
      throw;
    }
  }
};

TEST_P(FileTierModes, RoundTripsEverySizeAlignedOrNot) {
  TempDir dir;
  auto t = make(dir.path());
  if (!t) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
  const std::size_t sizes[] = {0, 1, 4095, 4096, 4097, (1 << 20) + 3};
  for (std::size_t n : sizes) {
    const auto data = random_bytes(n, n + 1);
    // Aligned and unaligned source and destination buffers take different paths
    // under O_DIRECT (in place, tail page, whole bounce).
    for (int misalign : {0, 1}) {
      const std::string key = "obj/" + std::to_string(n) + "/" + std::to_string(misalign);
      AlignedBuffer src(n + 1), dst(n + 4096 + 1);
      if (n > 0) std::memcpy(src.data() + misalign, data.data(), n);
      PutItem p = test::put_item(key, {reinterpret_cast<std::uint8_t*>(src.data()) + misalign, n},
                                 checksum({data.data(), n}));
      t->put({&p, 1});
      ASSERT_EQ(p.status, XferStatus::Ok) << p.error;
      EXPECT_EQ(fs::file_size(t->path_of(key)), kFileHeaderSize + n);
      GetItem g = test::get_item(key, {reinterpret_cast<std::uint8_t*>(dst.data()) + misalign, n + 4096});
      t->get({&g, 1});
      ASSERT_EQ(g.status, XferStatus::Ok) << g.error;
      ASSERT_EQ(g.size, n);
      if (n > 0) {
        EXPECT_EQ(std::memcmp(dst.data() + misalign, data.data(), n), 0) << key;
      }
    }
  }
  EXPECT_EQ(temp_files_in(dir.path()), 0u);
}

TEST_P(FileTierModes, BatchesLongerThanTheQueueDepth) {
  TempDir dir;
  auto t = make(dir.path());
  if (!t) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
  constexpr int kItems = 37;  // queue depth 8: several rounds, and a partial one
  std::vector<std::vector<std::uint8_t>> data;
  std::vector<std::string> keys;
  std::vector<PutItem> puts;
  for (int i = 0; i < kItems; ++i) {
    data.push_back(random_bytes(1000 * i + 7, i));
    keys.push_back("batch-" + std::to_string(i));
  }
  for (int i = 0; i < kItems; ++i) puts.push_back(test::put_item(keys[i], data[i]));
  puts[5].key = "";  // one bad item fails alone
  t->put(puts);
  for (int i = 0; i < kItems; ++i)
    EXPECT_EQ(puts[i].status, i == 5 ? XferStatus::InvalidDesc : XferStatus::Ok) << i;

  std::vector<std::vector<std::uint8_t>> out(kItems, std::vector<std::uint8_t>(64 << 10));
  std::vector<GetItem> gets;
  for (int i = 0; i < kItems; ++i) gets.push_back(test::get_item(keys[i], {out[i].data(), out[i].size()}));
  gets[7].key = "missing";
  t->get(gets);
  for (int i = 0; i < kItems; ++i) {
    if (i == 5 || i == 7) {
      EXPECT_EQ(gets[i].status, XferStatus::NotFound) << i;
      continue;
    }
    ASSERT_EQ(gets[i].status, XferStatus::Ok) << gets[i].error;
    out[i].resize(gets[i].size);
    EXPECT_EQ(out[i], data[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(BufferedAndDirect, FileTierModes, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "direct" : "buffered"; });

TEST(FileTier, SurvivesARestart) {
  TempDir dir;
  std::vector<std::vector<std::uint8_t>> data;
  {
    FileTier t(opts(dir.path()));
    for (int i = 0; i < 5; ++i) {
      data.push_back(random_bytes(5000 + i, 100 + i));
      ASSERT_EQ(put_one(t, "key" + std::to_string(i), data.back()), XferStatus::Ok);
    }
    ASSERT_TRUE(t.remove("key4"));
  }
  // Leftovers of a crashed writer, and a file that is not ours.
  std::ofstream(dir.sub("key9.kv.tmp.4242.7")) << "half written";
  std::ofstream(dir.sub("junk.kv")) << "not a ferry object";
  FileTier t(opts(dir.path()));
  EXPECT_EQ(t.list().size(), 4u);
  EXPECT_EQ(t.used(), 5000u + 5001 + 5002 + 5003);
  for (int i = 0; i < 4; ++i) {
    const auto got = get_one(t, "key" + std::to_string(i));
    ASSERT_EQ(got.status, XferStatus::Ok) << got.error;
    EXPECT_EQ(got.data, data[i]);
  }
  EXPECT_EQ(get_one(t, "key4").status, XferStatus::NotFound);
  EXPECT_FALSE(fs::exists(dir.sub("key9.kv.tmp.4242.7"))) << "stale temporary files are removed";
  EXPECT_TRUE(fs::exists(dir.sub("junk.kv"))) << "bad files are skipped and left for inspection";
  EXPECT_EQ(t.lru_victims(1).at(0), "key0") << "the order of writing survives the restart";
}

TEST(FileTier, OneTierPerDirectory) {
  TempDir dir;
  FileTier a(opts(dir.path()));
  try {
    FileTier b(opts(dir.path()));
    FAIL() << "a second tier opened a locked directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("in use"), std::string::npos) << e.what();
  }
}

TEST(FileTier, CorruptedFileIsDetected) {
  TempDir dir;
  FileTier t(opts(dir.path()));
  const auto data = random_bytes(10000, 3);
  ASSERT_EQ(put_one(t, "victim", data), XferStatus::Ok);
  flip_byte(t.path_of("victim"), kFileHeaderSize + 1234);
  const auto got = get_one(t, "victim");
  EXPECT_EQ(got.status, XferStatus::ChecksumMismatch);
  EXPECT_NE(got.error.find("'victim'"), std::string::npos) << got.error;
  EXPECT_NE(got.error.find(t.path_of("victim")), std::string::npos) << got.error;

  ASSERT_EQ(put_one(t, "header", data), XferStatus::Ok);
  flip_byte(t.path_of("header"), 30);  // inside the size/checksum fields
  EXPECT_EQ(get_one(t, "header").status, XferStatus::ChecksumMismatch);

  ASSERT_EQ(put_one(t, "short", data), XferStatus::Ok);
  fs::resize_file(t.path_of("short"), kFileHeaderSize + 100);
  const auto truncated = get_one(t, "short");
  EXPECT_EQ(truncated.status, XferStatus::ChecksumMismatch);
  EXPECT_NE(truncated.error.find("truncated"), std::string::npos) << truncated.error;
}

TEST(FileTier, BadKeysStayInsideTheDirectory) {
  TempDir dir;
  const std::string inner = dir.sub("tier");
  FileTier t(opts(inner));
  const auto data = random_bytes(100, 1);
  std::string error;
  EXPECT_EQ(put_one(t, "", data, &error), XferStatus::InvalidDesc);
  EXPECT_EQ(put_one(t, std::string(kMaxFileKeyLength + 1, 'k'), data), XferStatus::InvalidDesc);
  const std::vector<std::string> keys = {"../x",
                                         "../../etc/passwd",
                                         "/abs",
                                         ".",
                                         "..",
                                         std::string("nul\0byte", 8),
                                         std::string(300, 'L'),
                                         std::string(kMaxFileKeyLength, 'M'),
                                         "\xff\xfe"};
  for (const auto& key : keys) {
    ASSERT_EQ(put_one(t, key, data), XferStatus::Ok) << key.size();
    EXPECT_EQ(fs::path(t.path_of(key)).parent_path(), fs::path(inner));
    EXPECT_EQ(get_one(t, key).data, data);
  }
  EXPECT_EQ(files_in(dir.path()), std::vector<std::string>{"tier"}) << "nothing escaped the tier's directory";
  EXPECT_EQ(get_one(t, "x").status, XferStatus::NotFound);
}

TEST(FileTier, CapacityBoundIsNoSpace) {
  TempDir dir;
  auto o = opts(dir.path());
  o.capacity = 10000;
  FileTier t(o);
  ASSERT_EQ(put_one(t, "a", random_bytes(6000, 1)), XferStatus::Ok);
  std::string error;
  EXPECT_EQ(put_one(t, "b", random_bytes(6000, 2), &error), XferStatus::NoSpace);
  EXPECT_NE(error.find("full"), std::string::npos) << error;
  ASSERT_TRUE(t.remove("a"));
  EXPECT_EQ(put_one(t, "b", random_bytes(6000, 2)), XferStatus::Ok);
  EXPECT_EQ(temp_files_in(dir.path()), 0u);
}

TEST(FileTier, RemovedBehindItsBackIsNotFound) {
  TempDir dir;
  FileTier t(opts(dir.path()));
  ASSERT_EQ(put_one(t, "gone", random_bytes(10, 1)), XferStatus::Ok);
  fs::remove(t.path_of("gone"));
  EXPECT_EQ(get_one(t, "gone").status, XferStatus::NotFound);
  EXPECT_FALSE(t.stat("gone")) << "the index forgets a file that vanished";
}

// Runs body in a child process (it changes process-wide limits or namespaces) and
// returns its exit status: 0 passed, 77 cannot run here, anything else failed.
template <class F>
int in_child(F body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Puts that hit a write limit: NoSpace, no temporary file left, and the tier
// still takes objects that fit.
int expect_no_space(const std::string& dir, std::size_t too_big, std::size_t fits) {
  try {
    FileTier t(opts(dir));
    std::string error;
    if (put_one(t, "big", random_bytes(too_big, 1), &error) != XferStatus::NoSpace) return 2;
    if (temp_files_in(dir) != 0) return 3;
    if (t.stat("big")) return 4;
    // The failed object's blocks return to the file system when the last reference
    // to its deleted temporary goes, and io_uring may hold one for a moment after
    // put() returns (seen once in CI on the 256 KiB tmpfs): allow half a second.
    bool stored = false;
    for (int attempt = 0; attempt < 50 && !stored; ++attempt) {
      stored = put_one(t, "small", random_bytes(fits, 2)) == XferStatus::Ok;
      if (!stored) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!stored) return 5;
    if (get_one(t, "small").status != XferStatus::Ok) return 6;
    return 0;
  } catch (...) {
    return 7;
  }
}

// EFBIG from RLIMIT_FSIZE is how an unprivileged test makes writes fail with "the
// file cannot grow": the tier maps it like ENOSPC.
TEST(FileTier, FileSizeLimitIsNoSpace) {
  TempDir dir;
  const int rc = in_child([&] {
    signal(SIGXFSZ, SIG_IGN);  // else the kernel kills the writer instead of failing the write
    rlimit lim{64 << 10, 64 << 10};
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) return 77;
    return expect_no_space(dir.path(), 1 << 20, 1000);
  });
  EXPECT_EQ(rc, 0);
}

// A real ENOSPC: a 256 KiB tmpfs in a private mount namespace (needs root, or
// CAP_SYS_ADMIN; skipped otherwise).
TEST(FileTier, DiskFullIsNoSpace) {
  TempDir dir;
  const int rc = in_child([&] {
    if (unshare(CLONE_NEWNS) != 0) return 77;
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 77;
    if (mount("tmpfs", dir.path().c_str(), "tmpfs", 0, "size=256k") != 0) return 77;
    return expect_no_space(dir.path(), 1 << 20, 1000);
  });
  if (rc == 77) GTEST_SKIP() << "cannot mount a small tmpfs here (needs CAP_SYS_ADMIN)";
  EXPECT_EQ(rc, 0);
}

}  // namespace
}  // namespace ferry::xfer::store
