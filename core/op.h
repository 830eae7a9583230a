#pragma once

#include <string>

namespace vaecodec::core {

// What a run does with the model.
enum class Op { kEncode, kDecode, kRoundtrip };
Op parse_op(const std::string& name);  // "encode", "decode", "roundtrip"; throws otherwise
std::string op_name(Op op);

}  // namespace vaecodec::core
