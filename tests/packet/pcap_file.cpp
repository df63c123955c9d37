#include "pcap_file.h"

#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>

namespace ferry::test {
namespace {

struct FileHeader {
  std::uint32_t magic = 0xa1b2c3d4;
  std::uint16_t major = 2, minor = 4;
  std::int32_t zone = 0;
  std::uint32_t sigfigs = 0, snaplen = 65535, linktype = 1;  // Ethernet
};
struct RecordHeader {
  std::uint32_t sec, usec, caplen, len;
};

}  // namespace

void write_pcap(const std::string& path, const std::vector<Frame>& frames) {
  std::ofstream out(path, std::ios::binary);
  FileHeader h;
  out.write(reinterpret_cast<const char*>(&h), sizeof h);
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const RecordHeader r{static_cast<std::uint32_t>(i / 1000000), static_cast<std::uint32_t>(i % 1000000),
                         static_cast<std::uint32_t>(frames[i].size()), static_cast<std::uint32_t>(frames[i].size())};
    out.write(reinterpret_cast<const char*>(&r), sizeof r);
    out.write(reinterpret_cast<const char*>(frames[i].data()), static_cast<std::streamsize>(frames[i].size()));
  }
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::vector<Frame> read_pcap(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  FileHeader h;
  if (!in.read(reinterpret_cast<char*>(&h), sizeof h)) throw std::runtime_error(path + ": no pcap header");
  if (h.magic != 0xa1b2c3d4 && h.magic != 0xa1b23c4d) throw std::runtime_error(path + ": not a little-endian pcap");
  std::vector<Frame> frames;
  RecordHeader r{};
  while (in.read(reinterpret_cast<char*>(&r), sizeof r)) {
    if (r.caplen > 65535) throw std::runtime_error(path + ": a record longer than 64 KiB");
    Frame f(r.caplen);
    if (!in.read(reinterpret_cast<char*>(f.data()), r.caplen)) throw std::runtime_error(path + ": truncated record");
    frames.push_back(std::move(f));
  }
  return frames;
}

std::vector<Frame> mixed_frames(std::size_t count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Frame> frames;
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t len;
    std::uint16_t ethertype;
    switch (i % 4) {
      case 0: len = 60, ethertype = 0x0800; break;                   // minimum size
      case 1: len = 64 + rng() % 1451, ethertype = 0x8100; break;    // VLAN-tagged
      case 2: len = 54 + 8 + rng() % 1453, ethertype = 0x86dd; break;  // IPv6: 14 + 40 header + payload
      default: len = 61 + rng() % 1454, ethertype = 0x0800; break;   // odd lengths up to 1514
    }
    Frame f(len);
    for (auto& b : f) b = static_cast<std::uint8_t>(rng());
    for (int m = 0; m < 6; ++m) {
      f[m] = static_cast<std::uint8_t>(0x02 + m);                  // destination
      f[6 + m] = static_cast<std::uint8_t>(0x10 + (i + m) % 200);  // source, distinct per frame
    }
    f[12] = static_cast<std::uint8_t>(ethertype >> 8);
    f[13] = static_cast<std::uint8_t>(ethertype);
    if (ethertype == 0x8100) {
      f[14] = 0x00, f[15] = static_cast<std::uint8_t>(1 + i % 4000 % 255);  // VLAN id
      f[16] = 0x08, f[17] = 0x00;                                          // IPv4 inside
    } else if (ethertype == 0x86dd) {
      f[14] = 0x60;  // version 6
    }
    std::memcpy(&f[f.size() - 4], &i, 4);  // the index, last: order is checkable
    frames.push_back(std::move(f));
  }
  return frames;
}

Frame mac_swapped(const Frame& f) {
  Frame s = f;
  if (s.size() >= 12)
    for (int m = 0; m < 6; ++m) std::swap(s[m], s[6 + m]);
  return s;
}

}  // namespace ferry::test
