// The values the restricted unpickler (torch_unpickler.cc) builds: what a
// torch.save'd state dict can contain, and the globals it may name.
// Internal to the unpickler.

#ifndef LLAMA_CHECKPOINT_PICKLE_VALUES_H_
#define LLAMA_CHECKPOINT_PICKLE_VALUES_H_

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "checkpoint/torch_storage.h"
#include "checkpoint/torch_unpickler.h"
#include "ops/dtype.h"

namespace llama::pickle {

struct Object;
struct Value;
// Containers live in the unpickler's arena and are referred to by raw
// pointer: the memo aliases them (SETITEMS after BINPUT), and a hostile
// pickle can make one contain itself, which reference counting would leak.
using ObjectPtr = Object*;

// The values a torch.save'd state dict can contain.
struct None {};
struct Mark {};
struct Global {
  std::string module, name;
};
struct Storage {
  std::string key;
  DType dtype;
  int64_t numel;
};
struct Object {
  enum class Kind { kTuple, kList, kDict } kind;
  std::vector<Value> items;  // Dicts: key, value, key, value, ...
};
struct Tensor {
  PickledTensor record;
};
struct Value {
  std::variant<None, Mark, bool, int64_t, double, std::string, Global, Storage, ObjectPtr, Tensor> v;
};

inline const char* TypeName(const Value& value) {
  static constexpr const char* kNames[] = {"None",   "mark",   "bool",    "int",    "float",
                                           "string", "global", "storage", "object", "tensor"};
  if (auto* o = std::get_if<ObjectPtr>(&value.v)) {
    return (*o)->kind == Object::Kind::kTuple ? "tuple" : (*o)->kind == Object::Kind::kList ? "list" : "dict";
  }
  return kNames[value.v.index()];
}

inline bool IsAllowedGlobal(const std::string& module, const std::string& name) {
  if (module == "collections" && name == "OrderedDict") return true;
  if (module == "torch._utils" && (name == "_rebuild_tensor_v2" || name == "_rebuild_parameter")) {
    return true;
  }
  if (module == "torch") {
    for (const TorchStorageClass& c : kTorchStorageClasses) {
      if (name == c.name) return true;
    }
  }
  return false;
}

}  // namespace llama::pickle

#endif  // LLAMA_CHECKPOINT_PICKLE_VALUES_H_
