#include "xfer/wire/messages.h"

#include <cstring>

namespace ferry::xfer::proto {
namespace {

// Bounds on counts read from the wire, so a hostile count cannot make us reserve
// gigabytes before the body runs out.
constexpr std::uint32_t kMaxItems = 1u << 20;

bool finish(const Decoder& d) { return !d.failed() && d.at_end(); }

}  // namespace

std::string encode(const Hello& m) {
  Encoder e;
  e.u32(m.version);
  e.u32(0x01020304);  // byte-order probe: the agent refuses a peer of the other endianness
  e.str(m.app);
  return e.frame(Type::Hello);
}

bool decode(std::string_view body, Hello* m) {
  Decoder d(body);
  m->version = d.u32();
  if (d.u32() != 0x01020304) return false;
  m->app = d.str(256);
  return finish(d);
}

std::string encode(const HelloOk& m) {
  Encoder e;
  e.u64(m.session);
  e.u32(m.agent_pid);
  e.u32(static_cast<std::uint32_t>(m.backends.size()));
  for (const auto& b : m.backends) {
    e.str(b.name);
    e.u32(static_cast<std::uint32_t>(b.mem_types.size()));
    for (MemType t : b.mem_types) e.u8(static_cast<std::uint8_t>(t));
    e.u8(b.supports_local);
    e.u8(b.supports_remote);
    e.u8(b.supports_notif);
  }
  e.u32(static_cast<std::uint32_t>(m.tiers.size()));
  for (const auto& t : m.tiers) e.str(t);
  return e.frame(Type::HelloOk);
}

bool decode(std::string_view body, HelloOk* m) {
  Decoder d(body);
  m->session = d.u64();
  m->agent_pid = d.u32();
  const std::uint32_t nb = d.u32();
  if (nb > 64) return false;
  for (std::uint32_t i = 0; i < nb && !d.failed(); ++i) {
    BackendInfo b;
    b.name = d.str(256);
    const std::uint32_t nt = d.u32();
    if (nt > 8) return false;
    for (std::uint32_t j = 0; j < nt; ++j) b.mem_types.push_back(static_cast<MemType>(d.u8()));
    b.supports_local = d.u8() != 0;
    b.supports_remote = d.u8() != 0;
    b.supports_notif = d.u8() != 0;
    m->backends.push_back(std::move(b));
  }
  const std::uint32_t nt = d.u32();
  if (nt > 64) return false;
  for (std::uint32_t i = 0; i < nt && !d.failed(); ++i) m->tiers.push_back(d.str(4096));
  return finish(d);
}

std::string encode(const RegisterMsg& m) {
  Encoder e;
  e.u64(m.call);
  e.u8(static_cast<std::uint8_t>(m.type));
  e.u32(m.dev_id);
  e.u64(m.len);
  e.u8(static_cast<std::uint8_t>(m.reach));
  e.u64(m.offset);
  e.u32(m.owner_pid);
  e.i32(m.owner_fd);
  e.str(std::string_view(reinterpret_cast<const char*>(m.ipc_handle), sizeof(m.ipc_handle)));
  e.u64(m.addr);
  return e.frame(Type::Register);
}

bool decode(std::string_view body, RegisterMsg* m) {
  Decoder d(body);
  m->call = d.u64();
  m->type = static_cast<MemType>(d.u8());
  m->dev_id = d.u32();
  m->len = d.u64();
  m->reach = static_cast<Reach>(d.u8());
  m->offset = d.u64();
  m->owner_pid = d.u32();
  m->owner_fd = d.i32();
  const std::string h = d.str(sizeof(m->ipc_handle));
  if (h.size() != sizeof(m->ipc_handle)) return false;
  std::memcpy(m->ipc_handle, h.data(), h.size());
  m->addr = d.u64();
  return finish(d);
}

std::string encode(const RegisterOk& m) {
  Encoder e;
  e.u64(m.call);
  e.u64(m.region);
  return e.frame(Type::RegisterOk);
}

bool decode(std::string_view body, RegisterOk* m) {
  Decoder d(body);
  m->call = d.u64();
  m->region = d.u64();
  return finish(d);
}

std::string encode(const TransferMsg& m) {
  Encoder e;
  std::size_t bytes = 13;
  for (const auto& t : m.descs) bytes += 28 + t.key.size();
  e.reserve(bytes);
  e.u64(m.request);
  e.u8(static_cast<std::uint8_t>(m.op));
  e.u32(static_cast<std::uint32_t>(m.descs.size()));
  for (const auto& t : m.descs) {
    e.u64(t.region);
    e.u64(t.offset);
    e.u64(t.len);
    e.str(t.key);
  }
  return e.frame(Type::Transfer);
}

bool decode(std::string_view body, TransferMsg* m) {
  Decoder d(body);
  m->request = d.u64();
  const std::uint8_t op = d.u8();
  if (op > static_cast<std::uint8_t>(XferOp::Read)) return false;
  m->op = static_cast<XferOp>(op);
  const std::uint32_t n = d.u32();
  if (n > kMaxItems) return false;
  m->descs.reserve(std::min<std::size_t>(n, body.size() / 28));
  for (std::uint32_t i = 0; i < n && !d.failed(); ++i) {
    TransferDesc t;
    t.region = d.u64();
    t.offset = d.u64();
    t.len = d.u64();
    t.key = d.view(kMaxKey);
    m->descs.push_back(std::move(t));
  }
  return finish(d);
}

std::string encode(const TransferDone& m) {
  Encoder e;
  std::size_t bytes = 16;
  for (const auto& r : m.results) bytes += 20 + r.tier.size() + r.error.size();
  e.reserve(bytes);
  e.u64(m.request);
  e.i32(static_cast<std::int32_t>(m.status));
  e.u32(static_cast<std::uint32_t>(m.results.size()));
  for (const auto& r : m.results) {
    e.i32(static_cast<std::int32_t>(r.status));
    e.u64(r.size);
    e.str(r.tier);
    e.str(r.error);
  }
  return e.frame(Type::TransferDone);
}

bool decode(std::string_view body, TransferDone* m) {
  Decoder d(body);
  m->request = d.u64();
  m->status = static_cast<XferStatus>(d.i32());
  const std::uint32_t n = d.u32();
  if (n > kMaxItems) return false;
  m->results.reserve(std::min<std::size_t>(n, body.size() / 20));
  for (std::uint32_t i = 0; i < n && !d.failed(); ++i) {
    DescResult r;
    r.status = static_cast<XferStatus>(d.i32());
    r.size = d.u64();
    r.tier = d.str(256);
    r.error = d.str(4096);
    m->results.push_back(std::move(r));
  }
  return finish(d);
}

std::string encode(Type type, const CallReply& m) {
  Encoder e;
  e.u64(m.call);
  e.i32(static_cast<std::int32_t>(m.status));
  e.str(m.text);
  e.u64(m.count);
  e.u32(static_cast<std::uint32_t>(m.objects.size()));
  for (const auto& o : m.objects) {
    e.str(o.key);
    e.u64(o.size);
    e.str(o.tier);
  }
  e.u32(static_cast<std::uint32_t>(m.found.size()));
  for (const std::uint8_t f : m.found) e.u8(f);
  return e.frame(type);
}

bool decode(Type, std::string_view body, CallReply* m) {
  Decoder d(body);
  m->call = d.u64();
  m->status = static_cast<XferStatus>(d.i32());
  m->text = d.str();
  m->count = d.u64();
  const std::uint32_t n = d.u32();
  if (n > 16 * kMaxItems) return false;
  for (std::uint32_t i = 0; i < n && !d.failed(); ++i) {
    ObjectInfo o;
    o.key = d.str(kMaxKey);
    o.size = d.u64();
    o.tier = d.str(256);
    m->objects.push_back(std::move(o));
  }
  const std::uint32_t answers = d.u32();
  if (answers > kMaxItems) return false;
  for (std::uint32_t i = 0; i < answers && !d.failed(); ++i) {
    const std::uint8_t f = d.u8();
    if (f > 1) return false;
    m->found.push_back(f);
  }
  return finish(d);
}

std::string encode(Type type, const CallMsg& m) {
  Encoder e;
  e.u64(m.call);
  e.str(m.prefix);
  e.str(m.after);
  e.u32(m.limit);
  e.u32(static_cast<std::uint32_t>(m.keys.size()));
  for (const auto& k : m.keys) e.str(k);
  e.u64(m.region);
  return e.frame(type);
}

bool decode(Type, std::string_view body, CallMsg* m) {
  Decoder d(body);
  m->call = d.u64();
  m->prefix = d.str(kMaxKey);
  m->after = d.str(kMaxKey);
  m->limit = d.u32();
  const std::uint32_t n = d.u32();
  if (n > kMaxItems) return false;
  for (std::uint32_t i = 0; i < n && !d.failed(); ++i) m->keys.push_back(d.str(kMaxKey));
  m->region = d.u64();
  return finish(d);
}

}  // namespace ferry::xfer::proto
