#include "xfer/agent/session.h"

#include <unistd.h>

#include "core/log.h"
#include "ferry/core/status.h"
#include "xfer/messages.h"

namespace ferry::xfer::agent {

Session::Session(proto::FrameSocket sock, std::uint64_t id, AgentContext& ctx)
    : sock_(std::move(sock)), id_(id), name_("session " + std::to_string(id)), ctx_(ctx) {}

bool Session::send(const std::string& frame) {
  std::lock_guard lk(send_mu_);
  return sock_.send(frame);
}

void Session::reply_error(std::uint64_t call, XferStatus status, const std::string& message) {
  proto::CallReply r;
  r.call = call;
  r.status = status;
  r.text = message;
  send(proto::encode(proto::Type::CallError, r));
}

bool Session::handshake() {
  auto f = sock_.recv();
  if (!f) return false;
  if (f->fd >= 0) ::close(f->fd);
  proto::Hello hello;
  if (f->type != proto::Type::Hello || !proto::decode(f->body, &hello)) {
    log::app().error("{}: the peer did not start with a ferry agent hello (not a ferry application?)", name_);
    reply_error(0, XferStatus::ProtocolError, "expected hello");
    return false;
  }
  if (hello.version != proto::kVersion) {
    log::app().error("{}: protocol version {} (this agent speaks {})", name_, hello.version, proto::kVersion);
    reply_error(0, XferStatus::ProtocolError,
                "protocol version " + std::to_string(hello.version) + " is not " + std::to_string(proto::kVersion));
    return false;
  }
  name_ = "'" + hello.app + "' (session " + std::to_string(id_) + ")";
  proto::HelloOk ok{id_, ctx_.backends, ctx_.tiers};
  log::app().info("{} connected", name_);
  return send(proto::encode(ok));
}

void Session::run() noexcept {
  try {
    if (!handshake()) return;
    for (;;) {
      auto f = sock_.recv();
      if (!f) break;
      switch (f->type) {
        case proto::Type::Register: on_register(*f, f->fd); break;
        case proto::Type::Transfer:
          if (f->fd >= 0) ::close(f->fd);
          on_transfer(*f);
          break;
        case proto::Type::Deregister:
        case proto::Type::List:
        case proto::Type::Remove:
        case proto::Type::Stats:
          if (f->fd >= 0) ::close(f->fd);
          on_call(*f);
          break;
        default:
          if (f->fd >= 0) ::close(f->fd);
          throw Error(std::string("unexpected ") + proto::to_string(f->type) + " from an application");
      }
    }
    log::app().info("{} disconnected", name_);
  } catch (const std::exception& e) {
    ctx_.bad_requests.fetch_add(1);
    log::app().error("{}: {}; closing this session (others go on)", name_, e.what());
  }
}

void Session::on_register(const proto::Frame& f, int fd) {
  proto::RegisterMsg msg;
  if (!proto::decode(f.body, &msg)) {
    if (fd >= 0) ::close(fd);
    throw Error("malformed register");
  }
  try {
    auto region = ImportedRegion::open(msg, fd, ctx_.gpu_here);  // takes fd
    const std::uint64_t id = ctx_.next_region.fetch_add(1);
    log::app().debug("{}: registered region {}: {}", name_, id, region->describe());
    {
      std::lock_guard lk(regions_mu_);
      regions_.emplace(id, std::move(region));
    }
    send(proto::encode(proto::RegisterOk{msg.call, id}));
  } catch (const Error& e) {
    log::app().warn("{}: registration refused: {}", name_, e.what());
    reply_error(msg.call, XferStatus::InvalidDesc, e.what());
  }
}

void Session::on_transfer(proto::Frame& f) {
  PhaseTimer decode_time(ctx_.mover->phases(), Phase::Decode);
  auto job = std::make_shared<Job>();
  // The job keeps the frame's bytes, and its descriptors' keys view them: no
  // allocation per key (a request may carry tens of thousands).
  job->wire = std::move(f.body);
  proto::TransferMsg msg;
  if (!proto::decode(job->wire, &msg)) throw Error("malformed transfer");
  ctx_.transfers.fetch_add(1, std::memory_order_relaxed);
  job->op = msg.op;
  job->descs.reserve(msg.descs.size());
  // Never trust the application's bounds: check each descriptor against what it
  // registered. One bad descriptor fails the request before any byte moves (as
  // NIXL refuses a request with an invalid descriptor).
  std::string invalid;
  std::size_t invalid_index = 0;
  {
    std::lock_guard lk(regions_mu_);
    // Consecutive descriptors usually name the same region: look it up once.
    auto it = regions_.end();
    for (std::size_t i = 0; i < msg.descs.size() && invalid.empty(); ++i) {
      auto& d = msg.descs[i];
      if (it == regions_.end() || it->first != d.region) it = regions_.find(d.region);
      if (it == regions_.end()) {
        invalid = "region " + std::to_string(d.region) + " is not registered";
      } else if (d.len == 0 || d.offset > it->second->len() || d.len > it->second->len() - d.offset) {
        invalid = std::to_string(d.len) + " bytes at offset " + std::to_string(d.offset) + " lie outside region " +
                  std::to_string(d.region) + " (" + std::to_string(it->second->len()) + " bytes)";
      } else if (d.key.empty()) {
        invalid = "empty key";
      } else {
        job->descs.push_back({it->second, d.offset, d.len, d.key});
      }
      invalid_index = i;
    }
  }
  if (!invalid.empty()) {
    proto::TransferDone done;
    done.request = msg.request;
    done.status = XferStatus::InvalidDesc;
    done.results.assign(msg.descs.size(), DescResult{XferStatus::Cancelled, 0, "",
                                                     "not run: descriptor " + std::to_string(invalid_index) +
                                                         " is invalid"});
    done.results[invalid_index] = {XferStatus::InvalidDesc, 0, "",
                                   "descriptor " + std::to_string(invalid_index) + ": " + invalid};
    log::app().warn("{}: transfer {} refused: descriptor {}: {}", name_, msg.request, invalid_index, invalid);
    send(proto::encode(done));
    return;
  }
  std::weak_ptr<Session> self = weak_from_this();
  const std::uint64_t request = msg.request;
  DataMover* mover = ctx_.mover;
  job->on_done = [self, request, mover](Job& j) {
    PhaseTimer answer_time(mover->phases(), Phase::Answer);
    proto::TransferDone done;
    done.request = request;
    done.status = XferStatus::Ok;
    for (const auto& r : j.results)
      if (is_error(r.status)) {
        done.status = r.status;
        break;
      }
    done.results = std::move(j.results);
    if (auto s = self.lock()) {
      if (done.status != XferStatus::Ok)
        for (const auto& r : done.results)
          if (is_error(r.status)) {
            log::app().warn("{}: transfer {}: {} ({})", s->name(), request, r.error, to_string(r.status));
            break;
          }
      s->send(proto::encode(done));
    }
  };
  decode_time.stop();
  ctx_.mover->submit(std::move(job));
}

void Session::on_call(const proto::Frame& f) {
  proto::CallMsg m;
  if (!proto::decode(f.type, f.body, &m)) throw Error(std::string("malformed ") + proto::to_string(f.type));
  proto::CallReply r;
  r.call = m.call;
  switch (f.type) {
    case proto::Type::Deregister: {
      std::lock_guard lk(regions_mu_);
      regions_.erase(m.region);  // jobs in flight keep their own reference
      return;
    }
    case proto::Type::List:
      for (auto& o : ctx_.chain->list())
        if (o.key.compare(0, m.prefix.size(), m.prefix) == 0)
          r.objects.push_back({o.key, o.meta.size, o.tier_name});
      send(proto::encode(proto::Type::ListReply, r));
      return;
    case proto::Type::Remove:
      for (const auto& k : m.keys)
        if (ctx_.chain->remove(k)) ++r.count;
      send(proto::encode(proto::Type::RemoveReply, r));
      return;
    case proto::Type::Stats:
      r.text = ctx_.stats_json();
      send(proto::encode(proto::Type::StatsReply, r));
      return;
    default: return;
  }
}

}  // namespace ferry::xfer::agent
