// An emulated DirectML device: a real PrivateUse1 backend in host memory.
//
// It goes through PyTorch's dispatcher exactly the way torch-directml does:
// kernels are registered on the PrivateUse1 key for exactly the op names
// torch-directml registers (read from dmlprof's shipped table and passed in
// at run time), and everything else reaches a boxed backend fallback that
// warns with torch-directml's exact text (TORCH_WARN_ONCE), counts the call
// and runs the CPU kernel. The "native" kernels run the CPU kernel silently
// (at::native::cpu_fallback); only storage, factory, copy, view and
// convolution ops need real implementations, because their CPU kernels would
// either recurse into this device or only throw.
//
// Built with torch.utils.cpp_extension against torch 2.4.1 and current torch;
// EMU_TORCH_VERSION (major * 100 + minor) is passed in by the loader.

#include <torch/extension.h>

#include <ATen/EmptyTensor.h>
#include <ATen/InferSize.h>
#include <ATen/TensorUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/set_native.h>
#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/library.h>

#if EMU_TORCH_VERSION >= 206
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/CPUGeneratorImpl.h>
#endif

#ifdef _WIN32
#include <process.h>
extern "C" __declspec(dllimport) unsigned long __stdcall GetCurrentThreadId(void);
#else
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif
#endif

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstddef>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr c10::DeviceType kDevice = c10::DeviceType::PrivateUse1;

// ---------------------------------------------------------------- memory
// The bytes the device's storages hold now and at most since the last reset: what torch.cuda.memory_allocated()
// and max_memory_allocated() answer for a CUDA script scanned here (--from cuda), CUDA's caching allocator's
// arithmetic (a steady loop grows by 0, `del` frees the tensor's bytes), where the process's resident memory
// never goes down. Each block carries its size in a header ahead of the data, so a free knows what it gives back
// without a table (malloc's alignment is kept: the header is a multiple of it).
std::atomic<int64_t> g_live_bytes{0};
std::atomic<int64_t> g_peak_bytes{0};
constexpr size_t kHeader = alignof(std::max_align_t) > 16 ? alignof(std::max_align_t) : 16;

void count_allocated(int64_t nbytes) {
  const int64_t now = g_live_bytes.fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
  int64_t peak = g_peak_bytes.load(std::memory_order_relaxed);
  while (now > peak && !g_peak_bytes.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void host_delete(void* data) {
  if (data == nullptr) return;
  char* block = static_cast<char*>(data) - kHeader;
  int64_t nbytes;
  std::memcpy(&nbytes, block, sizeof(nbytes));
  g_live_bytes.fetch_sub(nbytes, std::memory_order_relaxed);
  std::free(block);
}

// Its blocks belong to the device with the allocator's index: 0, or none (-1) for a tensor made on "privateuseone"
// without one, as torch-directml's factories make it (measured, re-probe 19 case 14: its device reads "privateuseone").
struct HostAllocator final : public c10::Allocator {
  explicit HostAllocator(c10::DeviceIndex index) : index(index) {}
  const c10::DeviceIndex index;
  c10::DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) return {nullptr, nullptr, &host_delete, c10::Device(kDevice, index)};
    char* block = static_cast<char*>(std::malloc(nbytes + kHeader));
    TORCH_CHECK(block, "emulated DML device: could not allocate ", nbytes, " bytes");
    const int64_t size = static_cast<int64_t>(nbytes);
    std::memcpy(block, &size, sizeof(size));
    count_allocated(size);
    void* data = block + kHeader;
    return {data, data, &host_delete, c10::Device(kDevice, index)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &host_delete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

int64_t memory_allocated() { return g_live_bytes.load(); }
int64_t max_memory_allocated() { return g_peak_bytes.load(); }
void reset_peak_memory() { g_peak_bytes.store(g_live_bytes.load()); }

HostAllocator g_allocator(0);
HostAllocator g_indexless_allocator(-1);
REGISTER_ALLOCATOR(kDevice, &g_allocator);

// The allocator of a storage's blocks when it grows: its own (an index-less tensor stays index-less).
c10::Allocator* allocator_of(const c10::Storage& storage) {
  return storage.allocator() != nullptr ? storage.allocator() : &g_allocator;
}

// ---------------------------------------------------------------- device guard
struct EmulatedGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kDevice; }
  c10::Device exchangeDevice(c10::Device d) const override { return c10::Device(kDevice, 0); }
  c10::Device getDevice() const override { return c10::Device(kDevice, 0); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kDevice && (!d.has_index() || d.index() == 0), "emulated DML device has one device, index 0");
  }
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device d) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(kDevice, 0));
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(kDevice, 0));
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override { return getDefaultStream(d); }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(kDevice, 0));
  }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  // One in-order host "queue": events and streams are always complete.
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeEvent(void*) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, EmulatedGuardImpl);

// ---------------------------------------------------------------- helpers
bool on_device(const at::Tensor& t) { return t.defined() && t.device().type() == kDevice; }

// A CPU tensor over the same bytes and geometry as a device tensor (no copy;
// valid while the device tensor lives). Host memory makes this possible.
at::Tensor host_alias(const at::Tensor& t, c10::Device host);

at::Tensor cpu_alias(const at::Tensor& t) {
  if (!on_device(t)) return t;
  return host_alias(t, c10::Device(c10::kCPU));
}

