#pragma once
// What the Python module transfers from and to: any object that offers the
// buffer protocol (NumPy, memoryview, bytearray), __cuda_array_interface__
// (torch and CuPy on a GPU) or DLPack (torch on a CPU, JAX), taken without a
// copy. A MemoryRef holds the object's memory for as long as it lives: the
// Py_buffer, or the DLPack tensor it consumed, is released only with it.

#include <Python.h>

#include <cstdint>
#include <string>

namespace ferry::python {

struct MemoryRange {
  std::uint64_t addr = 0;
  std::uint64_t len = 0;
  bool on_gpu = false;   // CUDA device memory (CAI, or DLPack's kDLCUDA)
  bool readonly = false;
};

class MemoryRef {
 public:
  // Throws std::invalid_argument (ValueError) for memory that is not
  // contiguous, read-only where `writable`, or of a device Ferry cannot reach,
  // and std::domain_error (TypeError) for an object that offers none of the three.
  MemoryRef(PyObject* obj, bool writable);
  ~MemoryRef();
  MemoryRef(const MemoryRef&) = delete;
  MemoryRef& operator=(const MemoryRef&) = delete;

  const MemoryRange& range() const noexcept { return range_; }

 private:
  void release() noexcept;
  bool try_buffer(PyObject* obj, bool writable);
  bool try_cuda_array_interface(PyObject* obj, bool writable);
  bool try_dlpack(PyObject* obj, bool writable);

  MemoryRange range_;
  Py_buffer view_{};
  bool have_view_ = false;
  PyObject* keep_ = nullptr;     // the object whose CAI we read
  void* dl_managed_ = nullptr;   // the DLManagedTensor we consumed (its deleter runs with us)
};

}  // namespace ferry::python
