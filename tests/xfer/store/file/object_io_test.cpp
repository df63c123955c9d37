// One object's I/O (object_io.h), and the formats it writes: file names and
// object file headers.

#include "xfer/store/file/object_io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "ferry/xfer/checksum.h"
#include "xfer/store/file/aligned_buffer.h"
#include "xfer/store/file/file_format.h"
#include "xfer/store/file/file_names.h"
#include "xfer/store/file/file_tier_test_util.h"
#include "xfer/store/file/uring_batch.h"
#include "xfer/store/older_builds.h"
#include "xfer/store/store_test_util.h"

namespace ferry::xfer::store {
namespace {

using namespace file_test;
using test::random_bytes;
using test::set_file_flags;
using test::TempDir;

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
  encode_file_header("key", 12345, 0xabcdef, 77, h.data());
  DecodedHeader d;
  ASSERT_EQ(decode_file_header(h.data(), &d), "");
  EXPECT_EQ(d.key, "key");
  EXPECT_EQ(d.size, 12345u);
  EXPECT_EQ(d.checksum, 0xabcdefu);
  EXPECT_EQ(d.seq, 77u);
  h.data()[kFileHeaderFixed + 1] ^= std::byte{1};  // the key
  EXPECT_NE(decode_file_header(h.data(), &d).find("header checksum"), std::string::npos);
  h.data()[0] ^= std::byte{1};
  EXPECT_NE(decode_file_header(h.data(), &d).find("magic"), std::string::npos);
}

TEST(FileFormat, LeafChecksumsAreFlaggedAndOlderHeadersStillRead) {
  AlignedBuffer h(kFileHeaderSize);
  encode_file_header("key", 12345, 0xabcdef, 77, h.data());
  FileHeader raw;
  std::memcpy(&raw, h.data(), sizeof(raw));
  EXPECT_EQ(raw.flags, kFileLeafSums);
  DecodedHeader d;
  ASSERT_EQ(decode_file_header(h.data(), &d), "");
  EXPECT_FALSE(d.whole_sum);
  set_file_flags(h.data(), 0);  // as written before leaf checksums
  ASSERT_EQ(decode_file_header(h.data(), &d), "");
  EXPECT_TRUE(d.whole_sum);
  set_file_flags(h.data(), 2);  // a flag this build does not know
  EXPECT_NE(decode_file_header(h.data(), &d).find("unknown flags 2"), std::string::npos);
}

// Runs an op's laid-out transfer synchronously (the tier runs it on a ring).
template <class Op>
void transfer(Op& op, bool write) {
  while (op.offset < op.total) {
    const ssize_t n = write ? pwritev(op.fd, op.iov, op.iov_count, static_cast<off_t>(op.offset))
                            : preadv(op.fd, op.iov, op.iov_count, static_cast<off_t>(op.offset));
    ASSERT_GE(n, 0) << std::strerror(errno);
    if (n == 0) break;  // end of file
    op.offset += static_cast<std::uint64_t>(n);
    if (op.offset < op.total) advance_iov(op.iov, &op.iov_count, static_cast<std::size_t>(n));
  }
}

class ObjectIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_fd_ = open(dir_.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(dir_fd_, 0);
  }
  void TearDown() override { close(dir_fd_); }

  // Writes and publishes data as key's object file, seq 7.
  void write_object(ObjectIo& io, PutItem& item, Fault& fault) {
    ObjectWrite op;
    op.item = &item;
    op.seq = 7;
    ASSERT_EQ(io.open_write(op, fault), XferStatus::Ok) << fault.detail();
    transfer(op, true);
    ASSERT_EQ(io.close_write(op, fault), XferStatus::Ok) << fault.detail();
    ASSERT_EQ(io.publish(op, fault), XferStatus::Ok) << fault.detail();
    EXPECT_TRUE(op.tmp.empty());
  }
  // Reads key's object file, expecting `size` bytes.
  XferStatus read_object(ObjectIo& io, GetItem& item, std::uint64_t size, Fault& fault) {
    ObjectRead op;
    op.item = &item;
    op.hint = size;
    op.attempts = 1;
    if (const XferStatus s = io.open_file(op, fault); s != XferStatus::Ok) return s;
    io.lay_out_read(op);
    transfer(op, false);
    bool retry = false;
    const XferStatus s = io.finish_file_read(op, &retry, fault);
    EXPECT_FALSE(retry);
    return s;
  }

  TempDir dir_;
  int dir_fd_ = -1;
};