// A CPU tensor over `t`'s bytes and geometry, on `host` ("cpu", or "cpu:0": a device the CPU kernels' own
// same-device checks tell from "cpu"); valid while `t` lives.
at::Tensor host_alias(const at::Tensor& t, c10::Device host) {
  const c10::Storage& storage = t.storage();
  c10::DataPtr ptr(const_cast<void*>(storage.data()), host);
  c10::Storage cpu_storage(c10::Storage::use_byte_size_t(), storage.nbytes(), std::move(ptr), nullptr, false);
  auto out = at::detail::make_tensor<c10::TensorImpl>(
      std::move(cpu_storage), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return out;
}

// A device tensor viewing `base`'s storage with the geometry of `cpu_view`,
// which a CPU view kernel computed on cpu_alias(base).
at::Tensor device_view_like(const at::Tensor& base, const at::Tensor& cpu_view) {
  auto out = at::detail::make_tensor<c10::TensorImpl>(
      c10::TensorImpl::VIEW, c10::Storage(base.storage()), base.key_set(), cpu_view.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(cpu_view.sizes(), cpu_view.strides(), cpu_view.storage_offset());
  return out;
}

c10::DispatchKeySet device_keys() { return c10::DispatchKeySet(c10::DispatchKey::PrivateUse1); }

at::Tensor empty_device(at::IntArrayRef size, at::IntArrayRef stride, c10::ScalarType dtype,
                        c10::Allocator* allocator = &g_allocator) {
  return at::detail::empty_strided_generic(size, stride, allocator, device_keys(), dtype);
}

// The allocator of a factory's tensor: an index-less one for a device argument of no index ("privateuseone"), as
// torch-directml's empty and empty_strided keep it (torch's own .to() and _to_copy give the index first:
// ensure_has_index asks the device guard, index 0).
c10::Allocator* allocator_for(const c10::IValue& device) {
  return !device.isNone() && !device.toDevice().has_index() ? &g_indexless_allocator : &g_allocator;
}

// A CPU result moved onto the device (same sizes and strides).
at::Tensor to_device(const at::Tensor& cpu) {
  if (!cpu.defined()) return cpu;
  auto out = empty_device(cpu.sizes(), cpu.strides(), cpu.scalar_type());
  cpu_alias(out).copy_(cpu);
  return out;
}

std::vector<int64_t> int_list(const c10::IValue& v) {
  std::vector<int64_t> out;
  for (const auto& item : v.toListRef()) {
    out.push_back(item.isInt() ? item.toInt() : item.toSymInt().guard_int(__FILE__, __LINE__));
  }
  return out;
}

int64_t as_int(const c10::IValue& v) {
  return v.isInt() ? v.toInt() : v.toSymInt().guard_int(__FILE__, __LINE__);
}

c10::ScalarType dtype_or_default(const c10::IValue& v) {
  return v.isNone() ? c10::typeMetaToScalarType(c10::get_default_dtype()) : v.toScalarType();
}

// ---------------------------------------------------------------- real kernels (boxed)
using Stack = torch::jit::Stack;

// empty.memory_format(SymInt[] size, *, dtype, layout, device, pin_memory, memory_format)
void k_empty(const c10::OperatorHandle&, Stack* s) {
  auto args = torch::jit::pop(*s, 6);
  auto size = int_list(args[0]);
  auto format = args[5].isNone() ? c10::MemoryFormat::Contiguous : args[5].toMemoryFormat();
  auto out = at::detail::empty_generic(size, allocator_for(args[3]), device_keys(), dtype_or_default(args[1]), format);
  torch::jit::push(*s, at::Tensor(std::move(out)));
}

// empty_strided(SymInt[] size, SymInt[] stride, *, dtype, layout, device, pin_memory)
void k_empty_strided(const c10::OperatorHandle&, Stack* s) {
  auto args = torch::jit::pop(*s, 6);
  torch::jit::push(*s, empty_device(int_list(args[0]), int_list(args[1]), dtype_or_default(args[2]),
                                    allocator_for(args[4])));
}

void resize_device(const at::Tensor& self, at::IntArrayRef size, std::optional<c10::MemoryFormat> format) {
  auto* impl = self.unsafeGetTensorImpl();
  if (self.sizes() != size || format.has_value()) {
    impl->set_sizes_contiguous(size);
    if (format.has_value() && *format != c10::MemoryFormat::Preserve) impl->empty_tensor_restride(*format);
  }
  size_t needed = at::detail::computeStorageNbytes(self.sizes(), self.strides(), self.dtype().itemsize(),
                                                   self.storage_offset());
  const c10::Storage& storage = self.storage();
  if (needed > storage.nbytes()) {
    TORCH_CHECK(storage.resizable(), "emulated DML device: trying to resize storage that is not resizable");
    c10::DataPtr fresh = allocator_of(storage)->allocate(needed);
    if (storage.nbytes()) std::memcpy(fresh.get(), storage.data(), storage.nbytes());
    const_cast<c10::Storage&>(storage).set_data_ptr_noswap(std::move(fresh));
    const_cast<c10::Storage&>(storage).set_nbytes(needed);
  }
}

// resize_(Tensor(a!) self, SymInt[] size, *, MemoryFormat? memory_format) -> Tensor(a!)
void k_resize_(const c10::OperatorHandle&, Stack* s) {
  auto args = torch::jit::pop(*s, 3);
  auto self = args[0].toTensor();
  std::optional<c10::MemoryFormat> format;
  if (!args[2].isNone()) format = args[2].toMemoryFormat();
  resize_device(self, int_list(args[1]), format);
  torch::jit::push(*s, self);
}

void copy_between(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.numel() == 0) return;
  cpu_alias(dst).copy_(cpu_alias(src));
}

// copy_(Tensor(a!) self, Tensor src, bool non_blocking) -> Tensor(a!)
void k_copy_(const c10::OperatorHandle&, Stack* s) {
  auto args = torch::jit::pop(*s, 3);
  auto self = args[0].toTensor();
  copy_between(self, args[1].toTensor());
  torch::jit::push(*s, self);
}

// _copy_from(Tensor self, Tensor dst, bool non_blocking) -> Tensor
void k_copy_from(const c10::OperatorHandle&, Stack* s) {
  auto args = torch::jit::pop(*s, 3);
  auto dst = args[1].toTensor();
  copy_between(dst, args[0].toTensor());
  torch::jit::push(*s, dst);
}

// _copy_from_and_resize(Tensor self, Tensor dst) -> Tensor
void k_copy_from_and_resize(const c10::OperatorHandle&, Stack* s) {
  auto args = torch::jit::pop(*s, 2);
  auto self = args[0].toTensor();
  auto dst = args[1].toTensor();
  if (on_device(dst)) {
    resize_device(dst, self.sizes(), std::nullopt);
  } else {
    dst.resize_(self.sizes());
  }
  copy_between(dst, self);
  torch::jit::push(*s, dst);
}

// Views: run the CPU view kernel on an alias, then view the device storage
// with the geometry it computed. The first argument is the base tensor.
void k_view(const c10::OperatorHandle& op, Stack* s) {
  const auto n = op.schema().arguments().size();
  auto& base_slot = (*s)[s->size() - n];
  at::Tensor base = base_slot.toTensor();
  base_slot = cpu_alias(base);
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), s);
  auto result = torch::jit::pop(*s);
  if (result.isTensor()) {
    torch::jit::push(*s, device_view_like(base, result.toTensor()));
  } else {
    std::vector<at::Tensor> views;
    for (const auto& t : result.toTensorVector()) views.push_back(device_view_like(base, t));
    torch::jit::push(*s, views);
  }
}

// as_strided_(Tensor(a!) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset) -> Tensor(a!)
void k_as_strided_(const c10::OperatorHandle&, Stack* s) {
  auto args = torch::jit::pop(*s, 4);
  auto self = args[0].toTensor();
  auto offset = args[3].isNone() ? self.storage_offset() : as_int(args[3]);
  self.unsafeGetTensorImpl()->set_sizes_and_strides(int_list(args[1]), int_list(args[2]), offset);
  torch::jit::push(*s, self);
}

// reshape(Tensor(a) self, SymInt[] shape): torch's composite reshape, which
// views where it can and copies where it must, through the dispatcher.
// torch-directml's own reshape (on AutogradPrivateUse1), as measured on the real one: a shape the
// strides allow is an _reshape_alias (torch's composite makes a view), any other a contiguous clone
// viewed with _unsafe_view. Both reach the dispatcher from above autograd, so autograd records them.
void k_reshape(const c10::OperatorHandle&, Stack* s) {
  auto args = torch::jit::pop(*s, 2);
  const at::Tensor self = args[0].toTensor();
  auto shape = at::infer_size_dv(int_list(args[1]), self.numel());
  auto stride = at::detail::computeStride(self.sizes(), self.strides(), shape);
  if (stride.has_value()) {
    torch::jit::push(*s, at::_reshape_alias(self, shape, *stride));
  } else {
    torch::jit::push(*s, at::_unsafe_view(self.clone(at::MemoryFormat::Contiguous), shape));
  }
}

int64_t conv_out_channels(const at::Tensor& weight, bool transposed, int64_t groups) {
  return transposed ? weight.size(1) * groups : weight.size(0);
}

// convolution_overrideable(input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups)
void k_convolution(const c10::OperatorHandle&, Stack* s) {
  auto a = torch::jit::pop(*s, 9);
  std::optional<at::Tensor> bias;
  if (!a[2].isNone()) bias = cpu_alias(a[2].toTensor());
  auto out = at::convolution(cpu_alias(a[0].toTensor()), cpu_alias(a[1].toTensor()), bias, int_list(a[3]),
                             int_list(a[4]), int_list(a[5]), a[6].toBool(), int_list(a[7]), as_int(a[8]));
  torch::jit::push(*s, to_device(out));
}

// convolution_backward_overrideable(grad_output, input, weight, stride, padding, dilation, transposed,
//                                   output_padding, groups, bool[3] output_mask)
void k_convolution_backward(const c10::OperatorHandle&, Stack* s) {
  auto a = torch::jit::pop(*s, 10);
  auto weight = a[2].toTensor();
  bool transposed = a[6].toBool();
  int64_t groups = as_int(a[8]);
  auto mask_list = a[9].toBoolList();
  std::array<bool, 3> mask{mask_list.get(0), mask_list.get(1), mask_list.get(2)};
  std::vector<int64_t> bias_sizes{conv_out_channels(weight, transposed, groups)};
  auto grads = at::convolution_backward(cpu_alias(a[0].toTensor()), cpu_alias(a[1].toTensor()), cpu_alias(weight),
                                        bias_sizes, int_list(a[3]), int_list(a[4]), int_list(a[5]), transposed,
                                        int_list(a[7]), groups, mask);
  torch::jit::push(*s, to_device(std::get<0>(grads)), to_device(std::get<1>(grads)), to_device(std::get<2>(grads)));
}

