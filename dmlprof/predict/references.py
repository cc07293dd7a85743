"""Device-only ops that torch has neither a CPU nor a Meta kernel for, computed by a reference that has both.

A target's own kernel (XPU's fused GRU cell, MPS's ``max_pool2d_backward`` and ``linear_backward``) runs on the stand-in like any of
the target's natives, but the stand-in shapes an output with the op's Meta kernel and computes its values with
its CPU kernel, and these have neither: a reference stands in for each (:data:`META_REFERENCES` for shapes,
:data:`VALUE_REFERENCES` where the reference computes the device's values too).
"""
from __future__ import annotations

import torch

from dmlprof.predict.rnn_cells import FUSED_GRU_CELL, fused_gru_cell_backward_shapes, fused_gru_cell_shapes


def max_pool2d_backward(grad_output, self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """MPS's ``max_pool2d`` backward (its ``max_pool2d`` keeps no indices): the gradient routed to each window's
    maximum, through the indices the CPU's and Meta's ``max_pool2d_with_indices`` find again."""
    aten = torch.ops.aten
    _, indices = aten.max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)
    return aten.max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
                                                 ceil_mode, indices)


def linear_backward(self, grad_output, weight, output_mask=(True, True, True)):
    """MPS's ``linear`` backward (its ``linear`` is a kernel of its own, whose backward has no CPU kernel): the
    gradients torch's composite ``linear`` gives, for every output as its Meta kernel shapes them (autograd keeps
    those it needs). Without it every MPS model's weights held no values after its first optimizer step."""
    flat_grad = grad_output.reshape(-1, grad_output.size(-1))
    return (grad_output.matmul(weight), flat_grad.t().mm(self.reshape(-1, self.size(-1))), flat_grad.sum(0))


#: ``{op: function of its meta arguments}`` giving its outputs' shapes
META_REFERENCES = {
    FUSED_GRU_CELL: fused_gru_cell_shapes,
    "aten::_thnn_fused_gru_cell_backward": fused_gru_cell_backward_shapes,
    "aten::max_pool2d_backward": max_pool2d_backward,
}
#: ``{op: function of its CPU arguments}`` giving its outputs' values
VALUE_REFERENCES = {
    "aten::max_pool2d_backward": max_pool2d_backward,
    "aten::linear_backward": linear_backward,
}
