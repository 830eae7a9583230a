#include "core/torch_pickle.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "core/error.h"

namespace vaecodec::core {

namespace {

// What the model of the unpickler knows about a value: its kind and, where a later check needs them, its
// contents.
enum class Kind {
  None,
  Bool,
  Int,
  Float,
  String,
  Tuple,
  List,
  Dict,
  RebuildTensor,
  OrderedDict,
  StorageType,
  Storage,
  Tensor
};

struct Value {
  Kind kind = Kind::None;
  int64_t integer = 0;                        // Int
  std::string text;                           // String; Storage: its key
  std::vector<std::shared_ptr<Value>> items;  // Tuple
  size_t itemsize = 0;                        // StorageType, Storage: bytes per element
  uint64_t nbytes = 0;                        // Storage: bytes it holds
  int depth = 1;                              // containers nested in it, itself included
  bool sealed = false;                        // List, Dict: inside another value, no longer changed
};
using ValuePtr = std::shared_ptr<Value>;

ValuePtr make(Kind kind) {
  auto v = std::make_shared<Value>();
  v->kind = kind;
  return v;
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::None:
      return "None";
    case Kind::Bool:
      return "a bool";
    case Kind::Int:
      return "an int";
    case Kind::Float:
      return "a float";
    case Kind::String:
      return "a string";
    case Kind::Tuple:
      return "a tuple";
    case Kind::List:
      return "a list";
    case Kind::Dict:
      return "a dict";
    case Kind::RebuildTensor:
      return "torch._utils._rebuild_tensor_v2";
    case Kind::OrderedDict:
      return "collections.OrderedDict";
    case Kind::StorageType:
      return "a storage type";
    case Kind::Storage:
      return "a storage";
    case Kind::Tensor:
      return "a tensor";
  }
  return "?";
}

// Text from the file, printable and short.
std::string shown(std::string_view text) {
  constexpr size_t kMaxShown = 60;
  std::string out;
  for (size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    out += (c < 0x20 || c >= 0x7f) ? '?' : static_cast<char>(c);
  }
  return out + (text.size() > kMaxShown ? "..." : "");
}

// The torch.*Storage classes torch.save names for tensors of a real dtype, and their element sizes.
std::optional<size_t> storage_itemsize(std::string_view name) {
  static const std::pair<std::string_view, size_t> kStorages[] = {
      {"DoubleStorage", 8}, {"FloatStorage", 4}, {"HalfStorage", 2},  {"BFloat16Storage", 2},
      {"LongStorage", 8},   {"IntStorage", 4},   {"ShortStorage", 2}, {"CharStorage", 1},
      {"ByteStorage", 1},   {"BoolStorage", 1}};
  for (const auto& [storage, size] : kStorages) {
    if (storage == name) return size;
  }
  return std::nullopt;
}

class PickleChecker {
 public:
  PickleChecker(std::string_view pickle, uint64_t file_size, const StorageRecordSize& record_size)
      : pickle_(pickle), file_size_(file_size), record_size_(record_size) {}

  void run() {
    if (pickle_.size() < 2 || static_cast<uint8_t>(pickle_[0]) != 0x80 ||
        static_cast<uint8_t>(pickle_[1]) != 2) {
      fail("its pickle does not start with PROTO 2 (torch.save's protocol)");
    }
    pos_ = 2;
    while (true) {
      const size_t at = pos_;
      const auto op = static_cast<uint8_t>(next(1)[0]);
      if (op == '.') break;  // STOP
      step(op, at);
    }
    if (stack_.size() != 1 || !marks_.empty()) {
      fail("its pickle ends with " + std::to_string(stack_.size()) + " values and " +
           std::to_string(marks_.size()) + " marks on the stack, not one value");
    }
  }

 private:
  [[noreturn]] void fail(const std::string& why) const { throw Error(why); }
  [[noreturn]] void fail_at(size_t at, const std::string& why) const {
    fail("its pickle " + why + " (at byte " + std::to_string(at) + ")");
  }