using BoxedFn = void (*)(const c10::OperatorHandle&, Stack*);

const std::map<std::string, BoxedFn>& real_kernels() {
  static const std::map<std::string, BoxedFn> table = {
      {"aten::empty.memory_format", &k_empty},
      {"aten::empty_strided", &k_empty_strided},
      {"aten::resize_", &k_resize_},
      {"aten::copy_", &k_copy_},
      {"aten::_copy_from", &k_copy_from},
      {"aten::_copy_from_and_resize", &k_copy_from_and_resize},
      {"aten::view", &k_view},
      {"aten::_reshape_alias", &k_view},
      {"aten::_unsafe_view", &k_view},
      {"aten::alias", &k_view},
      {"aten::as_strided", &k_view},
      {"aten::unfold", &k_view},
      {"aten::split.Tensor", &k_view},
      {"aten::split_with_sizes", &k_view},
      {"aten::as_strided_", &k_as_strided_},
      {"aten::reshape", &k_reshape},
      {"aten::convolution_overrideable", &k_convolution},
      {"aten::convolution_backward_overrideable", &k_convolution_backward},
  };
  return table;
}

// ---------------------------------------------------------------- fault injection
// A test can make the device misbehave on purpose, so that `scan --verify` is
// checked against a known fault: "corrupt" adds an error to one op's outputs,
// "drop_write" leaves the tensors one op writes in place (self, out=) unchanged.
//
// The fault names the op as its caller sees it, which is what dmlprof records
// ("aten::addmm", "aten::add_.Tensor"); the kernel that does the work is often
// another overload behind a composite kernel (addmm -> addmm.out), or one of
// this file's real kernels. So the fault acts at the op's boundary, not in a
// kernel: a RecordFunction callback, installed only while a fault is set, sees
// each call of the op with its inputs and outputs. On entry it saves what the
// call will write; on exit it puts that back (drop_write) or corrupts the
// outputs (corrupt). When calls of the op nest (a dispatch mode such as
// dmlprof's recorder calls the op again inside its own call), only the
// innermost one takes the fault, so the mode sees the faulty result.
enum FaultKind { kNoFault = 0, kCorrupt = 1, kDropWrite = 2 };

std::atomic<int> g_fault_kind{kNoFault};
std::mutex g_fault_mutex;
std::string g_fault_name;      // "aten::add_"
std::string g_fault_overload;  // "Tensor" ("" for the default overload)
std::vector<size_t> g_fault_written;  // argument positions the op writes
std::atomic<int64_t> g_fault_hits{0};
bool g_fault_callback_installed = false;
at::CallbackHandle g_fault_callback = 0;

struct FaultMark : at::ObserverContext {
  bool inner = false;  // a nested call of the same op took the fault instead
  std::vector<at::Tensor> written;  // device tensors the call writes (inputs are readable only on entry)
  std::vector<at::Tensor> saved;    // drop_write: their old contents
};

thread_local std::vector<FaultMark*> tl_fault_stack;

template <typename Fn>
void for_each_device_tensor(const c10::IValue& v, Fn&& fn) {
  if (v.isTensor()) {
    if (on_device(v.toTensor())) fn(v.toTensor());
  } else if (v.isList()) {
    for (const auto& item : v.toListRef()) {
      if (item.isTensor() && on_device(item.toTensor())) fn(item.toTensor());
    }
  }
}

// A clearly wrong value: at least 1 and at least the output's own magnitude off.
void corrupt(const at::Tensor& t) {
  if (t.numel() == 0) return;
  at::Tensor host = cpu_alias(t);
  try {
    if (host.scalar_type() == at::kBool) {
      host.logical_not_();
    } else if (at::isFloatingType(host.scalar_type()) || at::isComplexType(host.scalar_type())) {
      double magnitude = host.abs().max().to(at::kDouble).item<double>();
      host.add_(std::isfinite(magnitude) ? 1.0 + magnitude : 1.0);
    } else {
      host.add_(1);
    }
  } catch (const std::exception&) {
    // Overlapping memory (an expanded output) cannot be written element-wise: leave it.
  }
}

std::unique_ptr<at::ObserverContext> fault_enter(const at::RecordFunction& fn) {
  int kind = g_fault_kind.load(std::memory_order_relaxed);
  if (kind == kNoFault) return nullptr;
  auto name = fn.operator_name();
  if (!name.has_value()) return nullptr;
  std::vector<size_t> written;
  {
    std::lock_guard<std::mutex> lock(g_fault_mutex);
    if (name->name != g_fault_name || name->overload_name != g_fault_overload) return nullptr;
    written = g_fault_written;
  }
  // Only calls on the device's tensors: this file's real kernels call the same
  // op again on CPU aliases (convolution_backward), and those are not the device's.
  auto inputs = fn.inputs();
  bool touches_device = false;
  for (const auto& input : inputs) for_each_device_tensor(input, [&](const at::Tensor&) { touches_device = true; });
  if (!touches_device) return nullptr;
  auto mark = std::make_unique<FaultMark>();
  for (size_t index : written) {
    if (index >= inputs.size()) continue;
    for_each_device_tensor(inputs[index], [&](const at::Tensor& t) {
      mark->written.push_back(t);
      if (kind == kDropWrite) mark->saved.push_back(cpu_alias(t).clone());
    });
  }
  if (!tl_fault_stack.empty()) tl_fault_stack.back()->inner = true;
  tl_fault_stack.push_back(mark.get());
  return mark;
}

void fault_exit(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  if (ctx == nullptr) return;
  auto* mark = static_cast<FaultMark*>(ctx);
  if (!tl_fault_stack.empty() && tl_fault_stack.back() == mark) tl_fault_stack.pop_back();
  if (mark->inner) return;
  int kind = g_fault_kind.load(std::memory_order_relaxed);
  if (kind == kDropWrite) {
    for (size_t i = 0; i < mark->written.size() && i < mark->saved.size(); ++i) {
      cpu_alias(mark->written[i]).copy_(mark->saved[i]);
    }
    if (!mark->saved.empty()) ++g_fault_hits;
  } else if (kind == kCorrupt) {
    bool any = false;
    for (const auto& out : fn.outputs()) for_each_device_tensor(out, [&](const at::Tensor& t) { corrupt(t); any = true; });
    if (!any) {  // an in-place op that returns nothing (_foreach_add_): corrupt what it wrote
      for (const auto& t : mark->written) { corrupt(t); any = true; }
    }
    if (any) ++g_fault_hits;
  }
}

// Set ("corrupt" | "drop_write", "aten::name[.overload]") or clear (kind "") the fault.
void set_fault(const std::string& kind, const std::string& op) {
  int code = kind.empty() ? kNoFault : kind == "corrupt" ? kCorrupt : kind == "drop_write" ? kDropWrite : -1;
  TORCH_CHECK(code >= 0, "unknown fault kind '", kind, "' (corrupt, drop_write)");
  std::string name = op, overload;
  std::vector<size_t> written;
  if (code != kNoFault) {
    auto sep = op.find("::");
    TORCH_CHECK(sep != std::string::npos, "fault op needs a namespace: '", op, "' (e.g. aten::addmm)");
    auto dot = op.find('.', sep + 2);
    if (dot != std::string::npos) {
      name = op.substr(0, dot);
      overload = op.substr(dot + 1);
    }
    auto handle = c10::Dispatcher::singleton().findSchema({name, overload});
    TORCH_CHECK(handle.has_value(), "fault op '", op, "' is not an operator this torch defines");
    const auto& arguments = handle->schema().arguments();
    for (size_t i = 0; i < arguments.size(); ++i) {
      const auto* alias = arguments[i].alias_info();
      if (alias != nullptr && alias->isWrite()) written.push_back(i);
    }
    TORCH_CHECK(code != kDropWrite || !written.empty(), "fault op '", op,
                "' writes no argument in place: drop_write needs an in-place or out= op");
  }
  g_fault_kind = kNoFault;
  {
    std::lock_guard<std::mutex> lock(g_fault_mutex);
    g_fault_name = name;
    g_fault_overload = overload;
    g_fault_written = written;
    g_fault_hits = 0;
    if (code != kNoFault && !g_fault_callback_installed) {
      g_fault_callback = at::addGlobalCallback(at::RecordFunctionCallback(&fault_enter, &fault_exit)
                                                   .needsInputs(true)
                                                   .needsOutputs(true)
                                                   .scopes({at::RecordScope::FUNCTION}));
      g_fault_callback_installed = true;
    } else if (code == kNoFault && g_fault_callback_installed) {
      at::removeCallback(g_fault_callback);
      g_fault_callback_installed = false;
    }
  }
  g_fault_kind = code;
}

