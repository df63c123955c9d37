#include "memory_ref.h"

#include <cstring>
#include <stdexcept>
#include <vector>

namespace ferry::python {
namespace {

// The DLPack ABI (dlpack.h, v0.8: the unversioned "dltensor" capsule that
// __dlpack__() returns when called without max_version). Only the fields we
// read are named; the layout is the standard's.
struct DLDevice {
  std::int32_t device_type;
  std::int32_t device_id;
};
struct DLDataType {
  std::uint8_t code;
  std::uint8_t bits;
  std::uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;  // in elements; NULL: compact row-major
  std::uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
constexpr std::int32_t kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3;

// Whether `strides` (elements, or bytes when itemsize is 1) describe a
// row-major array with no gaps. Dimensions of extent 1 may carry any stride.
bool row_major(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides, std::int64_t unit) {
  std::int64_t expect = unit;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

std::uint64_t product(const std::vector<std::int64_t>& shape) {
  std::uint64_t n = 1;
  for (auto s : shape) {
    if (s < 0) throw std::invalid_argument("a negative dimension");
    n *= static_cast<std::uint64_t>(s);
  }
  return n;
}

std::vector<std::int64_t> int_tuple(PyObject* seq, const char* what) {
  PyObject* fast = PySequence_Fast(seq, what);
  if (fast == nullptr) {
    PyErr_Clear();
    throw std::invalid_argument(std::string("__cuda_array_interface__: ") + what + " is not a sequence");
  }
  std::vector<std::int64_t> out;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  for (Py_ssize_t i = 0; i < n; ++i) out.push_back(PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i)));
  Py_DECREF(fast);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    throw std::invalid_argument(std::string("__cuda_array_interface__: ") + what + " holds a non-integer");
  }
  return out;
}

}  // namespace

MemoryRef::MemoryRef(PyObject* obj, bool writable) {
  try {
    if (!try_buffer(obj, writable) && !try_cuda_array_interface(obj, writable) && !try_dlpack(obj, writable))
      throw std::domain_error(std::string("a ") + Py_TYPE(obj)->tp_name +
                              " offers no memory: pass an object with the buffer protocol, "
                              "__cuda_array_interface__ or __dlpack__ (NumPy, torch, CuPy, memoryview)");
    if (range_.len == 0) throw std::invalid_argument("an empty buffer: nothing to transfer");
  } catch (...) {
    release();  // a throwing constructor runs no destructor
    throw;
  }
}

MemoryRef::~MemoryRef() { release(); }

void MemoryRef::release() noexcept {
  if (have_view_) PyBuffer_Release(&view_);
  have_view_ = false;
  Py_CLEAR(keep_);
  if (dl_managed_ != nullptr) {
    auto* m = static_cast<DLManagedTensor*>(dl_managed_);
    dl_managed_ = nullptr;
    if (m->deleter != nullptr) m->deleter(m);
  }
}

bool MemoryRef::try_buffer(PyObject* obj, bool writable) {
  if (!PyObject_CheckBuffer(obj)) return false;
  if (PyObject_GetBuffer(obj, &view_, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) != 0) {
    // Say why in our words: Python's own message names neither the call nor the remedy.
    const bool is_contiguous_problem = PyObject_GetBuffer(obj, &view_, PyBUF_FULL_RO) == 0;
    if (is_contiguous_problem) {
      const bool contiguous = PyBuffer_IsContiguous(&view_, 'C');
      PyBuffer_Release(&view_);
      PyErr_Clear();
      if (!contiguous) throw std::invalid_argument("the buffer is not C-contiguous: pass a contiguous copy or slice");
    }
    PyErr_Clear();
    throw std::invalid_argument("the buffer is read-only: a pull needs writable memory");
  }
  have_view_ = true;
  range_ = {reinterpret_cast<std::uint64_t>(view_.buf), static_cast<std::uint64_t>(view_.len), false,
            view_.readonly != 0};
  return true;
}

