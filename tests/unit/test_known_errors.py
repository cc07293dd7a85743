"""Each recognised device error: its explanation, its remedy, and whether it counts as out-of-memory."""
from __future__ import annotations

import pickle

import pytest
import torch

from dmlprof.backends import CpuBackend, CudaBackend, DmlBackend, MpsBackend, XpuBackend
from dmlprof.backends.errors import (
    KNOWN_ERRORS,
    explain_device_error,
    is_out_of_memory,
    match_known_error,
)
from dmlprof.directml.no_storage import WEIGHTS_ONLY_REFUSED
from dmlprof.errors import DmlprofError
from dmlprof.units import fmt_bytes

# (exception, key, words the explanation must contain, words the remedy must contain, out of memory)
CASES = [
    (AssertionError("Torch not compiled with CUDA enabled"),
     "script_wants_cuda", ["CUDA"], ["--from cuda"], False),
    (ModuleNotFoundError("No module named 'torch_directml'"),
     "script_wants_directml", ["torch_directml"], ["--target dml", "--device emulated-dml"], False),
    (RuntimeError("The MPS backend is supported on MacOS 12.3+."),
     "script_wants_mps", ["MPS"], ["--from mps"], False),
    (RuntimeError("The GPU device does not support Double (Float64) operations!"),
     "dml_float64", ["float64"], ["float32"], False),
    (RuntimeError("torch-directml ends the process here (SIGABRT): Invalid or unsupported data type ComplexFloat."),
     "dml_complex_abort", ["complex", "ends the process", "ComplexFloat"], ["dmlprof.replacements.fft", ".cpu()"],
     False),
    (RuntimeError("torch-directml ends the process here (SIGABRT): Invalid or unsupported data type BFloat16."),
     "dml_bfloat16_abort", ["bfloat16", "ends the process"], ["float16"], False),
    (RuntimeError("torch-directml ends the process here (SIGSEGV): kthvalue on the device crashes"),
     "dml_process_abort", ["kthvalue", "SIGSEGV"], ["on the CPU"], False),
    (RuntimeError("DirectML scatter doesn't allow partially modified dimensions. Please update the dimension so that "
                  "the indices and input only differ in the provided dimension."),
     "dml_scatter_dims", ["negative dim", "F.one_hot"], ["non-negative dim", "torch.arange"], False),
    (RuntimeError('self.has_storage() INTERNAL ASSERT FAILED at "../aten/src/ATen/native/TensorShape.cpp":3991, '
                  'please report a bug to PyTorch.'),
     "dml_needs_storage", ["storage", "slice_scatter"], ["clone"], False),
    (RuntimeError("InternalTorchDynamoError: Cannot access storage of OpaqueTensorImpl"),  # realdml, torch.compile
     "dml_torch_compile", ["torch.compile", "whatever the backend"], ["suppress_errors = True"], False),
    (RuntimeError("Unknown error -2147024809"), "dml_invalid_argument", ["invalid argument", "empty"], ["float"],
     False),
    (RuntimeError("Return inverse not implemented for unique operator for DirectML."), "dml_unique_outputs",
     ["no inverse", "return_inverse=True"], ["x.cpu(), return_inverse=True"], False),
    (RuntimeError("Unknown error -2147467259"), "dml_failed", ["E_FAIL"], ["driver"], False),
    (RuntimeError('tensor.device().type() == at::DeviceType::PrivateUse1 INTERNAL ASSERT FAILED at "DMLTensor.cpp":30, '
                  "please report a bug to PyTorch. unbox expects Dml at::Tensor as inputs"), "dml_cpu_tensor",
     ["a CPU tensor meets device tensors", "device="], ["device=x.device", "register_buffer"], False),
    (RuntimeError("Unknown error -2005270523"), "dml_device_removed", ["DXGI_ERROR_DEVICE_REMOVED", "void"],
     ["new process"], False),
    (RuntimeError("ensure_in_bounds: sizes [2, 64, 32, 32], strides [73984, 1156, 34, 1], storage offset 1025, and "
                  "itemsize 4 requiring a storage size of 595692 are out of bounds for storage of size 591872"),
     "dml_view_beyond_storage", ["cropping", "F.pad"], ["pad_constant"], False),
    (RuntimeError("m_device->CreateOperator(&opDesc, IID_PPV_ARGS(&op))"), "dml_create_operator", ["operator"],
     ["empty"], False),
    (RuntimeError("'memory_format' argument is must be Contiguous for DML tensors"),
     "dml_channels_last", ["contiguous layout", "model.to(memory_format=...)"],
     ["drop memory_format=torch.channels_last", "convert on the CPU before moving"], False),
    (RuntimeError("Divisor override isn't supported for DirectML"),
     "dml_divisor_override", ["divisor_override"], ["rescale"], False),
    (RuntimeError("Invalid or unsupported data type."),
     "dml_unsupported_dtype", ["data type", "bfloat16"], ["float16"], False),
    (RuntimeError("Could not allocate tensor with 6291456 bytes. There is not enough GPU video memory available!"),
     "dml_out_of_memory", ["DirectML", "video memory", "6.0 MiB"], ["batch size"], True),
    (RuntimeError("Cannot set version_counter for inference tensor"),
     "inference_mode", ["inference_mode"], ["no_grad"], False),
    (NotImplementedError("Could not run 'aten::_copy_from_and_resize' with arguments from the 'CPU' backend. "
                         "This could be because the operator doesn't exist for this backend"),
     "fallback_copy_back", ["fell back", "fused"], ["fused=True"], False),
    (NotImplementedError("Could not run 'aten::_thnn_fused_lstm_cell' with arguments from the 'CPU' backend. "
                         "This could be because the operator doesn't exist for this backend"),
     "fallback_no_cpu_kernel", ["nn.LSTM", "aten::_thnn_fused_lstm_cell"], ["dmlprof.patch", "--replace"], False),
    (NotImplementedError("Could not run 'aten::conv2d' with arguments from the 'AutocastPrivateUse1' backend. "
                         "This could be because the operator doesn't exist for this backend"),
     "privateuse1_autocast", ["torch.autocast"], ["float32", "GradScaler"], False),
    (RuntimeError("Tried to use AMP with the `privateuseone` backend, but the backend has not registered a module "
                  "or  the module miss some necessary funcs."),
     "privateuse1_autocast", ["torch.autocast"], ["float32", "GradScaler"], False),
    (NotImplementedError("Could not run 'aten::_sparse_coo_tensor_with_dims_and_tensors' with arguments from the "
                         "'SparsePrivateUse1' backend. This could be because the operator doesn't exist for this backend"),
     "privateuse1_sparse", ["sparse", "nn.Embedding"], ["sparse=False"], False),
    # measured on realdml (re-probe 19, cases 13 and 34): reads of a device tensor's storage
    (NotImplementedError("Cannot access storage of OpaqueTensorImpl"), "dml_no_storage", ["no storage", "data_ptr"],
     ["a is b", "pad"], False),
    (RuntimeError("Cannot access data pointer of Tensor that doesn't have storage"), "dml_no_storage",
     ["no storage"], ["CPU tensor"], False),
    # measured on realdml: torch.load(..., map_location=<the DirectML device>) of a CPU checkpoint
    (TypeError("'>=' not supported between instances of 'torch.device' and 'int'"), "dml_storage_to_device",
     ["torch.load", "map_location"], ["map_location='cpu'", "load_state_dict"], False),
    # measured on realdml (re-probe 21, case 11): a weights-only load of the device's own checkpoint
    (pickle.UnpicklingError(WEIGHTS_ONLY_REFUSED),
     "dml_weights_only_load", ["weights_only=True", "numpy"], ["v.cpu()", "map_location='cpu'", "weights_only=False"],
     False),
    # measured on realdml (re-probe 22, case 13): safetensors loading onto the DirectML device, every spelling
    (type("SafetensorError", (Exception,), {})("device device(type='privateuseone', index=0) is invalid"),
     "dml_safetensors_device", ["safetensors", "load_file"], ["device='cpu'", "load_state_dict", ".to(device)"], False),
    (type("SafetensorError", (Exception,), {})("device privateuseone is invalid"), "dml_safetensors_device",
     ["safe_open"], ["f.get_tensor(name).to(device)"], False),
    # measured on realdml (re-probe 22, case 11): set_ of an empty device tensor dies of SIGSEGV
    (RuntimeError("torch-directml ends the process here (SIGSEGV): set_ of an empty device tensor (set_'s CPU "
                  "fallback) crashes"), "dml_set_empty_abort", ["set_", "SIGSEGV"], ["x.clone()", "p.data = x"], False),
    # measured on realdml (re-probe 18, case 36): a frozen nn.TransformerEncoder's fast path with a padding mask
    (NotImplementedError("Could not run 'aten::_to_copy' with arguments from the 'NestedTensorPrivateUse1' backend. "
                         "This could be because the operator doesn't exist for this backend"),
     "privateuse1_nested", ["nested", "TransformerEncoder"], ["enable_nested_tensor=False"], False),
    (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.1 GiB total capacity)"),
     "gpu_out_of_memory", ["CUDA", "2.00 GiB"], ["batch size"], True),
    (torch.OutOfMemoryError("HIP out of memory. Tried to allocate 512.00 MiB (GPU 0; 63.98 GiB total capacity)"),
     "gpu_out_of_memory", ["ROCm", "512.00 MiB"], ["batch size"], True),
    (RuntimeError("XPU out of memory. Tried to allocate 1.50 GiB (GPU 0; 15.9 GiB total capacity)"),
     "gpu_out_of_memory", ["XPU", "1.50 GiB"], ["batch size"], True),
    (RuntimeError("MPS backend out of memory (MPS allocated: 17.5 GB, other allocations: 1.2 GB, max allowed: "
                  "18.13 GB). Tried to allocate 256.00 MB on private pool. Use PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 "
                  "to disable upper limit for memory allocations (may cause system failure)."),
     "mps_out_of_memory", ["MPS", "256.00 MB"], ["batch size", "PYTORCH_MPS_HIGH_WATERMARK_RATIO"], True),
    (NotImplementedError("The operator 'aten::grid_sampler_2d_backward' is not currently implemented for the MPS "
                         "device. As a temporary fix, you can set the environment variable "
                         "`PYTORCH_ENABLE_MPS_FALLBACK=1` to use the CPU as a fallback for this op."),
     "mps_not_implemented", ["aten::grid_sampler_2d_backward", "MPS"], ["PYTORCH_ENABLE_MPS_FALLBACK=1"], False),
    (RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: "
                  "you tried to allocate 1099511627776 bytes. Error code 12 (Cannot allocate memory)"),
     "cpu_out_of_memory", ["host memory", "1.0 TiB"], ["batch size"], True),
    (RuntimeError("[enforce fail at alloc_cpu.cpp:72] data. DefaultCPUAllocator: not enough memory: "
                  "you tried to allocate 3221225472 bytes."),
     "cpu_out_of_memory", ["host memory", "3.0 GiB"], ["batch size"], True),
    (torch.OutOfMemoryError("some allocator said no"),
     "generic_out_of_memory", ["out of memory"], ["batch size"], True),
]


