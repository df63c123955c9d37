#pragma once
// The data of a chunked request body (RFC 9112 §7.1), sizes, extensions and
// trailers dropped. Trailer lines may end in a lone LF, as head lines may. The
// proxy's scan (message_scan.h) has already checked its syntax and size; this
// still refuses what does not parse rather than trust it.

#include <cstddef>
#include <cstdint>
#include <string>

namespace ferry::http {

// False if body is not a whole, well-formed chunked body.
bool decode_chunked_body(const std::uint8_t* body, std::size_t size, std::string& out);

}  // namespace ferry::http
