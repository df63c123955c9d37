// ferry._ferry: the transfer API's C++ client (include/ferry/xfer/agent.h) for
// Python. The public face is the pure-Python package around it (ferry/__init__.py);
// this layer converts types, turns ferry::Error into ferry.Error, and lets go of
// the GIL around every call that waits on the agent.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ferry/core/status.h"
#include "ferry/xfer/agent.h"
#include "memory_ref.h"

namespace py = pybind11;
using namespace ferry::xfer;
using ferry::python::MemoryRef;

namespace {

using NoGil = py::call_guard<py::gil_scoped_release>;

// One memory descriptor as Python hands it over: (addr, len).
using Desc = std::pair<std::uint64_t, std::uint64_t>;

// Buffers resolved once into descriptors, for transfers that repeat over the
// same memory (NIXL's prepared descriptor lists): posting one costs no Python
// per buffer. It holds every buffer's memory while it lives.
struct DescList {
  std::vector<MemDesc> descs;
  std::vector<std::unique_ptr<MemoryRef>> memory;
  bool writable = false;
};

std::unique_ptr<MemoryRef> make_memory(py::handle obj, bool writable) {
  try {
    return std::make_unique<MemoryRef>(obj.ptr(), writable);
  } catch (const std::domain_error& e) {
    throw py::type_error(e.what());
  }
}

void check_op(int op) {
  if (op != 0 && op != 1) throw std::invalid_argument("op must be ferry.Op.WRITE (0) or ferry.Op.READ (1)");
}

XferReq create(Agent& agent, int op, const std::vector<Desc>& descs, const std::vector<std::string>& keys,
               const std::string& notif) {
  check_op(op);
  std::vector<MemDesc> local;
  local.reserve(descs.size());
  for (const auto& [addr, len] : descs) local.push_back({addr, len, 0});
  return agent.create_xfer_req(static_cast<XferOp>(op), local, keys, notif);
}

std::unique_ptr<DescList> make_desc_list(const py::sequence& buffers, bool writable) {
  auto list = std::make_unique<DescList>();
  list->writable = writable;
  list->descs.reserve(buffers.size());
  for (const py::handle b : buffers) {
    list->memory.push_back(make_memory(b, writable));
    const auto& r = list->memory.back()->range();
    list->descs.push_back({r.addr, r.len, 0});
  }
  return list;
}

}  // namespace

