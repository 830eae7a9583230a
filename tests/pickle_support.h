#pragma once

// Crafting torch.save files byte by byte: a pickle writer for the opcodes of protocol 2 and the zip around
// it. Used by the hostile-file tests and the .pth fuzz target.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <caffe2/serialize/inline_container.h>

namespace vaecodec::test {

// Appends pickle opcodes to a byte string.
class PickleWriter {
 public:
  PickleWriter& proto() { return op(0x80).byte(2); }
  PickleWriter& stop() { return op('.'); }
  PickleWriter& mark() { return op('('); }
  PickleWriter& empty_dict() { return op('}'); }
  PickleWriter& empty_list() { return op(']'); }
  PickleWriter& empty_tuple() { return op(')'); }
  PickleWriter& none() { return op('N'); }
  PickleWriter& boolean(bool v) { return op(v ? 0x88 : 0x89); }
  PickleWriter& integer(int32_t v) { return op('J').le(static_cast<uint32_t>(v), 4); }
  PickleWriter& long8(int64_t v) { return op(0x8a).byte(8).le(static_cast<uint64_t>(v), 8); }
  PickleWriter& string(const std::string& s) {
    op('X').le(s.size(), 4);
    bytes_ += s;
    return *this;
  }
  PickleWriter& global(const std::string& module, const std::string& name) {
    op('c');
    bytes_ += module + "\n" + name + "\n";
    return *this;
  }
  PickleWriter& tuple() { return op('t'); }
  PickleWriter& tuple1() { return op(0x85); }
  PickleWriter& tuple2() { return op(0x86); }
  PickleWriter& reduce() { return op('R'); }
  PickleWriter& persid() { return op('Q'); }
  PickleWriter& setitem() { return op('s'); }
  PickleWriter& setitems() { return op('u'); }
  PickleWriter& appends() { return op('e'); }
  PickleWriter& put(uint32_t id) { return op('r').le(id, 4); }
  PickleWriter& get(uint32_t id) { return op('j').le(id, 4); }
  PickleWriter& ints(const std::vector<int64_t>& values) {
    mark();
    for (auto v : values) integer(static_cast<int32_t>(v));
    return tuple();
  }
  // A tensor as torch.save writes it: _rebuild_tensor_v2((storage, offset, sizes, strides, False,
  // OrderedDict())), its storage ('storage', torch.<type>, key, 'cpu', numel) read from data/<key>.
  PickleWriter& tensor(const std::string& key, int64_t numel, int64_t offset,
                       const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                       const std::string& storage_type = "FloatStorage") {
    global("torch._utils", "_rebuild_tensor_v2").mark();
    mark()
        .string("storage")
        .global("torch", storage_type)
        .string(key)
        .string("cpu")
        .long8(numel)
        .tuple()
        .persid();
    integer(static_cast<int32_t>(offset)).ints(sizes).ints(strides).boolean(false);
    global("collections", "OrderedDict").empty_tuple().reduce();
    return tuple().reduce();
  }
  PickleWriter& raw(const std::string& bytes) {
    bytes_ += bytes;
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  PickleWriter& op(int code) { return byte(code); }
  PickleWriter& byte(int v) {
    bytes_ += static_cast<char>(v);
    return *this;
  }
  PickleWriter& le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes_ += static_cast<char>((v >> (8 * i)) & 0xff);
    return *this;
  }
  std::string bytes_;
};

// A torch.save zip holding `pickle` as data.pkl and each of `storages` as data/<key>, written by LibTorch's
// own writer (so checksums and layout are right and only the contents are hostile). `compressed` deflates the
// storages, which torch.save never does.
inline std::string torch_zip(const std::string& pickle, const std::map<std::string, std::string>& storages,
                             bool compressed = false) {
  std::string out;
  {
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) {
      out.append(static_cast<const char*>(data), size);
      return size;
    });
    writer.writeRecord("data.pkl", pickle.data(), pickle.size());
    for (const auto& [key, bytes] : storages) {
      writer.writeRecord("data/" + key, bytes.data(), bytes.size(), compressed);
    }
    writer.writeEndOfFile();
  }
  return out;
}

}  // namespace vaecodec::test
