#include "core/op.h"

#include "core/error.h"

namespace vaecodec::core {

Op parse_op(const std::string& name) {
  if (name == "encode") return Op::kEncode;
  if (name == "decode") return Op::kDecode;
  if (name == "roundtrip") return Op::kRoundtrip;
  throw Error("unknown operation '" + name + "': expected encode, decode or roundtrip");
}

std::string op_name(Op op) {
  switch (op) {
    case Op::kEncode:
      return "encode";
    case Op::kDecode:
      return "decode";
    case Op::kRoundtrip:
      return "roundtrip";
  }
  return "?";
}

}  // namespace vaecodec::core