PYBIND11_MODULE(_ferry, m) {
  m.doc() = "Ferry's transfer API (C++ client). Use the package `ferry`, not this module.";
  py::register_exception<ferry::Error>(m, "Error", PyExc_RuntimeError);

  py::class_<MemoryRef>(m, "Memory", "Memory taken from a Python object without a copy, held until close().")
      .def(py::init(&make_memory), py::arg("obj"), py::arg("writable") = false)
      .def_property_readonly("addr", [](const MemoryRef& r) { return r.range().addr; })
      .def_property_readonly("nbytes", [](const MemoryRef& r) { return r.range().len; })
      .def_property_readonly("on_gpu", [](const MemoryRef& r) { return r.range().on_gpu; })
      .def_property_readonly("readonly", [](const MemoryRef& r) { return r.range().readonly; });

  py::class_<DescList>(m, "DescList", "Buffers resolved into descriptors once, held while this object lives.")
      .def(py::init(&make_desc_list), py::arg("buffers"), py::arg("writable") = false)
      .def("__len__", [](const DescList& d) { return d.descs.size(); })
      .def_readonly("writable", &DescList::writable)
      .def_property_readonly("sizes", [](const DescList& d) {
        std::vector<std::uint64_t> out;
        for (const auto& x : d.descs) out.push_back(x.len);
        return out;
      });

  py::class_<MemRegion>(m, "Region")
      .def_readonly("id", &MemRegion::id)
      .def_readonly("addr", &MemRegion::addr)
      .def_readonly("len", &MemRegion::len)
      .def_readonly("dev_id", &MemRegion::dev_id)
      .def_property_readonly("on_gpu", [](const MemRegion& r) { return r.type == MemType::Vram; });

  py::class_<DescResult>(m, "DescResult")
      .def_property_readonly("status", [](const DescResult& r) { return static_cast<int>(r.status); })
      .def_readonly("size", &DescResult::size)
      .def_readonly("tier", &DescResult::tier)
      .def_readonly("error", &DescResult::error);

  py::class_<Notification>(m, "Notification")
      .def_readonly("request", &Notification::request)
      .def_readonly("message", &Notification::message)
      .def_property_readonly("status", [](const Notification& n) { return static_cast<int>(n.status); });

  py::class_<ObjectInfo>(m, "ObjectInfo")
      .def_readonly("key", &ObjectInfo::key)
      .def_readonly("size", &ObjectInfo::size)
      .def_readonly("tier", &ObjectInfo::tier)
      .def("__repr__", [](const ObjectInfo& o) {
        return "ObjectInfo(key=" + py::repr(py::str(o.key)).cast<std::string>() + ", size=" + std::to_string(o.size) +
               ", tier='" + o.tier + "')";
      });

  m.def("status_name", [](int s) { return std::string(to_string(static_cast<XferStatus>(s))); });

  py::class_<Agent>(m, "Agent")
      .def(py::init([](const std::string& endpoint, const std::string& name, int timeout_ms) {
             return std::make_unique<Agent>(AgentConfig{endpoint, name, timeout_ms});
           }),
           py::arg("endpoint"), py::arg("name"), py::arg("connect_timeout_ms"), NoGil())
      .def_property_readonly("tiers", &Agent::tiers)
      .def_property_readonly("backends",
                             [](const Agent& a) {
                               std::vector<std::string> names;
                               for (const auto& b : a.backends()) names.push_back(b.name);
                               return names;
                             })
      .def(
          "register_memory",
          [](Agent& a, const MemoryRef& mem) {
            const auto& r = mem.range();
            const MemType type = r.on_gpu ? MemType::Vram : MemType::Dram;
            py::gil_scoped_release nogil;
            return a.register_memory(type, reinterpret_cast<const void*>(r.addr), r.len);
          },
          py::arg("memory"))
      // A range by address, for memory that no Python object spans whole (the
      // ferry.lmcache connector registers the mapping a chunk lies in).
      .def(
          "register_range",
          [](Agent& a, std::uint64_t addr, std::uint64_t len, bool on_gpu) {
            return a.register_memory(on_gpu ? MemType::Vram : MemType::Dram, reinterpret_cast<const void*>(addr),
                                     len);
          },
          py::arg("addr"), py::arg("len"), py::arg("on_gpu") = false, NoGil())
      .def(
          "register_shared_file",
          [](Agent& a, std::uint64_t addr, std::uint64_t len, int fd, std::uint64_t file_offset) {
            return a.register_shared_file(reinterpret_cast<const void*>(addr), len, fd, file_offset);
          },
          py::arg("addr"), py::arg("len"), py::arg("fd"), py::arg("file_offset"), NoGil())
      .def("deregister_memory", &Agent::deregister_memory, py::arg("region"), NoGil())
      .def("create_xfer_req", &create, py::arg("op"), py::arg("descs"), py::arg("keys"), py::arg("notif") = "",
           NoGil())
      .def(
          "create_xfer_req",
          [](Agent& a, int op, const DescList& descs, const std::vector<std::string>& keys, const std::string& notif) {
            check_op(op);
            return a.create_xfer_req(static_cast<XferOp>(op), descs.descs, keys, notif);
          },
          py::arg("op"), py::arg("descs"), py::arg("keys"), py::arg("notif") = "", NoGil())
      .def("post", [](Agent& a, XferReq r) { return static_cast<int>(a.post(r)); }, NoGil())
      .def("status", [](Agent& a, XferReq r) { return static_cast<int>(a.status(r)); }, NoGil())
      .def("wait", [](Agent& a, XferReq r, int ms) { return static_cast<int>(a.wait(r, ms)); }, py::arg("req"),
           py::arg("timeout_ms") = -1, NoGil())
      .def("results", &Agent::results, NoGil())
      .def("release", &Agent::release, NoGil())
      .def("notify_fd", &Agent::notify_fd)
      .def("get_notifs", &Agent::get_notifs, NoGil())
      .def("list", &Agent::list, py::arg("prefix") = "", NoGil())
      .def(
          "list_page",
          [](Agent& a, const std::string& prefix, const std::string& after, std::uint32_t limit) {
            ObjectPage p = a.list_page(prefix, after, limit);
            return std::make_pair(std::move(p.objects), std::move(p.next));
          },
          py::arg("prefix") = "", py::arg("after") = "", py::arg("limit") = 0, NoGil())
      .def("remove_each", [](Agent& a, const std::vector<std::string>& keys) { return a.remove_each(keys); },
           NoGil())
      .def("exists", [](Agent& a, const std::vector<std::string>& keys) { return a.exists(keys); }, NoGil())
      .def("stats_json", &Agent::stats_json, NoGil());
}
