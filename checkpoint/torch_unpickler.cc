#include "checkpoint/torch_unpickler.h"

#include <cstring>
#include <memory>
#include <utility>
#include <variant>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "checkpoint/pickle_values.h"

namespace llama {
namespace {

using namespace pickle;  // NOLINT: the value model is this file's vocabulary.

// Bounds for hostile input; a 70B shard's data.pkl has ~1k tensors.
constexpr size_t kMaxStackDepth = 1 << 16;
constexpr size_t kMaxMemo = 1 << 20;
constexpr int kMaxTensorRank = 8;
constexpr size_t kMaxObjects = 1 << 20;

class Unpickler {
 public:
  Unpickler(absl::Span<const uint8_t> data, const std::string& source) : data_(data), source_(source) {}

  absl::StatusOr<Value> Run();

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: data.pkl offset %d: %s", source_, op_offset_, what));
  }
  absl::Status Need(size_t n) const {
    if (data_.size() - pos_ < n) return Error("truncated pickle");
    return absl::OkStatus();
  }
  uint64_t ReadLE(size_t n) {
    uint64_t value = 0;
    for (size_t i = 0; i < n; ++i) value |= static_cast<uint64_t>(data_[pos_ + i]) << (8 * i);
    pos_ += n;
    return value;
  }
  absl::StatusOr<std::string> ReadLine() {
    const size_t start = pos_;
    while (pos_ < data_.size() && data_[pos_] != '\n') ++pos_;
    if (pos_ == data_.size()) return Error("truncated pickle (unterminated line)");
    std::string line(reinterpret_cast<const char*>(data_.data() + start), pos_ - start);
    ++pos_;
    return line;
  }
  absl::StatusOr<std::string> ReadBytes(uint64_t n) {
    if (data_.size() - pos_ < n) return Error("truncated pickle (string runs past the end)");
    std::string s(reinterpret_cast<const char*>(data_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  absl::Status Push(Value value) {
    if (stack_.size() >= kMaxStackDepth) return Error("pickle stack too deep");
    stack_.push_back(std::move(value));
    return absl::OkStatus();
  }
  absl::StatusOr<Value> Pop() {
    if (stack_.empty()) return Error("pickle stack underflow");
    Value v = std::move(stack_.back());
    stack_.pop_back();
    if (std::holds_alternative<Mark>(v.v)) return Error("unexpected mark");
    return v;
  }
  // Pops everything down to the last mark, in push order.
  absl::StatusOr<std::vector<Value>> PopToMark() {
    for (size_t i = stack_.size(); i-- > 0;) {
      if (std::holds_alternative<Mark>(stack_[i].v)) {
        std::vector<Value> items(std::make_move_iterator(stack_.begin() + i + 1),
                                 std::make_move_iterator(stack_.end()));
        stack_.resize(i);
        return items;
      }
    }
    return Error("no mark on the stack");
  }
  absl::Status Memoize(uint64_t index) {
    if (stack_.empty()) return Error("memo put with an empty stack");
    if (index >= kMaxMemo) return Error(absl::StrFormat("memo index %d too large", index));
    memo_[index] = stack_.back();
    return absl::OkStatus();
  }
  absl::Status Recall(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) return Error(absl::StrFormat("memo index %d was never stored", index));
    return Push(it->second);
  }
  absl::Status PushObject(Object::Kind kind, std::vector<Value> items) {
    if (arena_.size() >= kMaxObjects) return Error("too many objects in the pickle");
    arena_.push_back(std::make_unique<Object>(Object{kind, std::move(items)}));
    return Push(Value{arena_.back().get()});
  }
  absl::StatusOr<ObjectPtr> TopContainer(Object::Kind kind, size_t below) {
    if (stack_.size() < below + 1) return Error("pickle stack underflow");
    auto* object = std::get_if<ObjectPtr>(&stack_[stack_.size() - 1 - below].v);
    if (object == nullptr || (*object)->kind != kind) {
      return Error(absl::StrFormat("expected a %s under the items", kind == Object::Kind::kDict ? "dict" : "list"));
    }
    return *object;
  }
  absl::Status PushGlobal(std::string module, std::string name) {
    if (!IsAllowedGlobal(module, name)) {
      return Error(absl::StrFormat(
          "global \"%s.%s\" is not allowed (a state dict of tensors needs only "
          "collections.OrderedDict, torch._utils._rebuild_tensor_v2 and torch storage classes); "
          "refusing to load",
          module, name));
    }
    return Push(Value{Global{std::move(module), std::move(name)}});
  }
  // The top `n` values, popped, in push order.
  absl::StatusOr<std::vector<Value>> PopItems(size_t n) {
    std::vector<Value> items(n);
    for (size_t i = n; i-- > 0;) {
      ASSIGN_OR_RETURN(items[i], Pop());
    }
    return items;
  }
  absl::Status PersistentLoad(const Value& pid);
  absl::Status Reduce(const Value& callable, const Value& args);

  // One opcode (after its byte), by group: Step dispatches.
  absl::Status Step(uint8_t op);
  absl::StatusOr<Value> Stop();
  absl::Status CheckProtocol();
  absl::Status Skip(size_t n);
  absl::Status MarkedTuple();
  absl::Status SmallTuple(size_t n);
  absl::Status Append(bool marked);
  absl::Status SetItems(bool marked);
  absl::Status Build();
  absl::Status MemoizeAt(size_t width);
  absl::Status RecallAt(size_t width);
  absl::Status Dup();
  absl::Status PushInt(size_t width, bool is_signed);
  absl::Status PushLong1();
  absl::Status PushFloat();
  absl::Status PushString(size_t width);
  absl::Status LineGlobal();
  absl::Status StackGlobal();
  absl::Status Call();
  absl::Status BinPersistentId();

  absl::Span<const uint8_t> data_;
  const std::string& source_;
  size_t pos_ = 0;
  size_t op_offset_ = 0;
  std::vector<Value> stack_;
  absl::flat_hash_map<uint64_t, Value> memo_;
  std::vector<std::unique_ptr<Object>> arena_;
};

absl::StatusOr<int64_t> AsInt(const Value& value) {
  if (auto* i = std::get_if<int64_t>(&value.v)) return *i;
  if (auto* b = std::get_if<bool>(&value.v)) return static_cast<int64_t>(*b);
  return absl::InvalidArgumentError(absl::StrCat("expected an int, found a ", TypeName(value)));
}

absl::StatusOr<std::vector<int64_t>> AsIntTuple(const Value& value) {
  auto* object = std::get_if<ObjectPtr>(&value.v);
  if (object == nullptr || (*object)->kind != Object::Kind::kTuple) {
    return absl::InvalidArgumentError(absl::StrCat("expected a tuple of ints, found a ", TypeName(value)));
  }
  std::vector<int64_t> ints;
  for (const Value& item : (*object)->items) {
    ASSIGN_OR_RETURN(const int64_t i, AsInt(item));
    ints.push_back(i);
  }
  return ints;
}

absl::Status Unpickler::PersistentLoad(const Value& pid) {
  auto* tuple = std::get_if<ObjectPtr>(&pid.v);
  if (tuple == nullptr || (*tuple)->kind != Object::Kind::kTuple || (*tuple)->items.size() != 5) {
    return Error("persistent id is not a ('storage', class, key, location, numel) tuple");
  }
  const std::vector<Value>& items = (*tuple)->items;
  auto* tag = std::get_if<std::string>(&items[0].v);
  auto* cls = std::get_if<Global>(&items[1].v);
  auto* key = std::get_if<std::string>(&items[2].v);
  auto* numel = std::get_if<int64_t>(&items[4].v);
  if (tag == nullptr || *tag != "storage" || cls == nullptr || key == nullptr || numel == nullptr ||
      *numel < 0) {
    return Error("persistent id is not a ('storage', class, key, location, numel) tuple");
  }
  for (const TorchStorageClass& c : kTorchStorageClasses) {
    if (cls->module == "torch" && cls->name == c.name) {
      return Push(Value{Storage{*key, c.dtype, *numel}});
    }
  }
  return Error(absl::StrFormat("persistent id names %s.%s, which is not a storage class", cls->module, cls->name));
}

absl::Status Unpickler::Reduce(const Value& callable, const Value& args_value) {
  auto* global = std::get_if<Global>(&callable.v);
  auto* args_object = std::get_if<ObjectPtr>(&args_value.v);
  if (global == nullptr || args_object == nullptr || (*args_object)->kind != Object::Kind::kTuple) {
    return Error(absl::StrFormat("REDUCE of a %s with a %s", TypeName(callable), TypeName(args_value)));
  }
  const std::vector<Value>& args = (*args_object)->items;
  if (global->name == "OrderedDict") {
    if (!args.empty()) return Error("OrderedDict called with arguments");
    return PushObject(Object::Kind::kDict, {});
  }
  if (global->name == "_rebuild_parameter") {
    if (args.size() < 1 || !std::holds_alternative<Tensor>(args[0].v)) {
      return Error("_rebuild_parameter without a tensor");
    }
    return Push(args[0]);
  }
  if (global->name == "_rebuild_tensor_v2") {
    // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
    if (args.size() < 4) return Error("_rebuild_tensor_v2 with fewer than 4 arguments");
    auto* storage = std::get_if<Storage>(&args[0].v);
    if (storage == nullptr) return Error("_rebuild_tensor_v2 without a storage");
    absl::StatusOr<int64_t> offset = AsInt(args[1]);
    absl::StatusOr<std::vector<int64_t>> shape = AsIntTuple(args[2]);
    absl::StatusOr<std::vector<int64_t>> strides = AsIntTuple(args[3]);
    for (const absl::Status& s : {offset.status(), shape.status(), strides.status()}) {
      if (!s.ok()) return Error(absl::StrCat("_rebuild_tensor_v2: ", s.message()));
    }
    if (shape->size() != strides->size() || shape->size() > kMaxTensorRank) {
      return Error(absl::StrFormat("_rebuild_tensor_v2: %d sizes but %d strides (rank at most %d)",
                                   shape->size(), strides->size(), kMaxTensorRank));
    }
    Tensor tensor;
    tensor.record.storage_key = storage->key;
    tensor.record.dtype = storage->dtype;
    tensor.record.storage_numel = storage->numel;
    tensor.record.storage_offset = *offset;
    tensor.record.shape = *std::move(shape);
    tensor.record.strides = *std::move(strides);
    return Push(Value{std::move(tensor)});
  }
  return Error(absl::StrFormat("REDUCE of %s.%s is not allowed", global->module, global->name));
}

absl::StatusOr<Value> Unpickler::Run() {
  while (true) {
    op_offset_ = pos_;
    RETURN_IF_ERROR(Need(1));
    const uint8_t op = data_[pos_++];
    if (op == '.') return Stop();
    RETURN_IF_ERROR(Step(op));
  }
}

absl::Status Unpickler::Step(uint8_t op) {
  switch (op) {
    // Framing.
    case 0x80: return CheckProtocol();  // PROTO
    case 0x95: return Skip(8);          // FRAME: an 8-byte length; the framed bytes follow inline.
    // Containers.
    case '(': return Push(Value{Mark{}});                    // MARK
    case '}': return PushObject(Object::Kind::kDict, {});   // EMPTY_DICT
    case ']': return PushObject(Object::Kind::kList, {});   // EMPTY_LIST
    case ')': return PushObject(Object::Kind::kTuple, {});  // EMPTY_TUPLE
    case 't': return MarkedTuple();                         // TUPLE
    case 0x85: case 0x86: case 0x87: return SmallTuple(op - 0x84);  // TUPLE1..3
    case 'a': return Append(/*marked=*/false);              // APPEND
    case 'e': return Append(/*marked=*/true);               // APPENDS
    case 's': return SetItems(/*marked=*/false);            // SETITEM
    case 'u': return SetItems(/*marked=*/true);             // SETITEMS
    case 'b': return Build();                               // BUILD
    // Memo and stack.
    case 'q': return MemoizeAt(1);                          // BINPUT
    case 'r': return MemoizeAt(4);                          // LONG_BINPUT
    case 0x94: return Memoize(memo_.size());                // MEMOIZE
    case 'h': return RecallAt(1);                           // BINGET
    case 'j': return RecallAt(4);                           // LONG_BINGET
    case '0': return Pop().status();                        // POP
    case '2': return Dup();                                 // DUP
    // Scalars.
    case 'J': return PushInt(4, /*is_signed=*/true);        // BININT
    case 'K': return PushInt(1, /*is_signed=*/false);       // BININT1
    case 'M': return PushInt(2, /*is_signed=*/false);       // BININT2
    case 0x8A: return PushLong1();                          // LONG1
    case 'N': return Push(Value{None{}});                   // NONE
    case 0x88: case 0x89: return Push(Value{op == 0x88});   // NEWTRUE, NEWFALSE
    case 'G': return PushFloat();                           // BINFLOAT
    case 'X': return PushString(4);                         // BINUNICODE
    case 0x8C: return PushString(1);                        // SHORT_BINUNICODE
    case 0x8D: return PushString(8);                        // BINUNICODE8
    // Globals and calls.
    case 'c': return LineGlobal();                          // GLOBAL
    case 0x93: return StackGlobal();                        // STACK_GLOBAL
    case 'R': return Call();                                // REDUCE
    case 'Q': return BinPersistentId();                     // BINPERSID
    default:
      return Error(absl::StrFormat("opcode 0x%02x ('%c') is not allowed in a state dict", op,
                                   (op >= 0x20 && op < 0x7F) ? op : '?'));
  }
}

absl::StatusOr<Value> Unpickler::Stop() {
  ASSIGN_OR_RETURN(Value result, Pop());
  if (!stack_.empty()) return Error("items left on the stack at STOP");
  return result;
}

absl::Status Unpickler::CheckProtocol() {
  RETURN_IF_ERROR(Need(1));
  if (data_[pos_] < 2 || data_[pos_] > 5) {
    return Error(absl::StrFormat("pickle protocol %d (expected 2 to 5)", data_[pos_]));
  }
  ++pos_;
  return absl::OkStatus();
}

absl::Status Unpickler::Skip(size_t n) {
  RETURN_IF_ERROR(Need(n));
  pos_ += n;
  return absl::OkStatus();
}

absl::Status Unpickler::MarkedTuple() {
  ASSIGN_OR_RETURN(std::vector<Value> items, PopToMark());
  return PushObject(Object::Kind::kTuple, std::move(items));
}

absl::Status Unpickler::SmallTuple(size_t n) {
  ASSIGN_OR_RETURN(std::vector<Value> items, PopItems(n));
  return PushObject(Object::Kind::kTuple, std::move(items));
}

absl::Status Unpickler::Append(bool marked) {
  ASSIGN_OR_RETURN(std::vector<Value> items, marked ? PopToMark() : PopItems(1));
  ASSIGN_OR_RETURN(ObjectPtr list, TopContainer(Object::Kind::kList, 0));
  for (Value& v : items) list->items.push_back(std::move(v));
  return absl::OkStatus();
}

absl::Status Unpickler::SetItems(bool marked) {
  ASSIGN_OR_RETURN(std::vector<Value> items, marked ? PopToMark() : PopItems(2));  // Key, value, ...
  if (marked && items.size() % 2 != 0) return Error("SETITEMS with an odd number of items");
  ASSIGN_OR_RETURN(ObjectPtr dict, TopContainer(Object::Kind::kDict, 0));
  for (Value& v : items) dict->items.push_back(std::move(v));
  return absl::OkStatus();
}

// Only a state dict's attributes (e.g. _metadata), which we drop.
absl::Status Unpickler::Build() {
  RETURN_IF_ERROR(Pop().status());
  if (!TopContainer(Object::Kind::kDict, 0).ok()) return Error("BUILD on something other than a dict");
  return absl::OkStatus();
}

absl::Status Unpickler::MemoizeAt(size_t width) {
  RETURN_IF_ERROR(Need(width));
  return Memoize(ReadLE(width));
}

absl::Status Unpickler::RecallAt(size_t width) {
  RETURN_IF_ERROR(Need(width));
  return Recall(ReadLE(width));
}

absl::Status Unpickler::Dup() {
  if (stack_.empty()) return Error("DUP with an empty stack");
  return Push(stack_.back());
}

absl::Status Unpickler::PushInt(size_t width, bool is_signed) {
  RETURN_IF_ERROR(Need(width));
  const uint64_t raw = ReadLE(width);
  return Push(Value{is_signed ? static_cast<int64_t>(static_cast<int32_t>(raw)) : static_cast<int64_t>(raw)});
}

// Little-endian two's complement, up to 8 bytes here.
absl::Status Unpickler::PushLong1() {
  RETURN_IF_ERROR(Need(1));
  const size_t n = data_[pos_++];
  if (n > 8) return Error(absl::StrFormat("LONG1 of %d bytes does not fit in 64 bits", n));
  RETURN_IF_ERROR(Need(n));
  uint64_t raw = ReadLE(n);
  if (n > 0 && n < 8 && (raw >> (8 * n - 1)) & 1) raw |= ~uint64_t{0} << (8 * n);
  return Push(Value{static_cast<int64_t>(raw)});
}

// Big-endian.
absl::Status Unpickler::PushFloat() {
  RETURN_IF_ERROR(Need(8));
  uint64_t bits = 0;
  for (int i = 0; i < 8; ++i) bits = (bits << 8) | data_[pos_ + i];
  pos_ += 8;
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return Push(Value{d});
}

// A string whose length comes first, in `width` bytes.
absl::Status Unpickler::PushString(size_t width) {
  RETURN_IF_ERROR(Need(width));
  ASSIGN_OR_RETURN(std::string s, ReadBytes(ReadLE(width)));
  return Push(Value{std::move(s)});
}

// "module\nname\n".
absl::Status Unpickler::LineGlobal() {
  ASSIGN_OR_RETURN(std::string module, ReadLine());
  ASSIGN_OR_RETURN(std::string name, ReadLine());
  return PushGlobal(std::move(module), std::move(name));
}

absl::Status Unpickler::StackGlobal() {
  ASSIGN_OR_RETURN(const std::vector<Value> items, PopItems(2));  // Module, name.
  auto* m = std::get_if<std::string>(&items[0].v);
  auto* n = std::get_if<std::string>(&items[1].v);
  if (n == nullptr || m == nullptr) return Error("STACK_GLOBAL without two strings");
  return PushGlobal(*m, *n);
}

absl::Status Unpickler::Call() {
  ASSIGN_OR_RETURN(const std::vector<Value> items, PopItems(2));  // Callable, arguments.
  return Reduce(items[0], items[1]);
}

absl::Status Unpickler::BinPersistentId() {
  ASSIGN_OR_RETURN(const Value pid, Pop());
  return PersistentLoad(pid);
}

}  // namespace

absl::StatusOr<std::vector<PickledTensor>> UnpickleStateDict(absl::Span<const uint8_t> pickle,
                                                             const std::string& source) {
  Unpickler unpickler(pickle, source);
  ASSIGN_OR_RETURN(const Value root, unpickler.Run());
  auto* dict = std::get_if<ObjectPtr>(&root.v);
  if (dict == nullptr || (*dict)->kind != Object::Kind::kDict) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: data.pkl holds a %s; expected a state dict (a dict of tensors)", source, TypeName(root)));
  }
  std::vector<PickledTensor> tensors;
  const std::vector<Value>& items = (*dict)->items;
  for (size_t i = 0; i < items.size(); i += 2) {
    auto* name = std::get_if<std::string>(&items[i].v);
    if (name == nullptr) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: state dict key %d is a %s; expected a string", source, i / 2, TypeName(items[i])));
    }
    auto* tensor = std::get_if<Tensor>(&items[i + 1].v);
    if (tensor == nullptr) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: state dict entry \"%s\" is a %s; expected a tensor", source, *name, TypeName(items[i + 1])));
    }
    PickledTensor record = tensor->record;
    record.name = *name;
    tensors.push_back(std::move(record));
  }
  return tensors;
}

}  // namespace llama