int64_t fault_hits() { return g_fault_hits.load(); }

// A DirectML kernel: the work runs on the CPU, silently (the device is host memory).
//
// An out= kernel computes its result and then sizes the caller's out tensor to it, as a backend's own
// kernel does (resize_output: torch's "was resized" warning where the caller's out had another shape).
// The CPU kernel handed the caller's out may resize it on its way instead: mse_loss.out's shares its
// meta with the unreduced loss, so the 0-d out torch's own functional mse_loss allocates is first
// "resized" to the input's shape, and the user saw a warning real torch-directml never prints. So the
// CPU kernel writes into a fresh out of no elements (resized silently) and the result is copied over.
// torch 2.4's CPU mean.out for Half and BFloat16 sums into a float copy and re-seats its out on it
// (ReduceOps.cpp: `result_mut = result_mut.to(float)`): the out it was handed, which cpu_fallback keeps and
// copies back, is never written, and a float16 mean on this device read whatever that memory held (the
// transparency check's rms_norm sample: a different "mean" each run). The functional CPU kernel returns the
// re-seated tensor, so the mean is taken by it and copied into the caller's out.
bool mean_out_taken_functionally(const c10::OperatorHandle& op, Stack* s) {
  if (op.schema().name() != "aten::mean" || op.schema().overload_name() != "out") return false;
  auto args = torch::jit::pop(*s, 5);  // self, dim, keepdim, *, dtype, out
  const std::vector<int64_t> dims = args[1].isNone() ? std::vector<int64_t>() : args[1].toIntList().vec();
  const c10::OptionalIntArrayRef dim = args[1].isNone() ? c10::OptionalIntArrayRef() : c10::OptionalIntArrayRef(dims);
  std::optional<at::ScalarType> dtype;
  if (!args[3].isNone()) dtype = args[3].toScalarType();
  const at::Tensor result = at::mean(cpu_alias(args[0].toTensor()), dim, args[2].toBool(), dtype);
  const at::Tensor out = args[4].toTensor();
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  torch::jit::push(*s, out);
  return true;
}

void native_kernel(const c10::OperatorHandle& op, Stack* s) {
  if (mean_out_taken_functionally(op, s)) return;
  const auto& arguments = op.schema().arguments();
  const size_t first = s->size() - arguments.size();
  std::vector<std::pair<at::Tensor, at::Tensor>> outs;  // (the caller's, the fresh one the CPU kernel wrote)
  for (size_t i = 0; i < arguments.size(); ++i) {
    const auto* alias = arguments[i].alias_info();
    auto& value = (*s)[first + i];
    if (!arguments[i].kwarg_only() || alias == nullptr || !alias->isWrite() || !value.isTensor()) continue;
    const at::Tensor given = value.toTensor();
    if (!given.defined() || given.numel() == 0) continue;  // already resized silently
    at::Tensor fresh = at::empty({0}, given.options());
    outs.emplace_back(given, fresh);
    value = fresh;
  }
  at::native::cpu_fallback(op, s);
  for (const auto& [given, fresh] : outs) {
    at::native::resize_output(given, fresh.sizes());
    given.copy_(fresh);
    for (auto& returned : *s) {  // an out= op returns its outs: the caller's ones
      if (returned.isTensor() && returned.toTensor().is_same(fresh)) returned = given;
    }
  }
}

// ---------------------------------------------------------------- outputs in torch-directml's dtypes
// Outputs torch-directml returns in its first argument's dtype where the CPU kernel returns another: native_dropout's
// mask is float (0 and 1), not bool. Set by the loader from dmlprof.directml.output_dtypes, the one definition the
// prediction's stand-in reads too, before the kernels are registered.
auto& g_in_input_dtype = *new std::map<std::string, int64_t>();  // "aten::native_dropout" -> 1 (never destroyed)

void set_outputs_in_input_dtype(const std::map<std::string, int64_t>& outputs) { g_in_input_dtype = outputs; }

std::string op_name(const c10::OperatorHandle& op);

// The CPU kernel's work, then the output recast on the host aliases (no device call a recorder would see).
void k_output_in_input_dtype(const c10::OperatorHandle& op, Stack* s) {
  const size_t first = s->size() - op.schema().arguments().size();
  const c10::IValue& input = (*s)[first];
  const bool known = input.isTensor() && input.toTensor().defined();
  const c10::ScalarType dtype = known ? input.toTensor().scalar_type() : c10::ScalarType::Undefined;
  native_kernel(op, s);
  const auto found = g_in_input_dtype.find(op_name(op));
  const size_t returns = op.schema().returns().size();
  if (!known || found == g_in_input_dtype.end() || found->second >= static_cast<int64_t>(returns)) return;
  c10::IValue& output = (*s)[s->size() - returns + static_cast<size_t>(found->second)];
  if (!output.isTensor() || output.toTensor().scalar_type() == dtype || !on_device(output.toTensor())) return;
  const at::Tensor made = output.toTensor();
  at::Tensor cast = empty_device(made.sizes(), made.strides(), dtype);
  cpu_alias(cast).copy_(cpu_alias(made));
  output = cast;
}

// ---------------------------------------------------------------- writes the schema does not mark
// A few CPU kernels write arguments their schema does not mark as written: native_batch_norm's running_mean and
// running_var in training (`Tensor?`, not `Tensor(a!)?`). cpu_fallback hands the CPU kernel copies and copies back only
// the marked ones, so BatchNorm's running statistics never moved on this device (re-probe 20, 4), where
// torch-directml's own kernel updates them (measured on realdml). A kernel of the device's hands the CPU kernel host
// aliases of these arguments instead, so what it writes lands in the device's memory. torch-directml's fallback is
// torch's cpu_fallback, as this device's is: there such writes are lost on both (batch_norm_update_stats, measured).
// Set by the loader from dmlprof.directml.unmarked_writes, the one definition the prediction's stand-in reads too.
auto& g_unmarked_writes = *new std::map<std::string, std::vector<std::string>>();  // op -> argument names

void set_unmarked_writes(const std::map<std::string, std::vector<std::string>>& ops) { g_unmarked_writes = ops; }

void k_unmarked_writes_kept(const c10::OperatorHandle& op, Stack* s) {
  const auto found = g_unmarked_writes.find(op_name(op));
  if (found != g_unmarked_writes.end()) {
    const auto& arguments = op.schema().arguments();
    const size_t first = s->size() - arguments.size();
    for (size_t i = 0; i < arguments.size(); ++i) {
      const auto* alias = arguments[i].alias_info();
      const auto& names = found->second;
      if ((alias != nullptr && alias->isWrite()) ||  // marked: cpu_fallback copies it back
          std::find(names.begin(), names.end(), arguments[i].name()) == names.end()) {
        continue;
      }
      auto& value = (*s)[first + i];
      if (value.isTensor() && on_device(value.toTensor())) value = cpu_alias(value.toTensor());
    }
  }
  native_kernel(op, s);
}