bool MemoryRef::try_cuda_array_interface(PyObject* obj, bool writable) {
  PyObject* cai = PyObject_GetAttrString(obj, "__cuda_array_interface__");
  if (cai == nullptr) {
    PyErr_Clear();
    return false;
  }
  struct Drop {
    PyObject* o;
    ~Drop() { Py_XDECREF(o); }
  } drop{cai};
  if (!PyDict_Check(cai)) throw std::invalid_argument("__cuda_array_interface__ is not a dict");
  PyObject* data = PyDict_GetItemString(cai, "data");
  PyObject* shape_obj = PyDict_GetItemString(cai, "shape");
  PyObject* typestr = PyDict_GetItemString(cai, "typestr");
  PyObject* strides_obj = PyDict_GetItemString(cai, "strides");
  if (data == nullptr || shape_obj == nullptr || typestr == nullptr || !PyTuple_Check(data) ||
      PyTuple_Size(data) != 2 || !PyUnicode_Check(typestr))
    throw std::invalid_argument("__cuda_array_interface__ lacks data, shape or typestr");
  const auto addr = PyLong_AsUnsignedLongLong(PyTuple_GetItem(data, 0));
  const bool readonly = PyObject_IsTrue(PyTuple_GetItem(data, 1)) == 1;
  if (PyErr_Occurred()) {
    PyErr_Clear();
    throw std::invalid_argument("__cuda_array_interface__: data[0] is not an address");
  }
  const std::string ts = PyUnicode_AsUTF8(typestr);
  const std::int64_t itemsize = ts.size() > 2 ? std::atoll(ts.c_str() + 2) : 0;
  if (itemsize <= 0) throw std::invalid_argument("__cuda_array_interface__: typestr '" + ts + "' has no item size");
  const auto shape = int_tuple(shape_obj, "shape");
  if (strides_obj != nullptr && strides_obj != Py_None) {
    const auto strides = int_tuple(strides_obj, "strides");
    if (strides.size() != shape.size() || !row_major(shape, strides, itemsize))
      throw std::invalid_argument("the CUDA array is not C-contiguous: pass .contiguous() or a slice of whole rows");
  }
  if (writable && readonly) throw std::invalid_argument("the CUDA array is read-only: a pull needs writable memory");
  range_ = {addr, product(shape) * static_cast<std::uint64_t>(itemsize), true, readonly};
  keep_ = obj;
  Py_INCREF(keep_);
  return true;
}

bool MemoryRef::try_dlpack(PyObject* obj, bool /*writable*/) {
  PyObject* fn = PyObject_GetAttrString(obj, "__dlpack__");
  if (fn == nullptr) {
    PyErr_Clear();
    return false;
  }
  PyObject* capsule = PyObject_CallNoArgs(fn);
  Py_DECREF(fn);
  if (capsule == nullptr) {
    PyErr_Clear();
    throw std::invalid_argument(std::string("__dlpack__() of a ") + Py_TYPE(obj)->tp_name + " failed");
  }
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (m == nullptr) {
    PyErr_Clear();
    Py_DECREF(capsule);
    throw std::invalid_argument("__dlpack__() returned no 'dltensor' capsule");
  }
  // Consuming the tensor: by the protocol the capsule is renamed and its
  // deleter is ours to call, which the destructor does.
  PyCapsule_SetName(capsule, "used_dltensor");
  Py_DECREF(capsule);
  dl_managed_ = m;
  const DLTensor& t = m->dl_tensor;
  if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDA && t.device.device_type != kDLCUDAHost)
    throw std::invalid_argument("DLPack device type " + std::to_string(t.device.device_type) +
                                " is neither host memory nor a CUDA device");
  const std::int64_t bits = static_cast<std::int64_t>(t.dtype.bits) * (t.dtype.lanes == 0 ? 1 : t.dtype.lanes);
  if (bits % 8 != 0) throw std::invalid_argument("DLPack: elements of " + std::to_string(bits) + " bits");
  std::vector<std::int64_t> shape(t.shape, t.shape + t.ndim);
  if (t.strides != nullptr && !row_major(shape, std::vector<std::int64_t>(t.strides, t.strides + t.ndim), 1))
    throw std::invalid_argument("the DLPack tensor is not C-contiguous: pass .contiguous()");
  range_ = {reinterpret_cast<std::uint64_t>(t.data) + t.byte_offset, product(shape) * static_cast<std::uint64_t>(bits / 8),
            t.device.device_type == kDLCUDA, false};
  return true;
}

}  // namespace ferry::python
