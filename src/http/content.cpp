#include "http/content.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "ferry/core/status.h"

namespace ferry::http {

static_assert(static_cast<std::uint8_t>(Methods::Get) == kMethodGet &&
              static_cast<std::uint8_t>(Methods::Head) == kMethodHead &&
              static_cast<std::uint8_t>(Methods::Post) == kMethodPost);

namespace {

const char* const kIndexPage =
    "<!DOCTYPE html>\n<html>\n<head><title>Ferry</title></head>\n<body>\n"
    "<h1>Ferry</h1>\n<p>This page was routed and its response head written by a Ferry worker.</p>\n"
    "<p><a href=\"/contacts.html\">Contacts</a></p>\n</body>\n</html>\n";
const char* const kContactsPage =
    "<!DOCTYPE html>\n<html>\n<head><title>Ferry: contacts</title></head>\n<body>\n"
    "<h1>Contacts</h1>\n<p>Ferry is an open project; its issues are the place to reach its developers.</p>\n"
    "<p><a href=\"/index.html\">Home</a></p>\n</body>\n</html>\n";

}  // namespace

std::string Content::type_for(const std::string& path) {
  static const std::map<std::string, std::string> types = {
      {".html", "text/html"},          {".htm", "text/html"},         {".css", "text/css"},
      {".js", "application/javascript"}, {".mjs", "application/javascript"}, {".json", "application/json"},
      {".txt", "text/plain"},          {".xml", "text/xml"},          {".csv", "text/csv"},
      {".md", "text/markdown"},        {".png", "image/png"},         {".jpg", "image/jpeg"},
      {".jpeg", "image/jpeg"},         {".gif", "image/gif"},         {".svg", "image/svg+xml"},
      {".ico", "image/x-icon"},        {".webp", "image/webp"},       {".avif", "image/avif"},
      {".woff", "font/woff"},          {".woff2", "font/woff2"},      {".wasm", "application/wasm"},
      {".pdf", "application/pdf"},     {".zip", "application/zip"},   {".gz", "application/gzip"},
      {".mp4", "video/mp4"},           {".webm", "video/webm"},       {".mp3", "audio/mpeg"}};
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  const auto it = types.find(ext);
  return it != types.end() ? it->second : "application/octet-stream";
}

Content Content::load(const std::string& root, std::uint64_t max_file_bytes,
                      std::vector<RouteBinding> routes) {
  Content c;
  c.add("/index.html", kIndexPage);
  c.add("/contacts.html", kContactsPage);
  if (!root.empty()) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(root, ec)) throw Error("HttpOptions::root " + root + " is not a directory");
    const fs::path base = fs::canonical(root);
    std::vector<fs::path> files;
    for (auto it = fs::recursive_directory_iterator(base, fs::directory_options::none, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_symlink()) continue;  // a link could lead outside the root
      if (it->is_regular_file()) files.push_back(it->path());
    }
    if (ec) throw Error("reading HttpOptions::root " + root + ": " + ec.message());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      const auto size = fs::file_size(f, ec);
      if (ec) throw Error("cannot read " + f.string() + ": " + ec.message());
      if (size > max_file_bytes)
        throw Error(f.string() + " is " + std::to_string(size) + " bytes, over HttpOptions::max_file_bytes " +
                    std::to_string(max_file_bytes));
      std::ifstream in(f, std::ios::binary);
      std::ostringstream body;
      body << in.rdbuf();
      if (!in) throw Error("cannot read " + f.string());
      c.add("/" + fs::relative(f, base).generic_string(), body.str());
    }
  }
  for (const RouteBinding& r : routes) {
    const auto methods = static_cast<std::uint8_t>(r.methods);
    if (r.path.empty() || r.path[0] != '/' || r.path.find_first_of("?#") != std::string::npos)
      throw Error("route path \"" + r.path + "\" must start with '/' and hold no query or fragment");
    if (methods == 0 || (methods & ~(kMethodGet | kMethodHead | kMethodPost)) != 0)
      throw Error("route " + r.path + " takes no method: give Methods::Get, Head or Post");
    if (!r.route) throw Error("route " + r.path + " has no handler");
    for (const RouteBinding& other : c.routes_)
      if (other.path == r.path) throw Error("route " + r.path + " is registered twice");
    c.routes_.push_back(r);
  }
  c.build_index();
  return c;
}