// torch-directml runs on torch 2.4.1, whose schemas leave every listed argument unmarked, so its fallback loses what
// the CPU kernel writes there. A later torch marks some (rrelu_with_noise's `noise`, 2.6 on: cpu_fallback would copy
// the slopes back, and RReLU's gradient would be the CPU's where realdml's is not; re-probe 21, 27): the fallback
// hands the CPU kernel a throwaway device copy of a marked one instead, as on torch-directml.
void unmarked_writes_lost(const c10::OperatorHandle& op, Stack* s) {
  const auto found = g_unmarked_writes.find(op_name(op));
  if (found == g_unmarked_writes.end()) return;
  const auto& arguments = op.schema().arguments();
  const size_t first = s->size() - arguments.size();
  for (size_t i = 0; i < arguments.size(); ++i) {
    const auto* alias = arguments[i].alias_info();
    const auto& names = found->second;
    if (alias == nullptr || !alias->isWrite() ||  // unmarked: cpu_fallback loses it already
        std::find(names.begin(), names.end(), arguments[i].name()) == names.end()) {
      continue;
    }
    auto& value = (*s)[first + i];
    if (!value.isTensor() || !on_device(value.toTensor())) continue;
    const at::Tensor given = value.toTensor();
    at::Tensor spare = empty_device(given.sizes(), given.strides(), given.scalar_type());
    cpu_alias(spare).copy_(cpu_alias(given));
    value = spare;
  }
}

// ---------------------------------------------------------------- data types DirectML refuses
// Most DirectML adapters have no float64; none takes bfloat16. Every kernel of the
// device, the fallback's copies back included, refuses a device tensor of either,
// with torch-directml's words. Float64 support is a setting (off, as on most adapters).
std::atomic<bool> g_float64_support{false};

// A complex, bfloat16, unsigned 16/32/64-bit, float8 or bits tensor on the device ends torch-directml's process
// (a fatal check, SIGABRT, measured: the crash probe, R26): this device raises instead, in the words dmlprof says
// every abort with (dmlprof/directml/failures.py: UNHELD_DTYPES, the same list).
const char* unheld_name(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::ComplexFloat: return "ComplexFloat";
    case c10::ScalarType::ComplexDouble: return "ComplexDouble";
    case c10::ScalarType::ComplexHalf: return "ComplexHalf";
    case c10::ScalarType::BFloat16: return "BFloat16";
    case c10::ScalarType::UInt16: return "UInt16";
    case c10::ScalarType::UInt32: return "UInt32";
    case c10::ScalarType::UInt64: return "UInt64";
    case c10::ScalarType::Float8_e4m3fn: return "Float8_e4m3fn";
    case c10::ScalarType::Float8_e5m2: return "Float8_e5m2";
    case c10::ScalarType::Float8_e4m3fnuz: return "Float8_e4m3fnuz";
    case c10::ScalarType::Float8_e5m2fnuz: return "Float8_e5m2fnuz";
    case c10::ScalarType::Bits8: return "Bits8";
    case c10::ScalarType::Bits16: return "Bits16";
    case c10::ScalarType::Bits1x8: return "Bits1x8";
    case c10::ScalarType::Bits2x4: return "Bits2x4";
    case c10::ScalarType::Bits4x2: return "Bits4x2";
    default: return nullptr;
  }
}

// Float64 is refused where DirectML computes on it, not where it is made (moves, views and allocation run):
// the rule lives once, in Python (dmlprof/directml/float64.py), asked only of a call with a float64 device tensor.
std::string op_name(const c10::OperatorHandle& op);
PyObject* g_float64_rule = nullptr;  // callable(op name, [values], outputs: bool) -> bool refused; a reference kept

void set_float64_rule(py::object rule) {
  Py_XDECREF(g_float64_rule);
  g_float64_rule = rule.is_none() ? nullptr : rule.inc_ref().ptr();
}

bool float64_on_device(const Stack* s, size_t first) {
  for (size_t i = first; i < s->size(); ++i) {
    const auto& v = (*s)[i];
    if (v.isTensor()) {
      if (on_device(v.toTensor()) && v.toTensor().scalar_type() == at::kDouble) return true;
    } else if (v.isTensorList()) {
      for (const auto& t : v.toTensorVector()) {
        if (on_device(t) && t.scalar_type() == at::kDouble) return true;
      }
    }
  }
  return false;
}

void check_float64(const c10::OperatorHandle& op, const Stack* s, size_t first, bool outputs) {
  if (g_float64_support.load() || !float64_on_device(s, first)) return;
  bool refused = true;  // no rule installed: every call on a float64 device tensor
  if (g_float64_rule != nullptr) {
    py::gil_scoped_acquire gil;
    py::list values;
    for (size_t i = first; i < s->size(); ++i) values.append(torch::jit::toPyObject((*s)[i]));
    refused = py::reinterpret_borrow<py::object>(g_float64_rule)(op_name(op), values, outputs).cast<bool>();
  }
  TORCH_CHECK(!refused, "The GPU device does not support Double (Float64) operations!");
}

// ---------------------------------------------------------------- the abort note
// Every abort this device raises in a call's place is noted here, whoever made the call and whether or not anything
// recorded it: a warm-up step's, one past the recorded steps, another thread's, a forked DataLoader worker's. Its
// error is a C++ exception that calls nothing of Python's, so a script's `except RuntimeError` (or a thread that
// dies of it) hid it from dmlprof wherever the recorder did not see the call; the run reads this note after each
// step and at its end (dmlprof.testing.take_abort_note), so every abort counts as a recorded one does (R29).
// The note lives in memory shared with the processes this one forks (an anonymous MAP_SHARED mapping, made at
// load): a forked worker's abort reaches the parent with no message to pass, whether the worker exits, dies or is
// killed. Only lock-free atomics cross the processes; takers (one process) also hold a mutex of their own.
constexpr const char* kAbortPrefix = "torch-directml ends the process here";  // failures.py ABORT_PREFIX

struct AbortNote {
  std::atomic<int64_t> total;  // every abort noted, by this process and those it forked
  std::atomic<int64_t> taken;  // `total` at the last take
  std::atomic<int32_t> slot;   // 0: empty, 1: being written, 2: holds the first abort since the last take
  int64_t pid;                 // the process that raised it
  int64_t thread;              // its OS thread (threading.get_native_id())
  char op[192];
  char message[1024];
};
static_assert(std::atomic<int64_t>::is_always_lock_free && std::atomic<int32_t>::is_always_lock_free,
              "the abort note is shared with forked processes: its atomics must be lock-free");

