#include "http/content.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "ferry/core/status.h"

namespace ferry::http {
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

Content Content::load(const std::string& root, std::uint64_t max_file_bytes) {
  Content c;
  c.add("/index.html", kIndexPage);
  c.add("/contacts.html", kContactsPage);
  if (!root.empty()) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(root, ec)) throw Error("--root " + root + " is not a directory");
    const fs::path base = fs::canonical(root);
    std::vector<fs::path> files;
    for (auto it = fs::recursive_directory_iterator(base, fs::directory_options::none, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_symlink()) continue;  // a link could lead outside the root
      if (it->is_regular_file()) files.push_back(it->path());
    }
    if (ec) throw Error("reading --root " + root + ": " + ec.message());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      const auto size = fs::file_size(f, ec);
      if (ec) throw Error("cannot read " + f.string() + ": " + ec.message());
      if (size > max_file_bytes)
        throw Error(f.string() + " is " + std::to_string(size) + " bytes, over --max-file-size " +
                    std::to_string(max_file_bytes));
      std::ifstream in(f, std::ios::binary);
      std::ostringstream body;
      body << in.rdbuf();
      if (!in) throw Error("cannot read " + f.string());
      c.add("/" + fs::relative(f, base).generic_string(), body.str());
    }
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
  for (std::size_t i = 0; i < paths_.size(); ++i) {
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
  std::size_t nb = 16;
  while (nb < 2 * entries_.size()) nb *= 2;
  buckets_.assign(nb, 0);
  const std::uint32_t mask = static_cast<std::uint32_t>(nb - 1);
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    std::uint32_t b = fnv1a(reinterpret_cast<const std::uint8_t*>(paths_[i].data()), paths_[i].size()) & mask;
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
