#include "ferry/xfer/types.h"

namespace ferry::xfer {

const char* to_string(MemType t) noexcept {
  switch (t) {
    case MemType::Dram: return "DRAM";
    case MemType::Vram: return "VRAM";
    case MemType::Block: return "BLOCK";
    case MemType::Obj: return "OBJ";
    case MemType::File: return "FILE";
  }
  return "unknown memory type";
}

const char* to_string(XferOp op) noexcept {
  switch (op) {
    case XferOp::Write: return "WRITE";
    case XferOp::Read: return "READ";
  }
  return "unknown operation";
}

const char* to_string(XferStatus s) noexcept {
  switch (s) {
    case XferStatus::Ok: return "ok";
    case XferStatus::InProgress: return "in progress";
    case XferStatus::NotFound: return "not found";
    case XferStatus::InvalidDesc: return "invalid descriptor";
    case XferStatus::ChecksumMismatch: return "checksum mismatch";
    case XferStatus::NoSpace: return "no space";
    case XferStatus::Unavailable: return "backend unavailable";
    case XferStatus::IoError: return "I/O error";
    case XferStatus::TooLarge: return "too large";
    case XferStatus::Cancelled: return "cancelled";
    case XferStatus::ProtocolError: return "protocol error";
    case XferStatus::Internal: return "internal error";
  }
  return "unknown status";
}

}  // namespace ferry::xfer