AbortNote& abort_note() {
  static AbortNote* note = [] {
    void* place = nullptr;
#ifndef _WIN32  // no fork on Windows: the process's own memory will do
    place = mmap(nullptr, sizeof(AbortNote), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (place == MAP_FAILED) place = nullptr;
#endif
    if (place == nullptr) place = std::calloc(1, sizeof(AbortNote));  // never freed: kernels may run during exit
    return new (place) AbortNote();
  }();
  return *note;
}

int64_t current_pid() {
#ifdef _WIN32
  return _getpid();
#else
  return getpid();
#endif
}

int64_t current_thread() {
#if defined(_WIN32)
  return GetCurrentThreadId();
#elif defined(__linux__)
  return syscall(SYS_gettid);
#elif defined(__APPLE__)
  uint64_t id = 0;
  pthread_threadid_np(nullptr, &id);
  return static_cast<int64_t>(id);
#else
  return 0;  // unknown: the run then names no thread
#endif
}

void copy_text(char* into, size_t size, const std::string& text) {
  size_t n = std::min(size - 1, text.size());
  std::memcpy(into, text.data(), n);
  into[n] = '\0';
}

void note_abort(const std::string& op, const std::string& message) {
  AbortNote& note = abort_note();
  note.total.fetch_add(1);
  int32_t empty = 0;
  if (note.slot.compare_exchange_strong(empty, 1)) {  // the first since the last take keeps its words
    note.pid = current_pid();
    note.thread = current_thread();
    copy_text(note.op, sizeof(note.op), op);
    copy_text(note.message, sizeof(note.message), message);
    note.slot.store(2);
  }
}

std::mutex g_take_mutex;

// (aborts since the last take, the first one's op, message, process and thread); the first's words are cleared
std::tuple<int64_t, std::string, std::string, int64_t, int64_t> take_abort_note() {
  std::lock_guard<std::mutex> lock(g_take_mutex);
  AbortNote& note = abort_note();
  std::string op, message;
  int64_t pid = 0, thread = 0;
  if (note.slot.load() == 2) {
    op = note.op;
    message = note.message;
    pid = note.pid;
    thread = note.thread;
    note.slot.store(0);
  }
  // an abort noted between the two reads is counted now and its words kept for the next take: none is lost
  int64_t total = note.total.load();
  int64_t since = total - note.taken.exchange(total);
  return std::make_tuple(since, op, message, pid, thread);
}

int64_t abort_count() { return abort_note().total.load(); }

void check_dtype(const c10::OperatorHandle& op, const at::Tensor& t) {
  if (!on_device(t)) return;
  const char* unheld = unheld_name(t.scalar_type());
  if (unheld == nullptr) return;
  std::string message = std::string(kAbortPrefix) + " (SIGABRT): Invalid or unsupported data type " + unheld + ".";
  note_abort(op_name(op), message);
  TORCH_CHECK(false, message);
}

// ---------------------------------------------------------------- calls DirectML refuses
// Rules over a call's arguments (scatter's dimensions, eye, ...) live once, in Python
// (dmlprof/directml/failures.py); for the ops they cover, each call asks them first and
// raises their words instead of running.
std::mutex g_rules_mutex;
auto& g_rule_ops = *new std::set<std::string>();
PyObject* g_rule = nullptr;  // callable(op name, [arguments]) -> None | error text; a new reference kept

void set_failure_rules(py::object rule, const std::vector<std::string>& names) {
  std::lock_guard<std::mutex> lock(g_rules_mutex);
  g_rule_ops.clear();
  g_rule_ops.insert(names.begin(), names.end());
  Py_XDECREF(g_rule);
  g_rule = rule.is_none() ? nullptr : rule.inc_ref().ptr();
}

void check_rules(const c10::OperatorHandle& op, const Stack* s, size_t first) {
  if (g_rule == nullptr) return;
  std::string name = op_name(op);
  {
    std::lock_guard<std::mutex> lock(g_rules_mutex);
    if (!g_rule_ops.count(name)) return;
  }
  std::string refused;
  {
    py::gil_scoped_acquire gil;
    py::list arguments;
    for (size_t i = first; i < s->size(); ++i) arguments.append(torch::jit::toPyObject((*s)[i]));
    py::object said = py::reinterpret_borrow<py::object>(g_rule)(name, arguments);
    if (!said.is_none()) refused = said.cast<std::string>();
  }
  if (refused.rfind(kAbortPrefix, 0) == 0) note_abort(name, refused);
  TORCH_CHECK(refused.empty(), refused);
}

// ---------------------------------------------------------------- CPU tensors beside the device's
// torch-directml's kernels refuse a CPU tensor argument beside device tensors where the CPU kernel this device runs
// takes it (a 0-d one as a scalar): the rule, measured, lives once in Python (dmlprof/directml/mixed_devices.py); a
// call with a CPU tensor and a device tensor among its arguments asks it first (the others, most, never do).
PyObject* g_mixed_rule = nullptr;  // callable(op name, [arguments]) -> None | error text; a new reference kept

void set_mixed_device_rule(py::object rule) {
  std::lock_guard<std::mutex> lock(g_rules_mutex);
  Py_XDECREF(g_mixed_rule);
  g_mixed_rule = rule.is_none() ? nullptr : rule.inc_ref().ptr();
}

bool has_cpu_tensor(const c10::IValue& v) {
  auto is_cpu = [](const at::Tensor& t) { return t.defined() && t.device().is_cpu(); };
  if (v.isTensor()) return is_cpu(v.toTensor());
  if (v.isList()) {
    for (const auto& item : v.toListRef()) {
      if (item.isTensor() && is_cpu(item.toTensor())) return true;
    }
  }
  return false;
}

void check_mixed_devices(const c10::OperatorHandle& op, const Stack* s, size_t first) {
  if (g_mixed_rule == nullptr) return;
  bool cpu = false, device = false;
  for (size_t i = first; i < s->size(); ++i) {
    cpu = cpu || has_cpu_tensor((*s)[i]);
    for_each_device_tensor((*s)[i], [&](const at::Tensor&) { device = true; });
  }
  if (!cpu || !device) return;
  std::string refused;
  {
    py::gil_scoped_acquire gil;
    py::list arguments;
    for (size_t i = first; i < s->size(); ++i) arguments.append(torch::jit::toPyObject((*s)[i]));
    py::object said = py::reinterpret_borrow<py::object>(g_mixed_rule)(op_name(op), arguments);
    if (!said.is_none()) refused = said.cast<std::string>();
  }
  if (refused.rfind(kAbortPrefix, 0) == 0) note_abort(op_name(op), refused);
  TORCH_CHECK(refused.empty(), refused);
}

// ---------------------------------------------------------------- tensors of no device index
// torch-directml's factories keep a device argument of no index ("privateuseone", x.device.type), and its kernels
// then keep it on their results (measured on torch-directml 0.2.5, re-probe 19 case 14: arange, zeros, randn,
// empty_like, new_zeros; a + a, relu, sum, softmax, views). Such a tensor beside one on "privateuseone:0" is refused
// where the kernel checks that its tensors share one device, in ATen's words (add, mul, eq, maximum, addcmul,
// lerp, mse_loss: "Expected all tensors to be on the same device, but found at least two devices, privateuseone:0
// and privateuseone!"; where: its own), and taken where it does not (cat, mm, linear, gather, index_select, copy_,
// masked_fill, layer_norm, cross_entropy). This device runs the CPU kernels on host memory, where both are "cpu":
// such a call is first tried on host copies, the index-less tensors on "cpu:0", so that the CPU kernel's own
// same-device check judges it, and what it refuses is refused with the device's names.
struct IndexlessCall {
  bool target = false;                  // the call's first device tensor has no index: so do its new results
  std::vector<at::Tensor> inputs;       // its device tensors (a result that is one of them is left as it is)
};

bool has_no_index(const at::Tensor& t) { return !t.device().has_index(); }

std::string op_name(const c10::OperatorHandle& op);

// torch-directml's own kernels of these take an index-less tensor beside an indexed one where the CPU's refuse the
// pair (measured: tests/realdml/test_indexless_device_on_real_directml.py).
bool takes_two_devices(const c10::OperatorHandle& op) {
  static const std::set<std::string> names = {"aten::masked_fill.Scalar", "aten::masked_fill.Tensor",
                                              "aten::masked_fill_.Scalar", "aten::masked_fill_.Tensor"};
  return names.count(op_name(op)) > 0;
}

// "cpu:0" is an index-less tensor's host copy, "cpu" the others': said as the device's names.
std::string device_words(const std::string& words) {
  std::string out;
  for (size_t i = 0; i < words.size();) {
    const bool word_start = i == 0 || !(std::isalnum(static_cast<unsigned char>(words[i - 1])) || words[i - 1] == '_');
    if (word_start && words.compare(i, 5, "cpu:0") == 0) {
      out += "privateuseone";
      i += 5;
    } else if (word_start && words.compare(i, 3, "cpu") == 0 &&
               (i + 3 == words.size() || !(std::isalnum(static_cast<unsigned char>(words[i + 3])) || words[i + 3] == '_'))) {
      out += "privateuseone:0";
      i += 3;
    } else {
      out += words[i++];
    }
  }
  return out;
}

// A device tensor's values on the host, on "cpu:0" if it has no index, else on "cpu" (`held` keeps the copy alive).
at::Tensor host_copy(const at::Tensor& t, std::vector<at::Tensor>& held) {
  if (!on_device(t)) return t;
  held.push_back(cpu_alias(t).clone());
  return has_no_index(t) ? host_alias(held.back(), c10::Device(c10::kCPU, 0)) : held.back();
}

c10::IValue host_value(const c10::IValue& v, std::vector<at::Tensor>& held) {
  if (v.isTensor()) return host_copy(v.toTensor(), held);
  if (!v.isList()) return v;
  auto list = v.toList().copy();  // of its own element type (Tensor[], Tensor?[])
  for (size_t i = 0; i < list.size(); ++i) {
    const c10::IValue item = list.get(i);
    if (item.isTensor()) list.set(i, host_copy(item.toTensor(), held));
  }
  return list;
}

// The call tried on host copies, its generators' states put back after (a random op draws once, for real).
void try_on_host(const c10::OperatorHandle& op, const Stack* s, size_t first) {
  std::vector<at::Tensor> held;
  Stack trial;
  std::vector<std::pair<at::Generator, at::Tensor>> states;
  auto keep_state = [&](at::Generator gen) {
    std::lock_guard<std::mutex> lock(gen.mutex());
    states.emplace_back(gen, gen.get_state());
  };
  keep_state(at::detail::getDefaultCPUGenerator());
  for (size_t i = first; i < s->size(); ++i) {
    const auto& v = (*s)[i];
    if (v.isGenerator() && v.toGenerator().defined()) keep_state(v.toGenerator());
    trial.push_back(host_value(v, held));
  }
  std::string refused;
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &trial);
  } catch (const c10::Error& error) {
    if (error.msg().find("cpu:0") != std::string::npos) refused = device_words(error.msg());
  } catch (const std::exception&) {
    // another refusal than the devices': the call itself says it, as before
  }
  for (auto& [gen, state] : states) {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state);
  }
  TORCH_CHECK(refused.empty(), refused);
}

