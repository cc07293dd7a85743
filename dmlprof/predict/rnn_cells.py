"""The GRU's fused cell on the stand-in: its outputs' shapes, and the unfused cell a device without it runs.

ATen's ``GRUCell`` (aten/src/ATen/native/RNN.cpp) calls ``_thnn_fused_gru_cell`` only for an input on a CUDA,
XPU or PrivateUse1 device (torch 2.4 to 2.14); anywhere else (MPS, the CPU) it computes the cell from linear
layers, sigmoid, tanh and pointwise arithmetic, and autograd differentiates those. The stand-in is a
PrivateUse1 device, so it always meets the fused call:

- where the target has the fused kernel (XPU), the call runs as a kernel of the device's, but torch has no
  Meta (nor CPU) kernel to give its outputs' shapes (the LSTM's fused cell has one):
  :mod:`dmlprof.predict.references` gives them, as the CUDA and XPU kernels lay them out;
- where the target's ATen takes the unfused path (MPS), :func:`unfused_gru_cell` is that path, run on the
  device tensors so that each of its calls is dispatched, recorded and judged as the target's own.
"""
from __future__ import annotations

import torch

#: the fused kernels' workspace holds five hidden-sized blocks per row (RNN.cu's GRU_WORKSPACE_MULTIPLIER)
GRU_WORKSPACE_BLOCKS = 5
FUSED_GRU_CELL = "aten::_thnn_fused_gru_cell"


def fused_gru_cell_shapes(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    """``(hy, workspace)`` as the fused kernels make them: ``hy`` like ``hx``, the workspace (batch, 5 * hidden)."""
    hy = torch.empty_like(hx, memory_format=torch.contiguous_format)
    return hy, hx.new_empty((hx.size(0), hx.size(1) * GRU_WORKSPACE_BLOCKS))


def fused_gru_cell_backward_shapes(grad_hy, workspace, has_bias):
    """The gradients of the gates (batch, 3 * hidden), of ``hx``, and of the biases (3 * hidden: the gates'
    sums over the batch, undefined without biases)."""
    batch, hidden = workspace.size(0), workspace.size(1) // GRU_WORKSPACE_BLOCKS
    grad_input_gates = workspace.new_empty((batch, 3 * hidden))
    grad_hidden_gates = workspace.new_empty((batch, 3 * hidden))
    grad_hx = torch.empty_like(grad_hy, memory_format=torch.contiguous_format)
    biases = (workspace.new_empty((3 * hidden,)), workspace.new_empty((3 * hidden,))) if has_bias else (None, None)
    return (grad_input_gates, grad_hidden_gates, grad_hx) + biases


def unfused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    """ATen's GRU cell off CUDA, XPU and PrivateUse1, from the gates the stand-in's ATen already multiplied out
    (``matmul(input, w_ih.t())``: the unfused path's ``linear`` adds the bias in the same call, here after it).

    Called above autograd, autograd records each piece (their gradients are what the device computes); below
    it (inference mode), the pieces run as the device's calls. Returns ``(hy, workspace)`` as the fused op's
    schema says; the workspace is what only the fused backward reads, which this path never calls: ``hy``
    stands in for it (ATen's caller keeps only ``hy``).
    """
    input_gates = input_gates if input_bias is None else input_gates + input_bias
    hidden_gates = hidden_gates if hidden_bias is None else hidden_gates + hidden_bias
    input_reset, input_update, input_new = input_gates.unsafe_chunk(3, 1)
    hidden_reset, hidden_update, hidden_new = hidden_gates.unsafe_chunk(3, 1)
    reset_gate = (hidden_reset + input_reset).sigmoid_()
    update_gate = (hidden_update + input_update).sigmoid_()
    new_gate = input_new.add(hidden_new * reset_gate).tanh_()
    hy = (hx - new_gate).mul_(update_gate).add_(new_gate)
    return hy, hy


#: ``{fused op: the unfused path ATen takes for it off CUDA, XPU and PrivateUse1}`` (a target's semantics name
#: the ops its device reaches unfused: ``TargetSemantics.unfused``)
UNFUSED_PATHS = {FUSED_GRU_CELL: unfused_gru_cell}


__all__ = ["UNFUSED_PATHS", "fused_gru_cell_backward_shapes", "fused_gru_cell_shapes", "unfused_gru_cell"]
