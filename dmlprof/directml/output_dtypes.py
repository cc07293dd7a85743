"""Outputs whose dtype torch-directml's kernel makes otherwise than the CPU's kernel: one definition, read by both
devices that stand in for DirectML (the prediction's stand-in, :mod:`dmlprof.predict.special_kernels`, and the
emulated device, :mod:`dmlprof.testing`, whose C++ kernel casts what its CPU kernel returned).

``native_dropout``'s mask is the input's dtype (0 and 1), where the CPU's and Meta's kernels return a bool one:
measured on realdml (torch-directml 0.2.5, torch 2.4.1; float32 and float16, train or not; re-probe 16, 15 and
re-probe 17, 31: ``x[mask]`` then raises torch's IndexError "tensors used as indices must be long, int, byte or bool
tensors"). ``F.dropout`` and ``nn.Dropout`` take native_dropout's output only, so theirs are unchanged; autograd hands
the mask to ``native_dropout_backward``, whose CPU kernel takes a float mask as torch-directml's does.
"""
from __future__ import annotations

#: op -> the index of the output that torch-directml returns in the dtype of the op's first (tensor) argument
OUTPUT_IN_INPUT_DTYPE = {"aten::native_dropout": 1}