IndexlessCall check_one_device(const c10::OperatorHandle& op, const Stack* s, size_t first) {
  IndexlessCall call;
  bool indexed = false, indexless = false, seen = false;
  for (size_t i = first; i < s->size(); ++i) {
    for_each_device_tensor((*s)[i], [&](const at::Tensor& t) {
      (has_no_index(t) ? indexless : indexed) = true;
      if (!seen) call.target = has_no_index(t);
      seen = true;
    });
  }
  if (!indexless) return call;
  for (size_t i = first; i < s->size(); ++i) {
    for_each_device_tensor((*s)[i], [&](const at::Tensor& t) { call.inputs.push_back(t); });
  }
  if (indexed && !takes_two_devices(op)) try_on_host(op, s, first);
  return call;
}

// A new result on "privateuseone:0" (the CPU fallback's copy back asks for the device's index) moved to the
// index-less device of the call's first tensor.
at::Tensor keep_indexless_tensor(const IndexlessCall& call, const at::Tensor& t) {
  if (!on_device(t) || has_no_index(t)) return t;
  for (const auto& input : call.inputs) {
    if (input.is_same(t)) return t;
  }
  auto moved = empty_device(t.sizes(), t.strides(), t.scalar_type(), &g_indexless_allocator);
  if (t.numel() > 0) cpu_alias(moved).copy_(cpu_alias(t));
  return moved;
}

void keep_indexless(const IndexlessCall& call, Stack* s, size_t first) {
  for (size_t i = first; i < s->size(); ++i) {
    auto& v = (*s)[i];
    if (v.isTensor()) {
      v = keep_indexless_tensor(call, v.toTensor());
    } else if (v.isTensorList()) {
      std::vector<at::Tensor> kept;
      for (const auto& t : v.toTensorVector()) kept.push_back(keep_indexless_tensor(call, t));
      v = kept;
    }
  }
}

void check_values(const c10::OperatorHandle& op, const Stack* s, size_t first) {
  for (size_t i = first; i < s->size(); ++i) {
    const auto& v = (*s)[i];
    if (v.isTensor()) {
      check_dtype(op, v.toTensor());
    } else if (v.isTensorList()) {
      for (const auto& t : v.toTensorVector()) check_dtype(op, t);
    }
  }
}

template <BoxedFn Fn>
void dtype_checked(const c10::OperatorHandle& op, Stack* s) {
  const size_t first = s->size() - op.schema().arguments().size();
  check_values(op, s, first);
  check_float64(op, s, first, false);
  check_mixed_devices(op, s, first);  // first: a CPU argument is the cause, not what it meets (LayerNorm's rule)
  check_rules(op, s, first);
  const IndexlessCall indexless = check_one_device(op, s, first);
  Fn(op, s);
  if (indexless.target) keep_indexless(indexless, s, first);
  check_values(op, s, first);  // the outputs now (a factory's dtype argument shows here)
  check_float64(op, s, first, true);
}

void set_float64_support(bool on) { g_float64_support.store(on); }

// ---------------------------------------------------------------- the fallback
std::mutex g_counts_mutex;
auto& g_counts = *new std::map<std::string, int64_t>();  // never destroyed: kernels may run during exit

std::string op_name(const c10::OperatorHandle& op) {
  std::ostringstream name;
  name << op.schema().operator_name();
  return name.str();
}

// set_ with a storage (torch.save's storage copy: at::empty({0}).set_(storage), and torch.load's): the device
// tensor takes the device storage. The CPU kernel cannot (its tensor, the CPU alias, would take a storage of
// another device: "Attempted to set the storage of a tensor on device cpu ..."), so the fallback does it on the
// device tensor itself, as CPU's own set_ does on a CPU one. False where it is not such a call.
bool set_storage_on_device(const c10::OperatorHandle& op, Stack* s) {
  const auto& schema = op.schema();
  if (schema.name() != "aten::set_") return false;
  const bool with_geometry = schema.overload_name() == "source_Storage_storage_offset";
  if (!with_geometry && schema.overload_name() != "source_Storage") return false;
  const size_t count = schema.arguments().size();
  auto self = (*s)[s->size() - count].toTensor();
  if (!on_device(self)) return false;
  auto storage = (*s)[s->size() - count + 1].toStorage();
  if (with_geometry) {
    auto args = torch::jit::pop(*s, count);
    at::native::set_storage_cpu_(self, storage, as_int(args[2]), int_list(args[3]), int_list(args[4]));
  } else {
    torch::jit::drop(*s, count);
    const int64_t elements = static_cast<int64_t>(storage.nbytes()) / static_cast<int64_t>(self.dtype().itemsize());
    at::native::set_storage_cpu_(self, storage, 0, {elements}, {});
  }
  torch::jit::push(*s, self);
  return true;
}

void dml_fallback(const c10::OperatorHandle& op, Stack* s) {
  {
    std::lock_guard<std::mutex> lock(g_counts_mutex);
    ++g_counts[op_name(op)];
  }
  // torch-directml's exact words and once-per-process semantics.
  TORCH_WARN_ONCE("The operator '", op.schema().operator_name(),
                  "' is not currently supported on the DML backend and will fall back to run on the CPU."
                  " This may have performance implications.");
  if (set_storage_on_device(op, s)) return;
  unmarked_writes_lost(op, s);
  at::native::cpu_fallback(op, s);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&dtype_checked<&dml_fallback>>());
}

// ---------------------------------------------------------------- run-time registration
// Never destroyed: they hold the registrations for the life of the process, and destroying them
// at exit would deregister from a dispatcher that static destruction may already have torn down
// (the process then ended with "terminate called without an active exception").
auto& g_libraries = *new std::map<std::string, std::unique_ptr<torch::Library>>();
auto& g_registered = *new std::vector<std::string>();

torch::Library& library_for(const std::string& ns, c10::DispatchKey key) {
  std::string id = ns + "/" + c10::toString(key);
  auto found = g_libraries.find(id);
  if (found == g_libraries.end()) {
    found = g_libraries.emplace(id, std::make_unique<torch::Library>(torch::Library::IMPL, ns, key, __FILE__, __LINE__)).first;
  }
  return *found->second;
}