  std::string_view next(size_t n) {
    if (n > pickle_.size() - pos_) fail("its pickle is truncated (at byte " + std::to_string(pos_) + ")");
    const auto out = pickle_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  uint64_t little_endian(size_t n) {
    uint64_t v = 0;
    const auto bytes = next(n);
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
    return v;
  }
  std::string_view line(size_t at) {
    constexpr size_t kMaxLine = 256;
    const auto rest = pickle_.substr(pos_, kMaxLine);
    const auto end = rest.find('\n');
    if (end == std::string_view::npos) fail_at(at, "has a GLOBAL name that is not ended by a newline");
    pos_ += end + 1;
    return rest.substr(0, end);
  }

  // The bottom of the part of the stack the next opcode may use: values below the last MARK belong to the
  // container being built.
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  void need(size_t n, size_t at) const {
    if (stack_.size() < floor() + n) fail_at(at, "takes more values than the stack holds");
  }
  ValuePtr pop(size_t at) {
    need(1, at);
    auto v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  void push(ValuePtr v) { stack_.push_back(std::move(v)); }
  std::vector<ValuePtr> pop_mark(size_t at) {
    if (marks_.empty()) fail_at(at, "closes a MARK it never opened");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<ValuePtr> items(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(mark)),
                                std::make_move_iterator(stack_.end()));
    stack_.resize(mark);
    return items;
  }

  // `child` goes into `parent`: a dict or list is never changed once inside another value (so no cycle can
  // form), and nesting stays bounded.
  void adopt(Value& parent, Value& child, size_t at) {
    if (&parent == &child) fail_at(at, "puts a container into itself");
    if (child.kind == Kind::List || child.kind == Kind::Dict) child.sealed = true;
    parent.depth = std::max(parent.depth, child.depth + 1);
    if (parent.depth > kMaxPickleDepth) {
      fail_at(at, "nests values deeper than " + std::to_string(kMaxPickleDepth) + " levels");
    }
  }
  ValuePtr tuple(std::vector<ValuePtr> items, size_t at) {
    auto t = make(Kind::Tuple);
    for (auto& item : items) adopt(*t, *item, at);
    t->items = std::move(items);
    return t;
  }
  Value& mutable_container(Kind kind, size_t at) {
    need(1, at);
    Value& target = *stack_.back();
    if (target.kind != kind) {
      if (target.kind == Kind::None && kind == Kind::Dict) {
        fail_at(at,
                "fills a collections.OrderedDict, which LibTorch's unpickler reads as None (re-save the "
                "state dict as a plain dict or as .safetensors)");
      }
      fail_at(at, std::string("adds items to ") + kind_name(target.kind) + ", not to " +
                      (kind == Kind::Dict ? "a dict" : "a list"));
    }
    if (target.sealed) fail_at(at, "changes a container after putting it into another");
    return target;
  }
  void set_items(const std::vector<ValuePtr>& items, size_t at) {
    if (items.size() % 2 != 0) fail_at(at, "has a key without a value");
    Value& dict = mutable_container(Kind::Dict, at);
    for (size_t i = 0; i < items.size(); i += 2) {
      const Kind key = items[i]->kind;
      if (key != Kind::String && key != Kind::Int && key != Kind::Bool && key != Kind::None) {
        fail_at(at, std::string("uses ") + kind_name(key) + " as a dict key");
      }
      adopt(dict, *items[i + 1], at);
    }
  }

  void memo_put(uint64_t id, size_t at) {
    need(1, at);
    if (id > memo_.size()) {
      fail_at(at, "stores memo entry " + std::to_string(id) + " while only " + std::to_string(memo_.size()) +
                      " exist (torch.save numbers them in order)");
    }
    if (id == memo_.size()) {
      memo_.push_back(stack_.back());
    } else {
      memo_[id] = stack_.back();
    }
  }
  void memo_get(uint64_t id, size_t at) {
    if (id >= memo_.size())
      fail_at(at, "reads memo entry " + std::to_string(id) + ", which was never stored");
    push(memo_[id]);
  }

  void global(size_t at) {
    const std::string module(line(at));
    const std::string name(line(at));
    if (module == "torch._utils" && name == "_rebuild_tensor_v2") {
      push(make(Kind::RebuildTensor));
    } else if (module == "collections" && name == "OrderedDict") {
      push(make(Kind::OrderedDict));
    } else if (module == "torch" && storage_itemsize(name)) {
      auto v = make(Kind::StorageType);
      v->itemsize = *storage_itemsize(name);
      push(std::move(v));
    } else if (module == "torch._utils" && name == "_rebuild_parameter") {
      fail_at(at,
              "holds nn.Parameter objects, which LibTorch cannot unpickle (save model.state_dict(), "
              "whose values are plain tensors)");
    } else {
      fail_at(at,
              "names the Python global '" + shown(module) + "." + shown(name) +
                  "', which torch.save does not write for tensors and containers; refused, nothing was run");
    }
  }

  void reduce(size_t at) {
    auto args = pop(at);
    auto callable = pop(at);
    if (args->kind != Kind::Tuple) fail_at(at, "calls a global with " + std::string(kind_name(args->kind)));
    if (callable->kind == Kind::OrderedDict) {
      push(make(Kind::None));  // what LibTorch's unpickler makes of it
    } else if (callable->kind == Kind::RebuildTensor) {
      push(rebuild_tensor(*args, at));
    } else {
      fail_at(at, std::string("calls ") + kind_name(callable->kind));
    }
  }

  std::vector<int64_t> int_tuple(const Value& v, const char* what, size_t at) const {
    if (v.kind != Kind::Tuple) fail_at(at, std::string("gives a tensor ") + what + " that is not a tuple");
    std::vector<int64_t> out;
    for (const auto& item : v.items) {
      if (item->kind != Kind::Int || item->integer < 0) {
        fail_at(at, std::string("gives a tensor ") + what + " that are not non-negative integers");
      }
      out.push_back(item->integer);
    }
    return out;
  }

  // torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks). torch.save adds a
  // seventh argument only for conjugate or negative views, which weights never are.
  ValuePtr rebuild_tensor(const Value& args, size_t at) {
    const auto& a = args.items;
    if (a.size() != 6) {
      fail_at(at, "rebuilds a tensor from " + std::to_string(a.size()) + " arguments, not 6");
    }
    if (a[0]->kind != Kind::Storage || a[1]->kind != Kind::Int || a[4]->kind != Kind::Bool) {
      fail_at(at, "rebuilds a tensor from arguments of the wrong kinds");
    }
    const Value& storage = *a[0];
    const auto sizes = int_tuple(*a[2], "sizes", at);
    const auto strides = int_tuple(*a[3], "strides", at);
    if (sizes.size() != strides.size() || sizes.size() > 64) {
      fail_at(at, "gives a tensor " + std::to_string(sizes.size()) + " sizes and " +
                      std::to_string(strides.size()) + " strides");
    }
    if (a[1]->integer < 0) fail_at(at, "gives a tensor a negative storage offset");
    const auto offset = static_cast<uint64_t>(a[1]->integer);
    const std::string where = "tensor in storage '" + shown(storage.text) + "'";
    // The last element's index, offset + sum((size - 1) * stride), and the sizes' product with zeros counted
    // as ones (LibTorch computes it for contiguity even for an empty tensor) must fit in int64.
    unsigned __int128 last = offset;
    unsigned __int128 span = 1;
    bool empty = false;
    for (size_t i = 0; i < sizes.size(); ++i) {
      span *= static_cast<uint64_t>(std::max<int64_t>(sizes[i], 1));
      if (sizes[i] == 0) {
        empty = true;
      } else {
        last += static_cast<unsigned __int128>(sizes[i] - 1) * static_cast<uint64_t>(strides[i]);
      }
      if (span > static_cast<uint64_t>(INT64_MAX) || last > static_cast<uint64_t>(INT64_MAX)) {
        fail_at(at, "gives a " + where + " sizes or strides that overflow");
      }
    }
    const unsigned __int128 needed =
        empty ? static_cast<unsigned __int128>(offset) * storage.itemsize : (last + 1) * storage.itemsize;
    if (needed > storage.nbytes) {
      fail_at(at, "gives a " + where + " offset, sizes and strides that reach past its " +
                      std::to_string(storage.nbytes) + " bytes");
    }
    return make(Kind::Tensor);
  }

  // ('storage', torch.<Type>Storage, key, location, numel): a storage read from record data/<key>.
  void persistent_load(size_t at) {
    auto id = pop(at);
    const auto& a = id->items;
    if (id->kind != Kind::Tuple || a.size() != 5 || a[0]->kind != Kind::String || a[0]->text != "storage" ||
        a[1]->kind != Kind::StorageType || a[2]->kind != Kind::String || a[3]->kind != Kind::String ||
        a[4]->kind != Kind::Int) {
      fail_at(at, "has a persistent id that is not ('storage', type, key, location, numel)");
    }
    const std::string& key = a[2]->text;
    if (a[4]->integer < 0) fail_at(at, "gives storage '" + shown(key) + "' a negative size");
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(a[4]->integer), a[1]->itemsize, &nbytes)) {
      fail_at(at, "gives storage '" + shown(key) + "' a size that overflows");
    }
    // LibTorch reads each record once (a storage context shares it); later references see its first size.
    auto known = storages_.find(key);
    if (known == storages_.end()) {
      if (nbytes > 0) {
        const auto record = record_size_(key);
        if (!record)
          fail_at(at, "refers to storage '" + shown(key) + "', which has no record in the archive");
        if (*record > file_size_ || *record < nbytes) {
          fail_at(at, "gives storage '" + shown(key) + "' " + std::to_string(nbytes) +
                          " bytes, but its record holds " + std::to_string(*record) + " in a file of " +
                          std::to_string(file_size_));
        }
        storage_bytes_ += *record;
        if (storage_bytes_ > file_size_) {
          fail_at(at,
                  "has storages that add up to more bytes than the file holds (overlapping or compressed "
                  "records)");
        }
      }
      known = storages_.emplace(key, nbytes).first;
    }
    auto storage = make(Kind::Storage);
    storage->text = key;
    storage->itemsize = a[1]->itemsize;
    storage->nbytes = known->second;
    push(std::move(storage));
  }

