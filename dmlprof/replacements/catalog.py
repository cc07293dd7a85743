"""The replacements' catalog: for each op that falls back on DirectML, what removes it and how to apply it.

Plain data, no torch: the report attaches these fixes to its hotspots, and
re-rendering a saved session must not import torch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from dmlprof.tables import normalize_op

_PATCH = "dmlprof.patch(model, optimizer)"
_WITH = f"`with {_PATCH}:` around the training step"


@dataclass(frozen=True)
class Replacement:
    """One replacement: the ops it removes (dispatcher names without overload) and how to apply it."""

    name: str
    removes: tuple
    how: str


CATALOG = (
    Replacement(
        "optimizer lerp", ("aten::lerp", "aten::_foreach_lerp", "aten::_foreach_lerp_"),
        "Adam/AdamW's moment update (lerp) falls back once per parameter per step; recreating the optimizer "
        "every epoch resets Adam's moments and does not remove it: the real problem is lerp falling back. "
        f"Keep the optimizer and patch it, {_PATCH} or dmlprof.replacements.patch_optimizer(optimizer): "
        "lerp becomes mul/add, state kept"),
    Replacement(
        "optimizer maximum", ("aten::clamp_min", "aten::clamp_max", "aten::_foreach_maximum", "aten::_foreach_maximum_",
                              "aten::_foreach_minimum_", "aten::_foreach_clamp_min_", "aten::_foreach_clamp_max_"),
        "clamp/maximum with a tensor bound falls back; in the optimizer step (Adam(amsgrad=True), Adamax: "
        "_foreach_maximum_) that is once per parameter per step, and recreating the optimizer does not remove it: "
        f"{_PATCH} runs it as maximum (native), state kept; elsewhere use torch.maximum/minimum"),
    Replacement(
        "fused Adam/AdamW", ("aten::_fused_adam", "aten::_fused_adam_", "aten::_fused_adamw", "aten::_fused_adamw_"),
        "the fused optimizer kernel falls back whole (and on torch 2.4.1 then fails); "
        f"{_PATCH} switches it to the foreach path with lerp as mul/add, state kept"),
    Replacement(
        "group_norm", ("aten::native_group_norm_backward",),
        f"GroupNorm's backward falls back: {_PATCH} swaps nn.GroupNorm/F.group_norm for "
        "dmlprof.replacements.ops.group_norm (native forward, backward from mul/mean/sum)"),
    Replacement(
        "grid_sample", ("aten::grid_sampler_2d", "aten::grid_sampler_2d_backward"),
        f"F.grid_sample (bilinear, zeros or border padding): {_PATCH} or call "
        "dmlprof.replacements.ops.grid_sample (gather + scatter_add, native both ways)"),
    Replacement(
        "embedding_bag",
        ("aten::_embedding_bag", "aten::_embedding_bag_forward_only", "aten::_embedding_bag_backward",
         "aten::_embedding_bag_dense_backward", "aten::_embedding_bag_per_sample_weights_backward"),
        f"nn.EmbeddingBag / F.embedding_bag (sum, mean): {_PATCH} or call "
        "dmlprof.replacements.ops.embedding_bag (embedding + scatter_add)"),
    Replacement(
        "logsigmoid", ("aten::log_sigmoid_forward", "aten::log_sigmoid_backward", "aten::log_sigmoid"),
        "F.logsigmoid, reached by BCE-with-logits: dmlprof.replacements.ops.logsigmoid / "
        f".binary_cross_entropy_with_logits (softplus, native); the loss is outside the model, so use {_WITH}"),
    Replacement(
        "binary_cross_entropy", ("aten::binary_cross_entropy", "aten::binary_cross_entropy_backward"),
        f"F.binary_cross_entropy / nn.BCELoss: dmlprof.replacements.ops.binary_cross_entropy "
        f"(same clamp and gradient as torch); use {_WITH}, or prefer BCE-with-logits"),
    Replacement(
        "lstm_gru_cells",
        ("aten::_thnn_fused_lstm_cell", "aten::_thnn_fused_lstm_cell_backward_impl", "aten::_thnn_fused_gru_cell",
         "aten::_thnn_fused_gru_cell_backward", "aten::_thnn_differentiable_lstm_cell_backward",
         "aten::_thnn_differentiable_gru_cell_backward"),
        "nn.LSTM/nn.GRU and their cells use fused cells with no DirectML kernel, and the CPU has none to fall "
        f"back to, so the step fails: {_PATCH} runs them as linear + sigmoid/tanh steps "
        "(dmlprof.replacements.ops.lstm_cell / gru_cell)"),
    Replacement(
        "fft", ("aten::_fft_r2c", "aten::_fft_c2r", "aten::_fft_c2c", "aten::view_as_real", "aten::view_as_complex"),
        "torch.fft.* (and complex views) fall back: for modest sizes call dmlprof.replacements.fft.rfft/irfft/fft/ifft "
        "(DFT as matmul, complex as a trailing (real, imag) pair; not applied by patch)"),
    Replacement(
        "ctc_loss", ("aten::_ctc_loss", "aten::_ctc_loss_backward"),
        f"F.ctc_loss / nn.CTCLoss: dmlprof.replacements.ops.ctc_loss (log-space alpha recursion); use {_WITH}"),
    Replacement("cumprod", ("aten::cumprod",),
                f"torch.cumprod: {_PATCH} or dmlprof.replacements.ops.cumprod (log-depth scan of multiplies)"),
    Replacement("eye", ("aten::eye",), f"torch.eye: {_PATCH} or dmlprof.replacements.ops.eye (arange == arange)"),
    Replacement("index_add", ("aten::index_add",),
                "index_add (also the backward of index_select) falls back: index with x[idx] instead of "
                "index_select (its backward is index_put_ with accumulate, native)"),
    Replacement("repeat_interleave", ("aten::repeat_interleave",),
                f"torch.repeat_interleave with tensor repeats (its backward reaches index_add): {_PATCH} or "
                "dmlprof.replacements.ops.repeat_interleave (cumsum + indexing)"),
    Replacement("count_nonzero", ("aten::count_nonzero",),
                f"torch.count_nonzero: {_PATCH} or (x != 0).sum(dim)"),
    Replacement("upsample_nearest1d", ("aten::upsample_nearest1d", "aten::upsample_nearest1d_backward"),
                f"1-D nearest interpolation: {_PATCH} or dmlprof.replacements.ops.interpolate_nearest1d "
                "(through upsample_nearest2d, native)"),
    Replacement("std_var_mean", ("aten::std", "aten::var_mean"),
                f"torch.std / var_mean: {_PATCH} or var(...).sqrt() / (var, mean) (var.correction is native)"),
    Replacement("clamp_tensor", ("aten::clamp",),
                f"clamp with tensor bounds: {_PATCH} or dmlprof.replacements.ops.clamp (where)"),
    Replacement("elu", ("aten::elu", "aten::elu_backward"),
                f"ELU, SELU and CELU (all reach elu.out): {_PATCH} or dmlprof.replacements.ops.elu / selu / celu "
                "(where + expm1)"),
    Replacement("shrink", ("aten::softshrink", "aten::softshrink_backward", "aten::hardshrink",
                           "aten::hardshrink_backward"),
                f"F.softshrink / hardshrink: {_PATCH} or dmlprof.replacements.ops.softshrink / hardshrink (where)"),
    Replacement("attention", ("aten::isneginf",),
                "torch >= 2.5's attention math path (F.scaled_dot_product_attention) calls isneginf, which falls back: "
                f"{_PATCH} runs attention as matmul/softmax/matmul (dmlprof.replacements.ops.scaled_dot_product_attention)"),
    Replacement("glu", ("aten::glu", "aten::glu_backward"), f"F.glu / nn.GLU: {_PATCH} or a * sigmoid(b)"),
    Replacement("mish", ("aten::mish", "aten::mish_backward"), f"F.mish / nn.Mish: {_PATCH} or x * tanh(softplus(x))"),
    Replacement("weight_norm", ("aten::_weight_norm_interface", "aten::_weight_norm_interface_backward"),
                f"weight_norm: {_PATCH} computes v * g / ||v|| (linalg_vector_norm, native)"),
    Replacement("unfold_fold", ("aten::im2col", "aten::col2im"),
                f"F.unfold / F.fold (nn.Unfold, nn.Fold): {_PATCH} runs them as grouped (transposed) convolutions "
                "with one-hot kernels (dmlprof.replacements.ops.unfold / fold)"),
    Replacement("adaptive_max_pool2d", ("aten::adaptive_max_pool2d", "aten::adaptive_max_pool2d_backward"),
                f"adaptive max pooling to an output that divides the input: {_PATCH} or F.max_pool2d with "
                "kernel = stride = input/output"),
    Replacement("upsample_linear1d", ("aten::upsample_linear1d", "aten::upsample_linear1d_backward"),
                f"1-D linear interpolation: {_PATCH} or go through F.interpolate(mode='bilinear') on x.unsqueeze(2)"),
    Replacement("roll", ("aten::roll",), f"torch.roll (e.g. shifted windows): {_PATCH} or narrow + cat"),
    Replacement("trunc_frac", ("aten::trunc", "aten::frac", "aten::fix"),
                f"torch.trunc / frac: {_PATCH} or where(x >= 0, floor(x), ceil(x))"),
    Replacement("nan_to_num", ("aten::nan_to_num",), f"torch.nan_to_num: {_PATCH} or where(isnan/isinf)"),
    Replacement("logit", ("aten::logit", "aten::logit_backward"), f"torch.logit: {_PATCH} or log(p) - log1p(-p)"),
    Replacement("bucketize", ("aten::bucketize",),
                f"torch.bucketize (1-D boundaries): {_PATCH} or (x.unsqueeze(-1) > boundaries).sum(-1)"),
    Replacement("huber_loss", ("aten::huber_loss", "aten::huber_loss_backward"),
                f"F.huber_loss: use {_WITH}, or delta * F.smooth_l1_loss(beta=delta) (native)"),
)

_BY_OP = {op: r for r in CATALOG for op in r.removes}


def replacement_for(op: str) -> Optional[Replacement]:
    """The catalog entry that removes a fallback op (any spelling, any overload), or ``None``."""
    name = normalize_op(op)
    found = _BY_OP.get(name)
    if found is None:
        namespace, _, rest = name.partition("::")
        found = _BY_OP.get(f"{namespace}::{rest.split('.', 1)[0]}")
    return found


def advice_for(op: str) -> Optional[str]:
    """One line: the replacement that removes this fallback op and how to apply it, or ``None``."""
    found = replacement_for(op)
    return found.how if found else None


def advice_for_hotspot(ops) -> Optional[str]:
    """Advice for a hotspot (its inner fallback ops): the first op that has a replacement."""
    for op in ops:
        tip = advice_for(op)
        if tip:
            return tip
    return None