// torch-directml's autograd-key kernel for an op without a gradient (torchvision::nms): the
// device's kernel, reached below autograd like any device op's. A recorder between autograd and
// the backend then sees the op itself, not the copies its CPU stand-in makes.
void below_autograd(const c10::OperatorHandle& op, c10::DispatchKeySet keys, Stack* s) {
  op.redispatchBoxed(keys & c10::after_autograd_keyset, s);
}

template <BoxedFn Fn>
torch::CppFunction checked_kernel() {
  return torch::CppFunction::makeFromBoxedFunction<&dtype_checked<Fn>>();
}

torch::CppFunction boxed(BoxedFn fn) {
  if (fn == &k_empty) return checked_kernel<&k_empty>();
  if (fn == &k_empty_strided) return checked_kernel<&k_empty_strided>();
  if (fn == &k_resize_) return checked_kernel<&k_resize_>();
  if (fn == &k_copy_) return checked_kernel<&k_copy_>();
  if (fn == &k_copy_from) return checked_kernel<&k_copy_from>();
  if (fn == &k_copy_from_and_resize) return checked_kernel<&k_copy_from_and_resize>();
  if (fn == &k_view) return checked_kernel<&k_view>();
  if (fn == &k_as_strided_) return checked_kernel<&k_as_strided_>();
  if (fn == &k_reshape) return checked_kernel<&k_reshape>();
  if (fn == &k_convolution) return checked_kernel<&k_convolution>();
  if (fn == &k_convolution_backward) return checked_kernel<&k_convolution_backward>();
  if (fn == &k_output_in_input_dtype) return checked_kernel<&k_output_in_input_dtype>();
  if (fn == &k_unmarked_writes_kept) return checked_kernel<&k_unmarked_writes_kept>();
  return checked_kernel<&native_kernel>();
}

// Register kernels for `names` ("ns::name[.overload]") on `key_name`
// ("PrivateUse1" or "AutogradPrivateUse1"); returns the aten names this torch
// does not define (skipped). Ops of other namespaces (torchvision::nms) are
// registered whether or not their library is loaded yet, as torch-directml's
// are: the dispatcher keeps a kernel until the op's schema arrives.
std::vector<std::string> register_kernels(const std::vector<std::string>& names, const std::string& key_name) {
  c10::DispatchKey key = key_name == "AutogradPrivateUse1" ? c10::DispatchKey::AutogradPrivateUse1
                                                           : c10::DispatchKey::PrivateUse1;
  std::vector<std::string> skipped;
  for (const auto& full : names) {
    auto sep = full.find("::");
    TORCH_CHECK(sep != std::string::npos, "op name without namespace: ", full);
    std::string ns = full.substr(0, sep);
    std::string rest = full.substr(sep + 2);
    auto dot = rest.find('.');
    std::string name = rest.substr(0, dot);
    std::string overload = dot == std::string::npos ? "" : rest.substr(dot + 1);
    if (ns == "aten" && !c10::Dispatcher::singleton().findSchema({ns + "::" + name, overload}).has_value()) {
      skipped.push_back(full);
      continue;
    }
    auto real = real_kernels().find(full);
    if (key == c10::DispatchKey::AutogradPrivateUse1 && real == real_kernels().end()) {
      library_for(ns, key).impl(rest.c_str(), torch::CppFunction::makeFromBoxedFunction<&below_autograd>());
    } else {
      BoxedFn fn = real != real_kernels().end() ? real->second
                   : g_in_input_dtype.count(full)  ? &k_output_in_input_dtype
                   : g_unmarked_writes.count(full) ? &k_unmarked_writes_kept
                                                   : &native_kernel;
      library_for(ns, key).impl(rest.c_str(), boxed(fn));
    }
    g_registered.push_back(key_name + ":" + full);
  }
  return skipped;
}

std::vector<std::string> real_kernel_names() {
  std::vector<std::string> out;
  for (const auto& item : real_kernels()) out.push_back(item.first);
  return out;
}

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(g_counts_mutex);
  return g_counts;
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> lock(g_counts_mutex);
  g_counts.clear();
}

#if EMU_TORCH_VERSION >= 206
// torch >= 2.6: the autograd engine asks the accelerator hooks about the
// device; without them backward fails ("Cannot access accelerator device").
struct EmulatedHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override { return 1; }
  void setCurrentDevice(c10::DeviceIndex) const override {}
  c10::DeviceIndex getCurrentDevice() const override { return 0; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex) const override { return 0; }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex) const override { return 0; }
  bool isPinnedPtr(const void*) const override { return false; }
  at::Device getDeviceFromPtr(void*) const override { return c10::Device(kDevice, 0); }
  // Random ops run on the CPU (through the fallback), so the CPU generator is the device's.
  const at::Generator& getDefaultGenerator(c10::DeviceIndex) const override {
    return at::detail::getDefaultCPUGenerator();
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    TORCH_CHECK(storage.resizable(), "emulated DML device: storage is not resizable");
    c10::DataPtr fresh = allocator_of(storage)->allocate(newsize);
    size_t keep = std::min(newsize, storage.nbytes());
    if (keep) std::memcpy(fresh.get(), storage.data(), keep);
    const_cast<c10::Storage&>(storage).set_data_ptr_noswap(std::move(fresh));
    const_cast<c10::Storage&>(storage).set_nbytes(newsize);
  }
};

bool register_hooks() {
  static EmulatedHooks hooks;
  static bool done = false;
  if (!done) {
    at::RegisterPrivateUse1HooksInterface(&hooks);
    done = true;
  }
  return true;
}
#else
bool register_hooks() { return false; }  // not needed before torch 2.6
#endif

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "dmlprof's emulated DirectML device (PrivateUse1, host memory)";
  abort_note();  // mapped now, before any fork: a child that mapped its own would note its aborts where no parent looks
  m.def("register_kernels", &register_kernels, "register kernels by op name; returns the names skipped");
  m.def("real_kernel_names", &real_kernel_names, "ops with real implementations (not cpu_fallback)");
  m.def("fallback_counts", &fallback_counts, "calls per op that reached the fallback");
  m.def("reset_fallback_counts", &reset_fallback_counts);
  m.def("set_fault", &set_fault, "set a fault (corrupt | drop_write, op name) or clear it (kind '')");
  m.def("fault_hits", &fault_hits, "kernel calls that took the fault since it was set");
  m.def("set_float64_rule", &set_float64_rule, "callable(op, [values], outputs) -> whether float64 is refused");
  m.def("set_float64_support", &set_float64_support, "whether the device runs float64 (off: most adapters do not)");
  m.def("set_mixed_device_rule", &set_mixed_device_rule, "rule(op name, arguments) -> None | error, for CPU beside device");
  m.def("set_failure_rules", &set_failure_rules, "rule(op name, arguments) -> None | error, asked for these ops");
  m.def("take_abort_note", &take_abort_note,
        "(aborts raised since the last take, by any thread or forked child; the first one's op, message, pid, thread)");
  m.def("abort_count", &abort_count, "every abort the device raised in a call's place, ever (forked children's too)");
  m.def("register_hooks", &register_hooks, "register PrivateUse1 hooks (torch >= 2.6); false when not needed");
  m.def("memory_allocated", &memory_allocated, "bytes the device's storages hold now");
  m.def("max_memory_allocated", &max_memory_allocated, "the most bytes they held since the last reset");
  m.def("reset_peak_memory", &reset_peak_memory, "the peak becomes what is held now");
  m.def("set_unmarked_writes", &set_unmarked_writes,
        "{op: [argument names]} its CPU kernel writes though the schema does not mark them; before registering");
  m.def("set_outputs_in_input_dtype", &set_outputs_in_input_dtype,
        "{op: output index} returned in the first argument's dtype (torch-directml's dropout mask); before registering");
}
