#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace vaecodec::core {

// Note [Checking a torch.save pickle]
// A .pth file is a zip whose `data.pkl` is a Python pickle: a program for a stack machine that may name any
// Python global and call it (`posix.system` with a shell command is three opcodes). LibTorch's unpickler runs
// no Python, but it trusts the program in other ways: a memo index makes it allocate that many slots (a
// one-byte change asks for 17 GB), a string length is allocated before it is read, DICT and TUPLE index the
// stack without checking it, and a tensor's size, offset and stride are taken as they are, so a tensor may
// reach past its storage (read out of bounds) or a storage claim more bytes than its record holds.
// check_torch_pickle runs the program first on a model of that machine that knows only what torch.save
// writes for tensors in dicts, lists and tuples of plain values - the globals of PyTorch's weights_only
// loading that LibTorch can read (torch._utils._rebuild_tensor_v2, collections.OrderedDict, the
// torch.*Storage types) and the opcodes of pickle protocol 2 that LibTorch reads - and refuses anything else
// before LibTorch sees the file:
// - any other global, by name (nothing is called);
// - memo indices that skip ahead (Python's pickler numbers them 0, 1, 2, ...), strings longer than what is
//   left, LONG1 of another length than 8, stack and mark misuse, values nested deeper than kMaxPickleDepth,
//   a dict or list changed after it was put into another (which is what a cycle needs);
// - a storage whose record is missing, larger than the file, or smaller than the storage; storages that add
//   up to more than the file holds (overlapping zip entries, compressed records);
// - a tensor whose offset, sizes and strides reach outside its storage, or negative ones.
// What LibTorch then allocates is bounded by the file's size.
constexpr int kMaxPickleDepth = 32;

// The size in bytes of the record holding storage `key` (`data/<key>` in the archive), or nullopt if the
// archive has none.
using StorageRecordSize = std::function<std::optional<uint64_t>(const std::string& key)>;

// Checks the pickle of a torch.save archive of `file_size` bytes. Throws vaecodec::Error with the reason
// (without the file's name) for anything Note [Checking a torch.save pickle] refuses.
void check_torch_pickle(std::string_view pickle, uint64_t file_size, const StorageRecordSize& record_size);

}  // namespace vaecodec::core