  void step(uint8_t op, size_t at) {
    switch (op) {
      case '(':
        marks_.push_back(stack_.size());
        break;  // MARK
      case ']':
        push(make(Kind::List));
        break;  // EMPTY_LIST
      case '}':
        push(make(Kind::Dict));
        break;  // EMPTY_DICT
      case ')':
        push(make(Kind::Tuple));
        break;  // EMPTY_TUPLE
      case 'N':
        push(make(Kind::None));
        break;    // NONE
      case 0x88:  // NEWTRUE
      case 0x89:
        push(make(Kind::Bool));
        break;  // NEWFALSE
      case 'K':
        push_int(static_cast<int64_t>(little_endian(1)));
        break;  // BININT1
      case 'M':
        push_int(static_cast<int64_t>(little_endian(2)));
        break;  // BININT2
      case 'J':
        push_int(static_cast<int32_t>(static_cast<uint32_t>(little_endian(4))));
        break;      // BININT
      case 0x8a: {  // LONG1
        if (little_endian(1) != 8)
          fail_at(at, "has a LONG1 integer of other than 8 bytes, which LibTorch refuses");
        push_int(static_cast<int64_t>(little_endian(8)));
        break;
      }
      case 'G': {  // BINFLOAT
        next(8);
        push(make(Kind::Float));
        break;
      }
      case 'X': {  // BINUNICODE
        const auto length = little_endian(4);
        if (length > pickle_.size() - pos_) fail_at(at, "has a string longer than the rest of the pickle");
        auto s = make(Kind::String);
        s->text = std::string(next(length));
        push(std::move(s));
        break;
      }
      case 'q':
        memo_put(little_endian(1), at);
        break;  // BINPUT
      case 'r':
        memo_put(little_endian(4), at);
        break;  // LONG_BINPUT
      case 'h':
        memo_get(little_endian(1), at);
        break;  // BINGET
      case 'j':
        memo_get(little_endian(4), at);
        break;  // LONG_BINGET
      case 't':
        push(tuple(pop_mark(at), at));
        break;      // TUPLE
      case 0x85:    // TUPLE1
      case 0x86:    // TUPLE2
      case 0x87: {  // TUPLE3
        const size_t n = op - 0x84u;
        need(n, at);
        std::vector<ValuePtr> items(std::make_move_iterator(stack_.end() - static_cast<std::ptrdiff_t>(n)),
                                    std::make_move_iterator(stack_.end()));
        stack_.resize(stack_.size() - n);
        push(tuple(std::move(items), at));
        break;
      }
      case 'u':
        set_items(pop_mark(at), at);
        break;     // SETITEMS
      case 's': {  // SETITEM
        need(3, at);
        std::vector<ValuePtr> items{stack_[stack_.size() - 2], stack_.back()};
        stack_.resize(stack_.size() - 2);
        set_items(items, at);
        break;
      }
      case 'e': {  // APPENDS
        const auto items = pop_mark(at);
        Value& list = mutable_container(Kind::List, at);
        for (const auto& item : items) adopt(list, *item, at);
        break;
      }
      case 'c':
        global(at);
        break;  // GLOBAL
      case 'R':
        reduce(at);
        break;  // REDUCE
      case 'Q':
        persistent_load(at);
        break;  // BINPERSID
      default: {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "0x%02x", op);
        fail_at(at, std::string("uses opcode ") + hex +
                        ", which torch.save does not write for tensors and containers");
      }
    }
  }

  void push_int(int64_t value) {
    auto v = make(Kind::Int);
    v->integer = value;
    push(std::move(v));
  }

  std::string_view pickle_;
  size_t pos_ = 0;
  uint64_t file_size_;
  const StorageRecordSize& record_size_;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::vector<ValuePtr> memo_;
  std::map<std::string, uint64_t> storages_;  // key -> bytes of the storage LibTorch makes of its record
  uint64_t storage_bytes_ = 0;                // sum of the records read
};

}  // namespace

void check_torch_pickle(std::string_view pickle, uint64_t file_size, const StorageRecordSize& record_size) {
  PickleChecker(pickle, file_size, record_size).run();
}

}  // namespace vaecodec::core
