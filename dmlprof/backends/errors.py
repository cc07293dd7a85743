"""Known device errors, recognised from their messages, with a remedy each."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class KnownError:
    key: str
    pattern: re.Pattern
    explanation: str
    remedy: str


KNOWN_ERRORS = (
    KnownError(
        "dml_float64",
        re.compile(r"does not support Double \(Float64\)"),
        "the DirectML device cannot run float64 operations",
        "use float32 tensors (model.float(), torch.set_default_dtype(torch.float32))",
    ),
    KnownError(
        "dml_unsupported_dtype",
        re.compile(r"Invalid or unsupported data type"),
        "the DirectML device does not support this data type (often bfloat16)",
        "use float16 or float32 instead of bfloat16 on DirectML",
    ),
    KnownError(
        "dml_out_of_memory",
        re.compile(r"not enough GPU video memory"),
        "the DirectML device ran out of video memory",
        "lower the batch size (dmlprof sweep finds the largest that fits)",
    ),
    KnownError(
        "cuda_out_of_memory",
        re.compile(r"(CUDA|HIP) out of memory|OutOfMemoryError"),
        "the GPU ran out of memory",
        "lower the batch size (dmlprof sweep finds the largest that fits)",
    ),
    KnownError(
        "mps_out_of_memory",
        re.compile(r"MPS backend out of memory"),
        "the MPS device ran out of memory",
        "lower the batch size (dmlprof sweep finds the largest that fits)",
    ),
    KnownError(
        "cpu_out_of_memory",
        re.compile(r"DefaultCPUAllocator: (can't allocate memory|not enough memory)"),
        "the process ran out of host memory",
        "lower the batch size (dmlprof sweep finds the largest that fits)",
    ),
    KnownError(
        "inference_mode",
        re.compile(r"Cannot set version_counter for inference tensor"),
        "torch.inference_mode() does not work on DirectML",
        "use torch.no_grad() instead of torch.inference_mode()",
    ),
)

OUT_OF_MEMORY_KEYS = frozenset(k.key for k in KNOWN_ERRORS if k.key.endswith("out_of_memory"))


def match_known_error(message: str) -> Optional[KnownError]:
    for known in KNOWN_ERRORS:
        if known.pattern.search(message):
            return known
    return None


def explain_device_error(exc: BaseException, backend=None) -> Optional[KnownError]:
    """The known error behind ``exc``, looking at its chained causes too."""
    seen = 0
    while exc is not None and seen < 8:
        found = match_known_error(f"{type(exc).__name__}: {exc}")
        if found:
            return found
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def is_out_of_memory(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    found = explain_device_error(exc)
    return bool(found and found.key in OUT_OF_MEMORY_KEYS)