TEST_F(ObjectIoTest, WritesPublishesAndReadsBackAnObjectFile) {
  ObjectIo io(dir_fd_, dir_.path(), false, false);
  const auto data = random_bytes(10000, 1);
  PutItem put = test::put_item("k/1", data);
  Fault fault;
  write_object(io, put, fault);
  EXPECT_EQ(files_in(dir_.path()), std::vector<std::string>{object_file_name("k/1")});
  EXPECT_EQ(fs::file_size(dir_.sub(object_file_name("k/1"))), kFileHeaderSize + data.size());
  std::vector<std::uint8_t> out(data.size());
  GetItem get = test::get_item("k/1", {out.data(), out.size()});
  EXPECT_EQ(read_object(io, get, data.size(), fault), XferStatus::Ok) << fault.detail();
  EXPECT_EQ(out, data);
  EXPECT_EQ(get.size, data.size());
  EXPECT_FALSE(fault.failed());
  EXPECT_TRUE(io.file_exists("k/1"));
  EXPECT_EQ(io.unlink_file("k/1"), 0);
  EXPECT_FALSE(io.file_exists("k/1"));
  EXPECT_EQ(io.unlink_file("k/1"), 0) << "a file that is gone already is no error";
}

TEST_F(ObjectIoTest, AMissingFileIsNotFoundAndNotRaised) {
  ObjectIo io(dir_fd_, dir_.path(), false, false);
  std::vector<std::uint8_t> out(10);
  GetItem get = test::get_item("none", {out.data(), out.size()});
  Fault fault;
  EXPECT_EQ(read_object(io, get, 10, fault), XferStatus::NotFound);
  EXPECT_FALSE(fault.failed());
}

TEST_F(ObjectIoTest, ADamagedObjectIsAChecksumMismatchNamingKeyAndFile) {
  ObjectIo io(dir_fd_, dir_.path(), false, false);
  const auto data = random_bytes(5000, 2);
  PutItem put = test::put_item("bad", data);
  Fault fault;
  write_object(io, put, fault);
  flip_byte(dir_.sub(object_file_name("bad")), kFileHeaderSize + 100);
  std::vector<std::uint8_t> out(data.size());
  GetItem get = test::get_item("bad", {out.data(), out.size()});
  EXPECT_EQ(read_object(io, get, data.size(), fault), XferStatus::ChecksumMismatch);
  EXPECT_EQ(fault.status(), XferStatus::ChecksumMismatch);
  EXPECT_EQ(fault.key(), "bad");
  EXPECT_NE(fault.detail().find("'bad'"), std::string::npos) << fault.detail();
  EXPECT_NE(fault.detail().find(dir_.sub(object_file_name("bad"))), std::string::npos) << fault.detail();
}

TEST_F(ObjectIoTest, AFileOfAnotherSizeAsksForARetryAtItsSize) {
  ObjectIo io(dir_fd_, dir_.path(), false, false);
  const auto data = random_bytes(3000, 3);
  PutItem put = test::put_item("resized", data);
  Fault fault;
  write_object(io, put, fault);
  std::vector<std::uint8_t> out(8000);
  GetItem get = test::get_item("resized", {out.data(), out.size()});
  ObjectRead op;
  op.item = &get;
  op.hint = 2000;  // what a stale index said
  op.attempts = 1;
  ASSERT_EQ(io.open_file(op, fault), XferStatus::Ok);
  io.lay_out_read(op);
  transfer(op, false);
  bool retry = false;
  EXPECT_EQ(io.finish_file_read(op, &retry, fault), XferStatus::InProgress);
  EXPECT_TRUE(retry);
  EXPECT_EQ(op.hint, data.size());
  EXPECT_FALSE(fault.failed());
}

TEST_F(ObjectIoTest, ADiscardedWriteLeavesNothingBehind) {
  ObjectIo io(dir_fd_, dir_.path(), false, false);
  const auto data = random_bytes(100, 4);
  PutItem put = test::put_item("dropped", data);
  ObjectWrite op;
  op.item = &put;
  op.seq = 1;
  Fault fault;
  ASSERT_EQ(io.open_write(op, fault), XferStatus::Ok);
  EXPECT_EQ(temp_files_in(dir_.path()), 1u);
  io.discard(op);
  EXPECT_EQ(op.fd, -1);
  EXPECT_TRUE(files_in(dir_.path()).empty());
}

TEST(ObjectIo, WriteErrnosThatMeanAFullDiskAreNoSpace) {
  EXPECT_EQ(write_errno_status(ENOSPC), XferStatus::NoSpace);
  EXPECT_EQ(write_errno_status(EDQUOT), XferStatus::NoSpace);
  EXPECT_EQ(write_errno_status(EFBIG), XferStatus::NoSpace);
  EXPECT_EQ(write_errno_status(EIO), XferStatus::IoError);
}

}  // namespace
}  // namespace ferry::xfer::store
