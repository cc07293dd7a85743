"""``--target mps``: Apple GPUs through torch's MPS device.

Beyond the shared rules (:mod:`dmlprof.targets.base`): MPS holds no float64 and no complex128 tensor
(making one raises); complex64 runs only in the ops PyTorch's own MPS tests list as complex-capable
(``SUPPORTED_COMPLEX_OPS`` of torch/testing/_internal/common_mps.py, in the same wheel); and an op that
test file lists as unimplemented for some dtypes raises for those (its ``UNIMPLEMENTED_XFAILLIST``). Its
macOS-version lists are not applied: the prediction assumes macOS 15 or later.
"""
from __future__ import annotations

from typing import Optional

from dmlprof.targets.base import TargetDtypeFailure, TargetSemantics

#: calls that move, view or make tensors: common_mps.py's complex list names user-facing ops, and these
#: pieces of theirs run for any dtype a tensor on the device can hold. Base names (``base_name``: copy_ is
#: "copy"). ``_copy_from`` is the stand-in's device copy where MPS copies in mps_copy_ (no op of its own),
#: the copy common_mps.py's complex-capable clone and contiguous run on.
_STRUCTURAL = frozenset({
    "_to_copy", "copy", "_copy_from", "_copy_from_and_resize", "clone", "empty", "empty_like", "empty_strided",
    "new_empty", "new_empty_strided", "view", "_unsafe_view", "as_strided", "alias", "detach", "t", "transpose",
    "permute", "expand", "select", "slice", "unsqueeze", "squeeze", "reshape", "_reshape_alias", "fill", "zero",
    "resize", "cat", "stack", "view_as_real", "view_as_complex", "_conj", "resolve_conj", "_neg_view", "resolve_neg",
    "set", "lift_fresh",
})
_COMPLEX_HELD = ("complex64", "complex32")
_HELD_INSTEAD = {"float64": "float32", "complex128": "complex64"}
#: the list of common_mps.py whose dtypes fail outright (the others compare values, or need an old macOS)
_FAILING_LIST = "UNIMPLEMENTED_XFAILLIST"
_NO_DOUBLE = ("Cannot convert a MPS Tensor to {dtype} dtype as the MPS framework doesn't support {dtype} "
              "(predicted: MPS holds no {dtype} tensor)")


def base_name(op: str) -> str:
    """``aten::add_.Tensor`` -> ``add``: the name common_mps.py's OpInfo names map to."""
    name = op.split("::", 1)[-1].split(".", 1)[0]
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


class Semantics(TargetSemantics):
    title = "MPS"
    fallback_env = "PYTORCH_ENABLE_MPS_FALLBACK"
    # torch.autocast("mps") casts to float16 (bfloat16 too on macOS 14+), by ATen's AutocastMPS kernels
    autocast_key = "AutocastMPS"
    assumes = "assumed macOS 15 or later (common_mps.py's lists for older macOS not applied)"
    # ATen's own device-type branches: convolution (select_conv_backend: ConvBackend::Mps) and the LSTM
    # (_lstm_mps when the input is on MPS) take MPS kernels where a PrivateUse1 device takes these
    counterparts = {
        "aten::convolution_overrideable": "aten::_mps_convolution",
        "aten::convolution_backward_overrideable": "aten::mps_convolution_backward",
        "aten::_thnn_fused_lstm_cell": "aten::_lstm_mps",
        "aten::_thnn_fused_lstm_cell_backward_impl": "aten::lstm_mps_backward",
    }
    # ATen's GRU cell is fused on CUDA, XPU and PrivateUse1 inputs only (RNN.cpp's GRUCell); on MPS nn.GRU and
    # nn.GRUCell run linear, sigmoid, tanh and pointwise arithmetic, and autograd differentiates those
    unfused = frozenset({"aten::_thnn_fused_gru_cell"})
    # ATen's lstm (unpacked input) calls _lstm_mps for an MPS input before anything else, and _lstm_mps refuses
    # projections (RnnOps.mm: "LSTM with projections is not currently supported with MPS."); the stand-in's
    # lstm never calls it
    judged_composites = {"aten::lstm.input": "aten::_lstm_mps"}

    def __init__(self, table, environ=None):
        super().__init__(table, environ)
        dtypes = table.dtypes
        self.unsupported = tuple(dtypes.get("unsupported", ()))
        self.complex_ops = frozenset(name.replace("nn.functional.", "").replace(".", "_")
                                     for name in dtypes.get("complex_opinfos", ()))
        self.gaps = {base: [gap for gap in gaps if gap["list"] == _FAILING_LIST]
                     for base, gaps in (dtypes.get("gaps") or {}).items()}

    def argument_failure(self, op: str, args) -> Optional[str]:
        if op == "aten::_lstm_mps" and len(args) > 1 and len(args[1]) == 2 and \
                args[1][0].size(-1) != args[1][1].size(-1):  # hx's hidden state narrower than its cell: proj_size
            return ("LSTM with projections is not currently supported with MPS. (predicted: ATen's lstm runs "
                    "_lstm_mps on MPS, which raises for an nn.LSTM with proj_size > 0)")
        return None

    def argument_remedy(self, op: str) -> str:
        if op == "aten::_lstm_mps":  # (not its dtype: the general remedy's "change the dtype" misled)
            return ("build the nn.LSTM without proj_size and project its output with an nn.Linear, or run the LSTM "
                    "on the CPU")
        return ""

    def refused_dtypes(self) -> dict:
        import torch

        return {getattr(torch, name): (lambda name=name: TargetDtypeFailure(
            _NO_DOUBLE.format(dtype=name.capitalize()), remedy=f"keep tensors on MPS {_HELD_INSTEAD.get(name, 'float32')} "
            f"(MPS holds no {name}): cast before moving to the device, or compute that part on the CPU"))
                for name in self.unsupported if hasattr(torch, name)}

    def call_failure(self, op: str, dtypes) -> Optional[str]:
        base = base_name(op)
        for gap in self.gaps.get(base, ()):
            listed = gap["dtypes"]
            hit = [d for d in dtypes if listed is None or d in listed]
            if hit:
                return (f"{op} on {hit[0]} is not implemented for the MPS device (torch "
                        f"{self.table.torch_version}'s common_mps.py lists {gap['opinfo']} as failing for "
                        f"{'every dtype' if listed is None else ', '.join(listed)})")
        if base not in self.complex_ops and base not in _STRUCTURAL:
            held = [d for d in dtypes if d in _COMPLEX_HELD]
            if held:
                return (f"{op} on {held[0]} is not supported on the MPS device (torch {self.table.torch_version}'s "
                        "common_mps.py does not list it among the complex-capable ops)")
        return None
