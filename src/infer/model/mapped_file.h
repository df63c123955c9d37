#pragma once
// A whole file mapped read-only into memory: the weights loader reads tensors
// straight from the mapping instead of copying a ~90 MB file into a buffer first.

#include <cstddef>
#include <span>
#include <string>

namespace ferry::infer {

class MappedFile {
 public:
  // Maps path read-only. Throws ferry::Error if it cannot be opened or mapped,
  // or is empty (a zero-length mapping is not possible, and no valid file is empty).
  static MappedFile open(const std::string& path);

  std::span<const std::byte> bytes() const noexcept { return {static_cast<const std::byte*>(data_), size_}; }
  const std::string& path() const noexcept { return path_; }

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

 private:
  MappedFile(std::string path, void* data, std::size_t size) noexcept
      : path_(std::move(path)), data_(data), size_(size) {}
  void unmap() noexcept;

  std::string path_;
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace ferry::infer
