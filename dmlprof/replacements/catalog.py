"""The replacements' catalog: for each op that falls back on DirectML, what removes it and how to apply it.

Plain data, no torch: the report attaches these fixes to its hotspots, and
re-rendering a saved session must not import torch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from dmlprof.tables import normalize_op

_PATCH = "dmlprof.patch(model, optimizer)"
_WITH = f"`with {_PATCH}:` around the training step"


@dataclass(frozen=True)
class Replacement:
    """One replacement: the ops it removes (dispatcher names without overload) and how to apply it."""

    name: str
    removes: tuple
    how: str
    #: device calls the replacement runs in place of the fallback: (per call removed, per inner call it sent to
    #: the CPU), counted on the prediction's stand-in, torch 2.4.1 (a composite foreach counted per tensor: each
    #: is a kernel of its own on DirectML); None: not counted. The fallback cost model prices them
    #: (dmlprof.analysis.fallback_cost); docs/prediction.md says where each was counted.
    added_calls: Optional[Tuple[float, float]] = None


CATALOG = (
    Replacement(
        "optimizer lerp", ("aten::lerp", "aten::_foreach_lerp", "aten::_foreach_lerp_"),
        # short: every Adam user reads it, in the report and in each CI annotation. Recreating the optimizer
        # every epoch is the workaround users pass around; it only resets the moments, so it is named.
        f"Adam/AdamW's moment update (lerp) falls back once per parameter per step: {_PATCH} runs it as "
        "mul/add, state kept (recreating the optimizer only resets its moments)",
        # _foreach_mul_ + _foreach_add_ (composites on DirectML): one mul_ and one add_ kernel per parameter
        added_calls=(0.0, 2.0)),
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
        "dmlprof.replacements.ops.group_norm (native forward, backward from mul/mean/sum)",
        # models/groupnorm_net.py: 328 more device calls for its 8 GroupNorm layers (forward and backward)
        added_calls=(41.0, 0.0)),
    Replacement(
        "grid_sample", ("aten::grid_sampler_2d", "aten::grid_sampler_2d_backward"),
        f"F.grid_sample (bilinear, zeros or border padding): {_PATCH} or call "
        "dmlprof.replacements.ops.grid_sample (indexing + index_put with accumulate, native both ways)"),
    Replacement(
        "embedding_bag",
        ("aten::_embedding_bag", "aten::_embedding_bag_forward_only", "aten::_embedding_bag_backward",
         "aten::_embedding_bag_dense_backward", "aten::_embedding_bag_per_sample_weights_backward"),
        f"nn.EmbeddingBag / F.embedding_bag (sum, mean): {_PATCH} or call "
        "dmlprof.replacements.ops.embedding_bag (embedding + index_put with accumulate)",
        # models/recommender.py: 41 more device calls for its 2 bags' 4 calls (forward, dense backward) and the
        # index_add_ a sum bag's backward sends to the CPU (1 of the 41: see index_add)
        added_calls=(10.0, 0.0)),
    Replacement(
        "logsigmoid", ("aten::log_sigmoid_forward", "aten::log_sigmoid_backward", "aten::log_sigmoid"),
        "F.logsigmoid, reached by BCE-with-logits: dmlprof.replacements.ops.logsigmoid / "
        f".binary_cross_entropy_with_logits (softplus, native); the loss is outside the model, so use {_WITH}",
        # models/recommender.py: 11 more device calls for its one BCE-with-logits loss
        added_calls=(11.0, 0.0)),
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
                "index_select (its backward is index_put_ with accumulate, native)",
                added_calls=(1.0, 0.0)),  # the one index_put_ in its place
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
                f"1-D linear interpolation: {_PATCH} or dmlprof.replacements.ops.interpolate_bilinear (one matmul; "
                "not F.interpolate(mode='bilinear'), whose values are wrong on DirectML)"),
    Replacement("roll", ("aten::roll",), f"torch.roll (e.g. shifted windows): {_PATCH} or narrow + cat"),
    Replacement("trunc_frac", ("aten::trunc", "aten::frac", "aten::fix"),
                f"torch.trunc / frac: {_PATCH} or where(x >= 0, floor(x), ceil(x))"),
    Replacement("nan_to_num", ("aten::nan_to_num",), f"torch.nan_to_num: {_PATCH} or where(isnan/isinf)"),
    Replacement("logit", ("aten::logit", "aten::logit_backward"), f"torch.logit: {_PATCH} or log(p) - log1p(-p)"),
    Replacement("bucketize", ("aten::bucketize",),
                f"torch.bucketize (1-D boundaries): {_PATCH} or (x.unsqueeze(-1) > boundaries).sum(-1)"),
    Replacement("huber_loss", ("aten::huber_loss", "aten::huber_loss_backward"),
                f"F.huber_loss: use {_WITH}, or delta * F.smooth_l1_loss(beta=delta) (native)"),
    Replacement("scatter_reduce", ("aten::scatter_reduce", "aten::scatter_reduce_"),
                "tensor.scatter_reduce / scatter_reduce_ (a graph network's mean, amax or amin aggregation) falls "
                "back: for sum use scatter_add_ (native); for mean divide that sum by the counts (scatter_add_ of "
                "ones, clamped to at least 1); amax, amin and prod have no native form on DirectML: aggregate by "
                "sum or mean where the model allows, else they run on the CPU"),
)


@dataclass(frozen=True)
class InContext:
    """Advice for a fallback op that depends on what the user called, or on the phase the calls ran in.

    ``called``: the hotspot's own ops (what reached the dispatcher from the user's code) it applies to;
    ``phase``: it applies where the calls ran in this phase; ``outside``: where none did.
    """

    name: str
    removes: tuple
    how: str
    called: tuple = ()
    phase: Optional[str] = None
    outside: Optional[str] = None

    def applies(self, called: Optional[str], phases) -> bool:
        if self.called and (called is None or normalize_op(called).split(".", 1)[0] not in self.called):
            return False
        if self.phase is not None and self.phase not in phases:
            return False
        return self.outside is None or (bool(phases) and self.outside not in phases)


IN_CONTEXT = (
    InContext("index_add called", ("aten::index_add",),
              "tensor.index_add_ / index_add (index_add.out) falls back: accumulate with index_put_ instead, "
              "x.index_put_((index,), source, accumulate=True) along dim 0 (for another dim, on x.movedim(dim, 0) "
              "and source.movedim(dim, 0)); native on DirectML, and so is its backward",
              called=("aten::index_add", "aten::index_add_")),
    InContext("lerp outside the optimizer", ("aten::lerp", "aten::_foreach_lerp", "aten::_foreach_lerp_"),
              "lerp outside the optimizer step, usually a running average of the weights (torch.optim.swa_utils."
              "AveragedModel's default and get_ema_multi_avg_fn call torch._foreach_lerp_): it falls back once per "
              "parameter per update, and patching the optimizer does not reach it. Give AveragedModel an avg_fn "
              "of native ops instead, avg_fn=lambda avg, p, n: avg * decay + p * (1 - decay) for an EMA "
              "((avg * n + p) / (n + 1) for SWA), or update your own average with mul_ and add_",
              outside="optimizer"),
    InContext("complex parameters in the optimizer", ("aten::view_as_real", "aten::view_as_complex"),
              "the optimizer views complex parameters as real pairs at every step (view_as_real), which falls back, "
              "and DirectML cannot hold complex tensors at all: keep such parameters real, as (..., 2) pairs "
              "(nn.Parameter(torch.view_as_real(w).clone())), and do the complex arithmetic on the pair inside "
              "forward",
              phase="optimizer"),
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


def advice_for(op: str, called: Optional[str] = None, phases=()) -> Optional[str]:
    """One line: the replacement that removes this fallback op and how to apply it, or ``None``.

    ``called`` (the op the user's code called, whose composite reached ``op``) and ``phases`` (where
    the calls ran) pick the advice that names what the user wrote, where it differs.
    """
    name = normalize_op(op)
    base = name.split(".", 1)[0]
    for advice in IN_CONTEXT:
        if (name in advice.removes or base in advice.removes) and advice.applies(called, tuple(phases)):
            return advice.how
    found = replacement_for(op)
    return found.how if found else None


def advice_for_hotspot(ops) -> Optional[str]:
    """Advice for a hotspot (its inner fallback ops): the first op that has a replacement."""
    for op in ops:
        tip = advice_for(op)
        if tip:
            return tip
    return None


#: what to do about an op whose results are wrong on DirectML, by op (dispatcher name without overload)
WRONG_RESULTS_ADVICE = {
    "aten::upsample_bilinear2d": (
        "F.interpolate(mode='bilinear') gives wrong values on DirectML: dmlprof.replacements.ops.interpolate_bilinear "
        f"computes it with two matmuls (native, exact), and {_PATCH} swaps it in"),
    "aten::upsample_bilinear2d_backward": (
        f"bilinear interpolation's gradient: {_PATCH} swaps F.interpolate(mode='bilinear') for "
        "dmlprof.replacements.ops.interpolate_bilinear (two matmuls, their backward native)"),
    "aten::mul": (
        "a float tensor times a bool tensor comes back as a bool tensor on DirectML (its type promotion): cast the "
        "mask first, x * mask.to(x.dtype), or use torch.where(mask, x, 0)"),
    "aten::max_pool2d_with_indices": (
        "max pooling with ceil_mode=True gives a smaller output on DirectML: pad the input yourself (F.pad to a "
        "multiple of the stride) and pool with ceil_mode=False"),
    "aten::scatter_add": (
        "scatter_add keeps the last write instead of the sum where indices repeat, and so does gather's backward: "
        "accumulate with out.index_put_((index,), values, accumulate=True), and read with indexing "
        "(x[rows, index]) instead of gather where indices repeat"),
}


def advice_for_wrong_results(op: str) -> Optional[str]:
    """What to do about an op whose device results are wrong (any overload), or None."""
    return WRONG_RESULTS_ADVICE.get(normalize_op(op).split(".", 1)[0])