@pytest.mark.parametrize("exc, key, explains, remedies, oom", CASES, ids=[c[1] + str(i) for i, c in enumerate(CASES)])
def test_each_known_error_is_explained_with_a_remedy(exc, key, explains, remedies, oom):
    known = explain_device_error(exc)
    assert known is not None and known.key == key
    for word in explains:
        assert word in known.explanation, (word, known.explanation)
    for word in remedies:
        assert word in known.remedy, (word, known.remedy)
    assert "{" not in known.one_line() and "\n" not in known.one_line()
    assert is_out_of_memory(exc) is oom


def test_every_known_error_has_a_case():
    assert {k.key for k in KNOWN_ERRORS} == {c[1] for c in CASES}


@pytest.mark.parametrize("backend_class", [CpuBackend, CudaBackend, DmlBackend, MpsBackend, XpuBackend])
def test_every_backend_recognises_the_directml_float64_error(backend_class):
    # The scan asks the backend; a model that raises the DirectML message is explained on any device.
    known = backend_class().known_error(RuntimeError("The GPU device does not support Double (Float64) operations!"))
    assert known.key == "dml_float64"


def test_the_error_is_found_through_chained_causes():
    try:
        try:
            raise RuntimeError("Could not allocate tensor with 1024 bytes. There is not enough GPU video memory available!")
        except RuntimeError as inner:
            raise ValueError("the data loader failed") from inner
    except ValueError as outer:
        wrapped = outer
    assert explain_device_error(wrapped).key == "dml_out_of_memory"
    assert is_out_of_memory(wrapped)


