#pragma once
// What `ferry http` serves, fixed at start: the built-in pages, every regular
// file under --root, and the routes (ferry/http/route.h). The workers get the
// index of all their paths (content_view.h); the page bodies and the routes'
// handlers stay here, in host memory the proxy threads read.

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/http/route.h"
#include "http/content_view.h"

namespace ferry::http {

class Content {
 public:
  // The built-in /index.html and /contacts.html, then every regular file under
  // root (when not empty), which replaces a built-in page of the same path.
  // Symbolic links are skipped, so nothing outside root is served. Then the
  // routes, each of which replaces a page of its path. Throws ferry::Error
  // naming the file that cannot be read, or a route that is malformed or
  // whose path is taken by another.
  static Content load(const std::string& root, std::uint64_t max_file_bytes,
                      std::vector<RouteBinding> routes = {});

  // --api-key: from now on the index asks every path but the open routes
  // for "Authorization: Bearer KEY". Empty: none needed.
  void require_api_key(const std::string& key);

  // The index with host pointers (the CPU backend's); valid while this lives.
  ContentView view() const;
  const std::vector<ContentEntry>& entries() const { return entries_; }
  const std::vector<std::uint32_t>& buckets() const { return buckets_; }
  const std::vector<std::uint8_t>& strings() const { return strings_; }

  // Never changes or moves once loaded: the proxy threads send it by reference,
  // one copy for every connection.
  const std::string& page(std::uint32_t i) const { return pages_[i]; }
  std::size_t size() const { return pages_.size(); }
  // The route an index entry names (ContentEntry::page of a route's entry).
  const RouteBinding& route(std::uint32_t i) const { return routes_[i]; }
  std::size_t routes() const { return routes_.size(); }
  std::uint64_t total_bytes() const;

  // Content-Type by file extension, as nginx's mime.types would give it.
  static std::string type_for(const std::string& path);

 private:
  void add(const std::string& path, std::string body);
  std::uint32_t credentials_offset_ = 0, credentials_len_ = 0;
  void build_index();

  std::vector<std::string> paths_;
  std::vector<std::string> pages_;
  std::vector<RouteBinding> routes_;
  std::vector<ContentEntry> entries_;
  std::vector<std::uint32_t> buckets_;
  std::vector<std::uint8_t> strings_;
};

}  // namespace ferry::http