void Content::add(const std::string& path, std::string body) {
  const auto it = std::find(paths_.begin(), paths_.end(), path);
  if (it != paths_.end()) {
    pages_[static_cast<std::size_t>(it - paths_.begin())] = std::move(body);
    return;
  }
  paths_.push_back(path);
  pages_.push_back(std::move(body));
}

void Content::build_index() {
  entries_.clear();
  strings_.clear();
  std::vector<const std::string*> indexed;
  const auto routed = [&](const std::string& path) {
    return std::any_of(routes_.begin(), routes_.end(), [&](const RouteBinding& r) { return r.path == path; });
  };
  for (std::size_t i = 0; i < paths_.size(); ++i) {
    if (routed(paths_[i])) continue;  // the route answers this path; the page stays in the store, unnamed
    indexed.push_back(&paths_[i]);
    ContentEntry e;
    e.path_offset = static_cast<std::uint32_t>(strings_.size());
    e.path_len = static_cast<std::uint32_t>(paths_[i].size());
    strings_.insert(strings_.end(), paths_[i].begin(), paths_[i].end());
    const std::string type = type_for(paths_[i]);
    e.type_offset = static_cast<std::uint32_t>(strings_.size());
    e.type_len = static_cast<std::uint32_t>(type.size());
    strings_.insert(strings_.end(), type.begin(), type.end());
    e.body_len = pages_[i].size();
    e.page = static_cast<std::uint32_t>(i);
    entries_.push_back(e);
  }
  for (std::size_t i = 0; i < routes_.size(); ++i) {
    indexed.push_back(&routes_[i].path);
    ContentEntry e;
    e.path_offset = static_cast<std::uint32_t>(strings_.size());
    e.path_len = static_cast<std::uint32_t>(routes_[i].path.size());
    strings_.insert(strings_.end(), routes_[i].path.begin(), routes_[i].path.end());
    e.page = static_cast<std::uint32_t>(i);
    e.route_methods = static_cast<std::uint8_t>(routes_[i].methods);
    e.open = routes_[i].needs_api_key ? 0 : 1;
    entries_.push_back(e);
  }
  std::size_t nb = 16;
  while (nb < 2 * entries_.size()) nb *= 2;
  buckets_.assign(nb, 0);
  const std::uint32_t mask = static_cast<std::uint32_t>(nb - 1);
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const std::string& path = *indexed[i];
    std::uint32_t b = fnv1a(reinterpret_cast<const std::uint8_t*>(path.data()), path.size()) & mask;
    while (buckets_[b] != 0) b = (b + 1) & mask;
    buckets_[b] = static_cast<std::uint32_t>(i + 1);
  }
}

void Content::require_api_key(const std::string& key) {
  if (key.empty()) return;
  const std::string credentials = "Bearer " + key;
  credentials_offset_ = static_cast<std::uint32_t>(strings_.size());
  credentials_len_ = static_cast<std::uint32_t>(credentials.size());
  strings_.insert(strings_.end(), credentials.begin(), credentials.end());
}

ContentView Content::view() const {
  ContentView v;
  v.credentials_offset = credentials_offset_;
  v.credentials_len = credentials_len_;
  v.entries = entries_.data();
  v.buckets = buckets_.data();
  v.strings = strings_.data();
  v.bucket_mask = static_cast<std::uint32_t>(buckets_.size() - 1);
  return v;
}

std::uint64_t Content::total_bytes() const {
  std::uint64_t t = 0;
  for (const auto& p : pages_) t += p.size();
  return t;
}

}  // namespace ferry::http