def test_an_oom_message_without_a_size_still_reads_well():
    known = match_known_error("RuntimeError: There is not enough GPU video memory available!")
    assert known.key == "dml_out_of_memory" and known.explanation == "the DirectML device ran out of video memory"
    known = match_known_error("OutOfMemoryError: CUDA out of memory.")
    assert known.explanation == "the CUDA device ran out of memory"


def test_unknown_errors_are_not_explained():
    for exc in (ValueError("boom from the model"), RuntimeError("mat1 and mat2 shapes cannot be multiplied"),
                KeyError("weight")):
        assert explain_device_error(exc) is None
        assert not is_out_of_memory(exc)


def test_memory_error_is_out_of_memory():
    assert is_out_of_memory(MemoryError())


@pytest.mark.live
def test_a_real_host_allocation_failure_is_recognised():
    # 2**62 bytes cannot be mapped on any machine: torch raises at once, nothing is allocated.
    with pytest.raises(RuntimeError) as caught:
        torch.empty(2**62, dtype=torch.uint8)
    known = explain_device_error(caught.value)
    assert known is not None and known.key == "cpu_out_of_memory" and "4.0 EiB" in known.explanation
    assert is_out_of_memory(caught.value)


def test_the_cli_line_carries_explanation_and_remedy():
    known = explain_device_error(RuntimeError("The GPU device does not support Double (Float64) operations!"))
    line = DmlprofError(f"step 2: {known.explanation}", remedy=known.remedy).one_line()
    assert line == f"step 2: {known.explanation} ({known.remedy})"


@pytest.mark.parametrize("count, text", [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (6291456, "6.0 MiB"),
                                         (3 * 2**30, "3.0 GiB"), (2**40, "1.0 TiB"), (2**62, "4.0 EiB")])
def test_fmt_bytes(count, text):
    assert fmt_bytes(count) == text
