"""Replacements for ops that fall back to the CPU on DirectML, built from ops it runs natively.

``dmlprof.replacements.ops.<name>`` is the name the reports print in their
fixes and users call, so every replacement is importable from here; each
lives in the module of its family:

* :mod:`~dmlprof.replacements.ops.layers`: group norm, weight norm, attention, LSTM/GRU;
* :mod:`~dmlprof.replacements.ops.losses`: binary cross-entropy, CTC, Huber;
* :mod:`~dmlprof.replacements.ops.spatial`: grid sampling, interpolation, unfold/fold, pooling, padding;
* :mod:`~dmlprof.replacements.ops.pointwise`: activations, clamping, rounding;
* :mod:`~dmlprof.replacements.ops.indexing`: eye, roll, repeat_interleave, embedding_bag;
* :mod:`~dmlprof.replacements.ops.reductions`: var/std/var_mean, cumprod, count_nonzero, bucketize;
* :mod:`~dmlprof.replacements.ops.optimizer`: lerp and the ``_foreach_`` ops of optimizer steps.

Every function has the signature and semantics of the torch function it
replaces (for the cases it supports; the patch layer sends anything else to
the original). They are built only from ops with DirectML kernels (``mul.out``,
``add.out``, ``mm.out``, ``index.Tensor_out``, ``_index_put_impl_``, ``sum.IntList_out``,
``var.correction``, ``softplus.out``, ``upsample_nearest2d.out``, ...). Where the
autograd backward of such a composition would itself reach an op that falls
back, the replacement is a :class:`torch.autograd.Function` with its backward
written out from native ops too.

Each one is proven in ``tests/unit/test_replacements.py``: same values and
gradients as the original (gradcheck in float64 on the CPU) and zero fallback
calls for forward and backward on the emulated DirectML device.
"""
from __future__ import annotations

from dmlprof.replacements.ops.indexing import embedding_bag, eye, repeat_interleave, roll
from dmlprof.replacements.ops.layers import (group_norm, gru_cell, lstm_cell, rnn_stack, scaled_dot_product_attention,
                                             weight_norm)
from dmlprof.replacements.ops.losses import binary_cross_entropy, binary_cross_entropy_with_logits, ctc_loss, huber_loss
from dmlprof.replacements.ops.optimizer import (foreach_lerp, foreach_lerp_, foreach_maximum_, foreach_minimum_, lerp,
                                                lerp_)
from dmlprof.replacements.ops.pointwise import (celu, clamp, elu, frac, glu, hardshrink, logit, logsigmoid, mish,
                                                nan_to_num, selu, softshrink, trunc)
from dmlprof.replacements.ops.reductions import bucketize, count_nonzero, cumprod, std, var, var_mean
from dmlprof.replacements.ops.spatial import (adaptive_max_pool2d, fold, grid_sample, interpolate_bilinear,
                                              interpolate_linear1d, interpolate_nearest1d, pad_constant, unfold)

__all__ = [
    "group_norm", "weight_norm", "scaled_dot_product_attention", "lstm_cell", "gru_cell", "rnn_stack",
    "binary_cross_entropy_with_logits", "binary_cross_entropy", "ctc_loss", "huber_loss",
    "grid_sample", "interpolate_nearest1d", "interpolate_bilinear", "interpolate_linear1d", "unfold", "fold",
    "adaptive_max_pool2d", "pad_constant",
    "logsigmoid", "clamp", "elu", "selu", "celu", "softshrink", "hardshrink", "glu", "mish", "trunc", "frac",
    "nan_to_num", "logit",
    "eye", "roll", "repeat_interleave", "embedding_bag",
    "cumprod", "count_nonzero", "var", "std", "var_mean", "bucketize",
    "lerp", "lerp_", "foreach_lerp_", "foreach_lerp", "foreach_maximum_", "foreach_minimum_",
]
