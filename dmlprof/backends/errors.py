"""Known device errors, recognised from their messages, with a remedy each.

A scan that dies on one of these ends with one line saying what happened and
what to change, instead of a traceback (see ``dmlprof.runner.run.Run._explain``), and
``dmlprof sweep`` asks :func:`is_out_of_memory` to tell "this batch size does
not fit" from any other failure.

Messages are matched on ``"<ExceptionType>: <message>"`` of the exception and
of its chained causes, because frameworks often re-raise device errors wrapped
in their own.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Callable, Optional

from dmlprof.units import fmt_bytes

_SHRINK_BATCH = "lower the batch size; dmlprof sweep finds the largest that fits"


@dataclass(frozen=True)
class KnownError:
    """One recognised error: what it means and what to do.

    ``explanation`` and ``remedy`` may hold ``{name}`` fields filled from the
    pattern's named groups when a message matches (a size, an op name).
    """

    key: str
    pattern: re.Pattern
    explanation: str
    remedy: str
    #: ``when(match) -> bool``: a further test of the matched text, where the words alone say too little
    when: Optional[Callable[[re.Match], bool]] = None

    @property
    def out_of_memory(self) -> bool:
        return self.key.endswith("out_of_memory")

    def one_line(self) -> str:
        return f"{self.explanation} ({self.remedy})"


class _Blank(dict):
    def __missing__(self, key):
        return ""


def _tidy(text: str) -> str:
    return re.sub(r"\s{2,}", " ", text).replace(" )", ")").replace("( ", "(").strip()


KNOWN_ERRORS = (
    # -- a script written for another device ---------------------------------------
    KnownError(
        "script_wants_cuda",
        re.compile(r"Torch not compiled with CUDA enabled|Found no NVIDIA driver on your system"
                   r"|CUDA driver version is insufficient for CUDA runtime version"),
        "the script asks for CUDA, which does not work on this machine",
        "scan it with --from cuda: its CUDA requests then run on the scanned device; or fix the CUDA install",
    ),
    KnownError(
        "script_wants_directml",
        re.compile(r"No module named 'torch_directml'"),
        "the script imports torch_directml, which is not installed here",
        "scan it with --target dml to predict DirectML, or --device emulated-dml to emulate it on the CPU: "
        "dmlprof stands in for torch_directml either way; on Windows or WSL with a DirectML GPU, "
        "pip install torch-directml",
    ),
    KnownError(
        "script_wants_mps",
        re.compile(r"MPS backend is not available|The MPS backend is supported on MacOS"),
        "the script asks for Apple's MPS device, which this machine does not have",
        "scan it with --from mps: its MPS requests then run on the scanned device",
    ),
    # -- DirectML (torch-directml) -------------------------------------------
    KnownError(
        "dml_float64",
        re.compile(r"does not support Double \(Float64\)"),
        "the DirectML device cannot run float64 (double) operations",
        "use float32: model.float(), .float() on inputs, no dtype=torch.float64 or .double(); torch-directml also "
        "makes a double of a Python float in 1.0 - x (write 1 - x, or torch.ones_like(x) - x) and in "
        "torch.full(size, 0.5) without dtype= (pass dtype=torch.float32)",
    ),
    # torch-directml's fatal checks end the process (no Python exception); dmlprof raises in the
    # call's place (dmlprof.directml.failures), so the run stops with a report instead of dying.
    KnownError(
        "dml_complex_abort",
        re.compile(r"Invalid or unsupported data type (?P<dtype>Complex\w+)"),
        "complex tensors abort torch-directml: a {dtype} tensor on the DirectML device ends the process "
        "(a fatal check in its native code, SIGABRT), as torch.fft, view_as_complex and complex dtypes do",
        "keep complex values off the device: dmlprof.replacements.fft computes rfft/irfft/fft/ifft as real "
        "matmuls (complex pairs as a trailing dimension of 2); or run the complex part on x.cpu() and move "
        "the real result back with .to(device)",
    ),
    KnownError(
        "dml_bfloat16_abort",
        re.compile(r"Invalid or unsupported data type BFloat16"),
        "bfloat16 aborts torch-directml: a bfloat16 tensor on the DirectML device ends the process (a fatal check "
        "in its native code, SIGABRT); DirectML has no bfloat16",
        "use float16 (model.half() and half inputs) or float32; torch.autocast(dtype=torch.bfloat16) has no "
        "DirectML kernels either",
    ),
    KnownError(
        "dml_scatter_dims",
        re.compile(r"DirectML scatter doesn't allow partially modified dimensions"),
        "DirectML's scatter refuses this call: it compares every dimension but dim as given, so a negative dim "
        "(F.one_hot, scatter_(-1, ...), the backward of max/topk/sort over dim=-1) or an index narrower than the "
        "input outside dim fails",
        "give scatter a non-negative dim (x.dim() - 1 instead of -1); for F.one_hot on DirectML use "
        "(labels.unsqueeze(-1) == torch.arange(num_classes, device=labels.device)).long()",
    ),
    # before the general abort: its remedy (compute it on the CPU) does not fit set_, measured on realdml (re-probe 22,
    # case 11: set_ of a non-empty device tensor, and p.data = x, run)
    KnownError(
        "dml_set_empty_abort",
        re.compile(r"torch-directml ends the process here \((?P<signal>SIG\w+)\): (?P<what>set_ of an empty device "
                   r"tensor[^\n]*)"),
        "{what}: torch-directml ends the process at this call ({signal}), with no Python error",
        "use the source tensor itself (t = x) or a copy (t = x.clone()); for a Parameter, p.data = x (runs on "
        "DirectML)",
    ),
    KnownError(
        "dml_process_abort",
        re.compile(r"torch-directml ends the process here \((?P<signal>SIG\w+)\): (?P<what>[^\n]+)"),
        "{what}: torch-directml ends the process at this call ({signal}), with no Python error",
        "compute this op on the CPU and move the result to the device (x.cpu(), then .to(device))",
    ),
    KnownError(
        "dml_needs_storage",
        re.compile(r"self\.has_storage\(\) INTERNAL ASSERT FAILED"),
        "this op reads the tensor's storage, and torch-directml's tensors have none (as_strided_scatter, "
        "slice_scatter, select_scatter, diagonal_scatter)",
        "write into a copy instead: y = x.clone(); y[index] = src (or y.narrow(...).copy_(src))",
    ),
    KnownError(
        "dml_torch_compile",
        re.compile(r"(?:Dynamo|dynamo|BackendCompilerFailed|Inductor)\w*[^\n]*Cannot access storage of OpaqueTensorImpl"),
        "torch.compile cannot trace torch-directml's tensors (they have no storage to make Dynamo's fake tensors "
        "of), whatever the backend (inductor, aot_eager, eager): measured on torch-directml 0.2.5 (torch 2.4.1), a "
        "compiled function, or a compiled module of your own classes, fails at its first call with a device "
        "tensor among its arguments, parameters or the tensors its code reads from a closure; only a compiled "
        "module made wholly of torch.nn's own classes (nn.Sequential of torch.nn layers) runs there, eagerly, and "
        "not with fullgraph=True",
        "run it eagerly on DirectML: compile only when the device is CUDA (if device.type == 'cuda': fn = "
        "torch.compile(fn)), or set torch._dynamo.config.suppress_errors = True so the compiled calls run eagerly",
    ),
    # any other read of a device tensor's storage or data pointer: a jagged nested tensor built on the device, a
    # data_ptr() comparison of tied weights (measured on realdml, re-probe 19 cases 13 and 34)
    KnownError(
        "dml_no_storage",
        re.compile(r"Cannot access storage of OpaqueTensorImpl"
                   r"|Cannot access data pointer of Tensor that doesn't have storage"),
        "torch-directml's tensors have no storage: code that reads a device tensor's storage or data pointer "
        "(untyped_storage(), data_ptr(), a jagged nested tensor built on the device) fails there",
        "read it from the CPU tensor before the move (tied weights: compare the parameters themselves, a is b); "
        "for variable-length rows, pad them and pass a mask instead of a nested tensor",
    ),
    # measured on realdml (torch-directml 0.2.5, torch 2.4.1): torch.load of a CPU or CUDA checkpoint with
    # map_location the DirectML device moves each storage by storage.to(device), which hands torch_directml.device()
    # a torch.device where it compares an index; a checkpoint of the device's own tensors (pickled without storage)
    # and map_location="cpu" load
    KnownError(
        "dml_storage_to_device",
        re.compile(r"TypeError: '>=' not supported between instances of 'torch\.device' and 'int'"),
        "torch-directml cannot move a storage onto its device: torch.load(..., map_location=<the DirectML device>) "
        "of a checkpoint saved from the CPU or CUDA (and a storage's .to(device)) fails in torch_directml.device()",
        "load onto the CPU and move after: state = torch.load(path, map_location='cpu'); "
        "model.load_state_dict(state) copies it onto the device (a tensor: .to(device))",
    ),
    # measured on realdml: torch 2.4.1 pickles a storage-less device tensor from a numpy array, whose rebuild its
    # weights-only unpickler refuses, whatever map_location; a checkpoint of CPU tensors loads
    KnownError(
        "dml_weights_only_load",
        re.compile(r"Weights only load failed[\s\S]*?_rebuild_device_tensor_from_numpy"),
        "torch.load(..., weights_only=True) refuses a checkpoint holding torch-directml's tensors: torch 2.4.1 "
        "(torch-directml's) pickles a DirectML tensor from a numpy array, which its weights-only loader does not "
        "rebuild (measured on torch-directml 0.2.5, whatever map_location)",
        "save CPU copies and load them onto the CPU: torch.save(dict((k, v.cpu()) for k, v in "
        "model.state_dict().items()), path), then model.load_state_dict(torch.load(path, map_location='cpu', weights_only=True)) copies them onto "
        "the device (not map_location=<the DirectML device>: a CPU checkpoint fails there); or, for a file you trust "
        "(your own), torch.load(path, map_location=device, weights_only=False)",
    ),
    # measured on realdml (re-probe 22, case 13): safetensors parses load_file's/safe_open's device itself and takes
    # no spelling of torch-directml's (str(device), the torch.device, "privateuseone", "dml"); the fix loads there
    KnownError(
        "dml_safetensors_device",
        re.compile(r"SafetensorError: device (?:privateuseone|device\(type='privateuseone'|dml\b)[^\n]*is invalid"),
        "safetensors does not load onto torch-directml's device: load_file(path, device=...) and safe_open(path, "
        "framework='pt', device=...) take CPU, CUDA, MPS or XPU names only (measured on torch-directml 0.2.5, "
        "safetensors 0.8, every spelling of the DirectML device)",
        "load on the CPU and move: model.load_state_dict(load_file(path, device='cpu')) copies onto the device, or "
        "dict((k, v.to(device)) for k, v in load_file(path).items()); with safe_open(path, framework='pt', device='cpu'), "
        "f.get_tensor(name).to(device)",
    ),
    KnownError(
        "dml_invalid_argument",
        re.compile(r"Unknown error -2147024809"),
        "DirectML refuses this call's inputs as an invalid argument (E_INVALIDARG): measured for empty tensors in "
        "mm/linear/bmm/gather/cat, an empty result of repeat/tile, integer or bool tensors in float math (isnan, "
        "log2, convolution, pooling), a 0-d input to index_select, scatter or gather, a scatter_add index longer "
        "than its target, and a negative dim of scatter/gather that reaches past 4-D (-2 of a 3-D tensor, -1 of a "
        "4-D one; also in the backward of sort/max/topk along it)",
        "skip empty batches before the layer (if x.numel(): ...), cast integer tensors to float first (x.float()), "
        "give 0-d tensors a dimension (x.reshape(1)), count dims from the front (dim=x.dim() - 2, not -2)",
    ),
    KnownError(
        "dml_unique_outputs",
        re.compile(r"Return (?P<what>inverse|counts) not implemented for unique operator for DirectML"),
        "torch-directml's unique returns no {what}: torch.unique(x, return_{what}=True) fails on DirectML",
        "run that unique on the CPU and move its results back: torch.unique(x.cpu(), return_{what}=True), then "
        ".to(device)",
    ),
    # measured on realdml (tools/mixed_device_survey.py, dmlprof/directml/mixed_devices.py): torch-directml's kernels
    # refuse a CPU tensor handed beside device tensors (a 0-d one too, where CUDA takes it as a scalar)
    KnownError(
        "dml_cpu_tensor",
        re.compile(r"unbox expects Dml at::Tensor as inputs|same device, but .*(?:privateuseone:0 and cpu|cpu and "
                   r"privateuseone:0)"),
        "a CPU tensor meets device tensors in one call: torch-directml's kernels refuse it (a tensor made without "
        "device=, such as torch.zeros(n) or torch.arange(n) in forward, a 0-d torch.tensor(v), or a plain attribute "
        "that Module.to does not move)",
        "make it on the device (torch.zeros(n, device=x.device)), pass a Python number instead of a 0-d tensor, or "
        "register the attribute as a buffer (self.register_buffer(name, t)) so that Module.to moves it",
    ),
    KnownError(
        "dml_device_removed",
        re.compile(r"Unknown error -2005270523|DXGI_ERROR_DEVICE_REMOVED|0x887A0005", re.IGNORECASE),
        "DirectML lost the device in this call (DXGI_ERROR_DEVICE_REMOVED): every later call in the process fails, "
        "so the results after it are void; measured for LayerNorm's backward with a frozen weight or bias",
        "a frozen LayerNorm weight or bias: let it require grad, or run that layer on the CPU; then run again in a "
        "new process",
    ),
    KnownError(
        "dml_failed",
        re.compile(r"Unknown error -2147467259"),
        "DirectML failed to run this call (E_FAIL, an unspecified failure of the adapter or its driver); measured "
        "on a software adapter for torchvision's roi_align backward, not yet confirmed on a GPU",
        "update the GPU driver; if it persists, run this op on the CPU (x.cpu(), then .to(device))",
    ),
    KnownError(
        "dml_view_beyond_storage",
        re.compile(r"ensure_in_bounds: sizes \[(?P<sizes>[\d, ]*)\], strides \[(?P<strides>[\d, ]*)\], "
                   r"storage offset (?P<offset>\d+)\b.*out of bounds for storage|ensure_in_bounds: cropping"
                   r"|storage offset past them: cropping"
                   r"|torch-dml currently doesn't support a mix of positive and negative padding"),
        "torch-directml refuses this padding: cropping the start of the second-to-last dimension (the backward of "
        "every F.pad, nn.ZeroPad2d and nn.ConstantPad2d that pads the height, so such a model does not train) takes "
        "a view beyond the tensor's storage, and pads of both signs are refused",
        "dmlprof.patch(model, optimizer) pads by concatenation instead (dmlprof.replacements.ops.pad_constant, whose "
        "backward is slicing); or pad inside the convolution (nn.Conv2d(padding=...))",
        when=lambda match: match.group("sizes") is None or _is_a_crop(match),
    ),
    KnownError(
        "dml_create_operator",
        re.compile(r"m_device->CreateOperator"),
        "DirectML could not build its operator for this call (measured: padding an empty batch)",
        "skip empty inputs before the call (if x.numel(): ...)",
    ),
    KnownError(
        "dml_channels_last",
        re.compile(r"'memory_format' argument is must be Contiguous for DML tensors"),
        "DirectML makes tensors in the contiguous layout only: a tensor made on the device with "
        "memory_format=torch.channels_last is refused (x.to(memory_format=...), x.half(memory_format=...), "
        "model.to(memory_format=...) after the model is on the device, x.to(device, memory_format=...), "
        "x.clone(memory_format=...))",
        "drop memory_format=torch.channels_last on DirectML, or convert on the CPU before moving: "
        "model.to(memory_format=torch.channels_last).to(device) runs and trains there, as does "
        "x.contiguous(memory_format=torch.channels_last) of a contiguous device tensor, which leaves it as it is",
    ),
    KnownError(
        "dml_divisor_override",
        re.compile(r"Divisor override isn't supported for DirectML"),
        "avg_pool with divisor_override does not run on DirectML",
        "leave divisor_override out and rescale the result: avg_pool(x, k) * (k*k / divisor)",
    ),
    KnownError(
        "dml_unsupported_dtype",
        re.compile(r"Invalid or unsupported data type"),
        "the DirectML device does not support this data type, usually bfloat16",
        "use float16 (model.half() and half inputs) or float32 instead of bfloat16 on DirectML",
    ),
    # torch.autocast on a PrivateUse1 device needs autocast kernels of the backend's own; torch-directml
    # registers none (its registrations are PrivateUse1 and AutogradPrivateUse1 only), so the first op
    # under autocast finds no kernel (seen with a CUDA AMP script scanned --from cuda).
    KnownError(
        "privateuse1_autocast",
        re.compile(r"Could not run '[\w:.]+' with arguments from the 'AutocastPrivateUse1' backend"
                   r"|Tried to use AMP with the `privateuseone` backend"
                   r"|autocast device_type must be 'cuda' or 'cpu'"),
        "mixed precision (torch.autocast) does not run on this device: torch-directml registers no autocast "
        "kernels",
        "run the step in float32 on DirectML: leave out torch.autocast and GradScaler (GradScaler also needs "
        "float64, which DirectML lacks), or cast the model and inputs to float16 yourself",
    ),
    # torch-directml registers no sparse kernels: the first sparse tensor on the device (the gradient of
    # nn.Embedding(sparse=True) in backward) finds no kernel for its sparse dispatch key.
    KnownError(
        "privateuse1_sparse",
        re.compile(r"with arguments from the 'Sparse(?:Csr)?PrivateUse1' backend"),
        "DirectML has no sparse tensors: a sparse gradient (nn.Embedding or nn.EmbeddingBag with sparse=True, "
        "F.embedding(..., sparse=True)) or any other sparse tensor cannot live on the device",
        "use sparse=False on DirectML: the dense gradient runs on the device (and Adam or AdamW replaces "
        "SparseAdam); keep other sparse tensors on the CPU, or .to_dense() them",
    ),
    # nor any for nested tensors: nn.TransformerEncoder's fast path (eval or no_grad, a src_key_padding_mask,
    # enable_nested_tensor=True, the default) packs its input into one (measured on realdml, re-probe 18 case 36)
    KnownError(
        "privateuse1_nested",
        re.compile(r"with arguments from the 'NestedTensorPrivateUse1' backend"),
        "DirectML has no nested tensors: nn.TransformerEncoder's fast path (in eval or no_grad, given a "
        "src_key_padding_mask) packs its input into one",
        "build the encoder with nn.TransformerEncoder(..., enable_nested_tensor=False): the same result where the "
        "mask keeps a position, without a nested tensor",
    ),
    KnownError(
        "dml_out_of_memory",
        re.compile(
            r"(?:Could not allocate tensor with (?P<bytes>\d+) bytes\.\s*)?"
            r"There is not enough GPU video memory available"
        ),
        "the DirectML device ran out of video memory{bytes_clause}",
        _SHRINK_BATCH,
    ),
    KnownError(
        "inference_mode",
        re.compile(r"Cannot set version_counter for inference tensor"),
        "torch.inference_mode() tensors cannot be used on DirectML",
        "use torch.no_grad() instead of torch.inference_mode()",
    ),
    # A fused optimizer (AdamW(fused=True)) falls back to the CPU on DirectML,
    # and the CPU backend has no kernel to copy its resized result back.
    KnownError(
        "fallback_copy_back",
        re.compile(r"Could not run 'aten::_copy_from_and_resize' with arguments from the 'CPU' backend"),
        "an op that fell back to the CPU could not copy its result back to the device, "
        "as a fused optimizer such as AdamW(fused=True) does on DirectML",
        "drop fused=True from the optimizer; the default foreach path works",
    ),
    # nn.LSTM / nn.GRU reach a fused cell with no DirectML kernel; the fallback then finds no CPU
    # kernel either (CUDA-only op), so the step fails (microsoft/DirectML#613, #654, #677).
    KnownError(
        "fallback_no_cpu_kernel",
        re.compile(r"Could not run '(?P<op>aten::_thnn_fused_(?:lstm|gru)_cell\w*)' with arguments from the 'CPU' backend"),
        "nn.LSTM/nn.GRU's fused cell has no DirectML kernel and its CPU fallback fails too: "
        "Could not run '{op}' with arguments from the 'CPU' backend",
        "run the RNN from native ops with dmlprof.patch(model, optimizer); dmlprof scan FILE --device emulated-dml "
        "--replace shows the result",
    ),
    # -- other accelerators ----------------------------------------------------
    KnownError(
        "gpu_out_of_memory",
        re.compile(r"(?P<device>CUDA|HIP|XPU) out of memory\.?(?:\s*Tried to allocate (?P<tried>[\d.]+ ?[KMGT]?i?B))?"),
        "the {device_label} device ran out of memory{tried_clause}",
        _SHRINK_BATCH,
    ),
    KnownError(
        "mps_out_of_memory",
        re.compile(r"MPS backend out of memory(?:.*?Tried to allocate (?P<tried>[\d.]+ ?[KMGT]?i?B))?", re.DOTALL),
        "the MPS device ran out of memory{tried_clause}",
        _SHRINK_BATCH + "; raising PYTORCH_MPS_HIGH_WATERMARK_RATIO risks freezing the machine",
    ),
    KnownError(
        "mps_not_implemented",
        re.compile(r"The operator '(?P<op>[^']+)' is not currently implemented for the MPS device"),
        "{op} has no MPS kernel and the MPS CPU fallback is off",
        "set PYTORCH_ENABLE_MPS_FALLBACK=1 before starting Python; dmlprof then reports each fallback",
    ),
    KnownError(
        "cpu_out_of_memory",
        re.compile(
            r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)"
            r"(?:: you tried to allocate (?P<bytes>\d+) bytes)?"
        ),
        "the process ran out of host memory{bytes_clause}",
        _SHRINK_BATCH,
    ),
    # Any other framework's OOM type (torch.OutOfMemoryError without a known
    # message): last, so the specific messages above win.
    KnownError(
        "generic_out_of_memory",
        re.compile(r"\bOutOfMemoryError\b"),
        "the device ran out of memory",
        _SHRINK_BATCH,
    ),
)

def match_known_error(message: str) -> Optional[KnownError]:
    """The first known error whose pattern occurs in ``message`` (and its ``when``), formatted; else ``None``."""
    for known in KNOWN_ERRORS:
        match = known.pattern.search(message)
        if match and (known.when is None or known.when(match)):
            return _format(known, match)
    return None


def _is_a_crop(match: re.Match) -> bool:
    """Whether an out-of-bounds view is padding's backward: a crop of a contiguous tensor (its strides are a
    larger contiguous tensor's, each size within that tensor's) starting past its first element. A huge
    ``torch.empty``, a tensor past 4 GiB or an overlapping ``as_strided`` fail in the same words, differently."""
    try:
        sizes = [int(v) for v in match.group("sizes").split(",") if v.strip()]
        strides = [int(v) for v in match.group("strides").split(",") if v.strip()]
        offset = int(match.group("offset"))
    except ValueError:
        return False
    if offset == 0 or not sizes or len(sizes) != len(strides) or strides[-1] != 1:
        return False
    cropped = False  # some dimension is narrower than the tensor it is cut from (a contiguous run shifted is no crop)
    for inner in range(1, len(sizes)):
        outer_stride, inner_stride = strides[inner - 1], strides[inner]
        if inner_stride <= 0 or outer_stride % inner_stride or outer_stride // inner_stride < sizes[inner]:
            return False
        cropped = cropped or outer_stride // inner_stride > sizes[inner]
    return cropped


# HIP builds of PyTorch word ROCm's errors as "HIP"; users know it as ROCm.
_DEVICE_LABELS = {"CUDA": "CUDA", "HIP": "ROCm (HIP)", "XPU": "Intel XPU"}


def _format(known: KnownError, match: re.Match) -> KnownError:
    groups = match.groupdict()
    # Optional clauses read naturally only when their number was in the message.
    clauses = {
        "bytes_clause": f" allocating {fmt_bytes(int(groups['bytes']))}" if groups.get("bytes") else "",
        "tried_clause": f" allocating {groups['tried'].strip()}" if groups.get("tried") else "",
    }
    fields = _Blank({k: v for k, v in groups.items() if v is not None})
    fields.update(clauses)
    if groups.get("device"):
        fields["device_label"] = _DEVICE_LABELS.get(groups["device"], groups["device"])
    return dataclasses.replace(
        known,
        explanation=_tidy(known.explanation.format_map(fields)),
        remedy=_tidy(known.remedy.format_map(fields)),
    )


def explain_device_error(exc: BaseException, backend=None) -> Optional[KnownError]:
    """The known error behind ``exc``, looking at its chained causes too.

    ``backend`` is accepted for backends that want to narrow the match; the
    messages themselves are distinctive enough that none needs to yet.
    """
    seen = 0
    while exc is not None and seen < 8:
        found = match_known_error(f"{type(exc).__name__}: {exc}")
        if found:
            return found
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def is_out_of_memory(exc: BaseException) -> bool:
    """True when ``exc`` (or a cause) says a device or the host ran out of memory."""
    if isinstance(exc, MemoryError):
        return True
    found = explain_device_error(exc)
    return bool(found and found.out_of_memory)
