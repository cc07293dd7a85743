"""Applying the replacements: ``patch(model, optimizer)``, ``replaced()``, and undoing them.

Two mechanisms, both undoable:

* a :class:`~torch.overrides.TorchFunctionMode` (``replaced()``) that sends the
  torch and ``torch.nn.functional`` calls listed in ``HANDLERS`` to their
  replacements in :mod:`dmlprof.replacements.ops`, and anything it does not
  support (an ``out=`` argument, a mode the replacement lacks) to the original;
* module and optimizer swaps: ``patch`` changes the class of each supported
  module (GroupNorm, EmbeddingBag, LSTM, GRU, their cells, ELU, Upsample) and of
  the optimizer to a subclass that runs the original code under that mode, and
  wraps the model's own ``forward`` the same way. Parameters, buffers, hooks,
  optimizer state and ``state_dict`` keys stay exactly as they were (the
  objects are the same), so checkpoints load either way.

The optimizer part is the DirectML-safe optimizer step: Adam/AdamW's moment
update ``lerp`` becomes ``mul_``/``add_`` (native), with the optimizer's state
kept, instead of recreating the optimizer every epoch (which resets its moments
and leaves the fallback in place).
"""
from __future__ import annotations

import functools
import threading
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from dmlprof.replacements import ops


class _Decline(Exception):
    """The replacement does not cover these arguments: run the original."""


def _no_out(kwargs):
    if kwargs.get("out") is not None:
        raise _Decline


def _h_group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    return ops.group_norm(input, num_groups, weight, bias, eps)


def _h_grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    if mode != "bilinear" or padding_mode not in ("zeros", "border") or input.dim() != 4:
        raise _Decline
    return ops.grid_sample(input, grid, mode, padding_mode, align_corners)


def _h_embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                     mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    if mode not in ("sum", "mean") or max_norm is not None or sparse or scale_grad_by_freq:
        raise _Decline
    if input.dim() == 1 and offsets is None:
        raise _Decline
    return ops.embedding_bag(input, weight, offsets, None, norm_type, False, mode, False, per_sample_weights,
                             include_last_offset, padding_idx)


def _h_interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                   recompute_scale_factor=None, antialias=False):
    if antialias:
        raise _Decline
    if mode == "nearest" and input.dim() == 3:
        return ops.interpolate_nearest1d(input, size, scale_factor, recompute_scale_factor)
    if (mode, input.dim()) in (("linear", 3), ("bilinear", 4)):  # bilinear's kernel gives wrong values on DirectML
        return ops.interpolate_bilinear(input, size, scale_factor, align_corners, recompute_scale_factor)
    raise _Decline


def _declining(fn):
    """Handler that runs ``fn`` and sends what it does not cover (NotImplementedError) to the original."""
    def handler(*args, **kwargs):
        if kwargs.get("out") is not None:
            raise _Decline
        kwargs.pop("out", None)
        try:
            return fn(*args, **kwargs)
        except NotImplementedError:
            raise _Decline from None
    return handler


def _h_huber(input, target, reduction="mean", delta=1.0, weight=None):
    if weight is not None:
        raise _Decline
    return ops.huber_loss(input, target, reduction, delta)


def _h_cumprod(input, dim, *, dtype=None, out=None):
    if out is not None:
        raise _Decline
    return ops.cumprod(input, dim, dtype=dtype)


def _h_eye(n, m=None, *, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
    if out is not None or layout not in (None, torch.strided) or pin_memory or not isinstance(n, int):
        raise _Decline
    if m is not None and not isinstance(m, int):
        raise _Decline
    return ops.eye(n, m, dtype=dtype, device=device, requires_grad=requires_grad)


def _h_repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    if repeats is None and not isinstance(input, torch.Tensor):
        raise _Decline
    return ops.repeat_interleave(input, repeats, dim, output_size=output_size)


def _h_count_nonzero(input, dim=None):
    return ops.count_nonzero(input, dim)


def _variance(fn):
    def handler(input, *args, **kwargs):
        _no_out(kwargs)
        kwargs.pop("out", None)
        try:
            return fn(input, *args, **kwargs)
        except NotImplementedError:
            raise _Decline from None
    return handler


def _h_clamp(input, min=None, max=None, *, out=None):
    if out is not None or not (isinstance(min, torch.Tensor) or isinstance(max, torch.Tensor)):
        raise _Decline
    return ops.clamp(input, min, max)


def _h_clamp_(input, min=None, max=None):
    if not (isinstance(min, torch.Tensor) or isinstance(max, torch.Tensor)):
        raise _Decline
    return input.copy_(ops.clamp(input, min, max))


def _h_clamp_min(input, bound, *, out=None):
    if out is not None or not isinstance(bound, torch.Tensor):
        raise _Decline
    return ops.clamp(input, min=bound)


def _h_clamp_max(input, bound, *, out=None):
    if out is not None or not isinstance(bound, torch.Tensor):
        raise _Decline
    return ops.clamp(input, max=bound)


def _h_lerp(input, end, weight, *, out=None):
    if out is not None:
        raise _Decline
    return ops.lerp(input, end, weight)


def _h_rnn(cell):
    def handler(*args, **kwargs):
        # Unpacked form (what nn.LSTM/nn.GRU pass for a plain tensor):
        # (input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first).
        if kwargs or len(args) != 9 or not isinstance(args[3], bool) or not isinstance(args[2], (list, tuple)):
            raise _Decline
        input, hx, params = args[0], args[1], list(args[2])
        if cell == "lstm":
            hx = tuple(hx)
        try:
            return ops.rnn_stack(cell, input, hx, params, *args[3:])
        except NotImplementedError:
            raise _Decline from None
    return handler


def _h_pad(input, pad, mode="constant", value=None):
    if mode != "constant" or any(p < 0 for p in pad):
        raise _Decline
    try:
        return ops.pad_constant(input, pad, 0.0 if value is None else value)
    except NotImplementedError:
        raise _Decline from None


def _h_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    if enable_gqa or (is_causal and attn_mask is not None):
        raise _Decline
    return ops.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale)


def _h_lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return ops.lstm_cell(input, tuple(hx), w_ih, w_hh, b_ih, b_hh)


#: function -> handler with the function's signature (raising _Decline for what it does not cover)
HANDLERS: dict = {
    F.group_norm: _h_group_norm,
    F.grid_sample: _h_grid_sample,
    F.embedding_bag: _h_embedding_bag,
    F.logsigmoid: ops.logsigmoid,
    F.binary_cross_entropy_with_logits: ops.binary_cross_entropy_with_logits,
    F.binary_cross_entropy: ops.binary_cross_entropy,
    F.ctc_loss: ops.ctc_loss,
    F.interpolate: _h_interpolate,
    F.pad: _h_pad,
    F.elu: ops.elu,
    F.selu: ops.selu,
    F.celu: ops.celu,
    F.softshrink: ops.softshrink,
    F.hardshrink: ops.hardshrink,
    F.huber_loss: _h_huber,
    F.scaled_dot_product_attention: _h_sdpa,
    F.glu: ops.glu,
    F.mish: ops.mish,
    torch._weight_norm: ops.weight_norm,
    F.unfold: _declining(ops.unfold),
    F.fold: _declining(ops.fold),
    F.adaptive_max_pool2d: _declining(ops.adaptive_max_pool2d),
    torch.roll: _declining(ops.roll),
    torch.Tensor.roll: _declining(ops.roll),
    torch.trunc: _declining(ops.trunc),
    torch.fix: _declining(ops.trunc),
    torch.Tensor.trunc: _declining(ops.trunc),
    torch.frac: _declining(ops.frac),
    torch.Tensor.frac: _declining(ops.frac),
    torch.nan_to_num: _declining(ops.nan_to_num),
    torch.Tensor.nan_to_num: _declining(ops.nan_to_num),
    torch.logit: _declining(ops.logit),
    torch.Tensor.logit: _declining(ops.logit),
    torch.bucketize: _declining(ops.bucketize),
    torch.cumprod: _h_cumprod,
    torch.Tensor.cumprod: _h_cumprod,
    torch.eye: _h_eye,
    torch.repeat_interleave: _h_repeat_interleave,
    torch.Tensor.repeat_interleave: _h_repeat_interleave,
    torch.count_nonzero: _h_count_nonzero,
    torch.Tensor.count_nonzero: _h_count_nonzero,
    torch.std: _variance(ops.std),
    torch.Tensor.std: _variance(ops.std),
    torch.var_mean: _variance(ops.var_mean),
    torch.clamp: _h_clamp,
    torch.clip: _h_clamp,
    torch.Tensor.clamp: _h_clamp,
    torch.Tensor.clip: _h_clamp,
    torch.Tensor.clamp_: _h_clamp_,
    torch.Tensor.clip_: _h_clamp_,
    torch.clamp_min: _h_clamp_min,
    torch.clamp_max: _h_clamp_max,
    torch.Tensor.clamp_min: _h_clamp_min,
    torch.Tensor.clamp_max: _h_clamp_max,
    torch.lerp: _h_lerp,
    torch.Tensor.lerp: _h_lerp,
    torch.Tensor.lerp_: ops.lerp_,
    torch._foreach_lerp_: ops.foreach_lerp_,
    torch._foreach_lerp: ops.foreach_lerp,
    torch._foreach_maximum_: _declining(ops.foreach_maximum_),
    torch._foreach_minimum_: _declining(ops.foreach_minimum_),
    torch._foreach_clamp_min_: _declining(ops.foreach_maximum_),
    torch._foreach_clamp_max_: _declining(ops.foreach_minimum_),
    torch.lstm: _h_rnn("lstm"),
    torch.gru: _h_rnn("gru"),
    torch.lstm_cell: _h_lstm_cell,
    torch.gru_cell: ops.gru_cell,
}

_state = threading.local()


def _depth() -> int:
    return getattr(_state, "depth", 0)


class ReplacementMode(TorchFunctionMode):
    """Sends the calls in ``HANDLERS`` to their DirectML-native replacements; counts what it replaced."""

    def __init__(self):
        super().__init__()
        self.replaced_calls: dict = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        handler = HANDLERS.get(func)
        if handler is not None:
            try:
                result = handler(*args, **kwargs)
            except _Decline:
                pass
            else:
                name = getattr(func, "__name__", None) or str(func)
                self.replaced_calls[name] = self.replaced_calls.get(name, 0) + 1
                return result
        return func(*args, **kwargs)

    def __enter__(self):
        _state.depth = _depth() + 1
        return super().__enter__()

    def __exit__(self, *exc):
        _state.depth = _depth() - 1
        return super().__exit__(*exc)


def replaced() -> ReplacementMode:
    """Context manager: inside it, torch/functional calls that fall back on DirectML run their replacements.

    >>> with dmlprof.replacements.replaced():
    ...     loss = F.binary_cross_entropy_with_logits(model(x), y)
    """
    return ReplacementMode()


def replaced_call(fn: Callable) -> Callable:
    """``fn`` that runs under the replacements (a loss outside the model, for instance)."""
    return functools.partial(_run_replaced, fn)


def _run_replaced(fn: Callable, *args, **kwargs):
    if _depth():  # already inside a replacement mode: do not stack a second one
        return fn(*args, **kwargs)
    with ReplacementMode():
        return fn(*args, **kwargs)


#: after this many calls in a row that replaced nothing, a patched forward/step stops entering the mode
IDLE_CALLS_BEFORE_BYPASS = 3


def _run_adaptive(owner, fn: Callable, *args, **kwargs):
    """``_run_replaced`` for a model's forward or an optimizer's step, which may have nothing to
    replace (SGD, a model without fallbacks): once a few calls in a row replaced nothing, later
    calls skip the mode and its per-call cost. Replacing is only ever a speed-up, so a rare code
    path left unreplaced stays correct."""
    idle = getattr(owner, "_dmlprof_idle_calls", 0)
    if _depth() or idle >= IDLE_CALLS_BEFORE_BYPASS:
        return fn(*args, **kwargs)
    mode = ReplacementMode()
    with mode:
        result = fn(*args, **kwargs)
    object.__setattr__(owner, "_dmlprof_idle_calls", 0 if mode.replaced_calls else idle + 1)
    return result


# --------------------------------------------------------------------------- module and optimizer swaps
SWAPPED_MODULES = (torch.nn.GroupNorm, torch.nn.EmbeddingBag, torch.nn.LSTM, torch.nn.GRU, torch.nn.LSTMCell,
                   torch.nn.GRUCell, torch.nn.ELU, torch.nn.Upsample, torch.nn.LogSigmoid, torch.nn.BCELoss,
                   torch.nn.BCEWithLogitsLoss, torch.nn.CTCLoss, torch.nn.HuberLoss, torch.nn.GLU, torch.nn.Mish,
                   torch.nn.SELU, torch.nn.CELU, torch.nn.Softshrink, torch.nn.Hardshrink,
                   torch.nn.Unfold, torch.nn.Fold, torch.nn.AdaptiveMaxPool2d)


@functools.lru_cache(maxsize=None)
def safe_class(cls: type) -> type:
    """A subclass of a module or optimizer class whose forward/step runs under the replacements.

    Instances keep everything (parameters, state, hooks); only the class changes,
    so ``isinstance(obj, cls)`` still holds and state dicts are unchanged.
    """
    method = "step" if issubclass(cls, torch.optim.Optimizer) else "forward"
    original = getattr(cls, method)

    if method == "step":
        def replaced_method(self, *args, **kwargs):
            return _run_adaptive(self, original, self, *args, **kwargs)
    else:
        def replaced_method(self, *args, **kwargs):
            return _run_replaced(original, self, *args, **kwargs)

    replaced_method.__doc__ = getattr(original, "__doc__", None)
    replaced_method.__name__ = method
    if method == "step":
        replaced_method.hooked = True  # torch's step-hook wrapper is already in ``original``
    name = f"DmlSafe{cls.__name__}"
    safe = type(name, (cls,), {method: replaced_method, "__module__": __name__, "__qualname__": name,
                               "_dmlprof_original_class": cls})
    globals().setdefault(name, safe)  # so pickling a patched model (torch.save(model)) finds the class
    return safe


def __getattr__(name: str):
    """Unpickling a patched model in a fresh process: build ``DmlSafe<Class>`` on demand."""
    if name.startswith("DmlSafe"):
        base = name[len("DmlSafe"):]
        for cls in SWAPPED_MODULES + tuple(vars(torch.optim).values()):
            if isinstance(cls, type) and cls.__name__ == base:
                return safe_class(cls)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Patch:
    """What ``patch`` changed; ``undo()`` puts it back. Also a context manager: inside its
    ``with`` block every torch call runs under the replacements too (losses included);
    leaving the block undoes everything."""

    def __init__(self):
        self.applied: list = []  # {"target", "what"}
        self._undo: list = []
        self._mode: Optional[ReplacementMode] = None

    def _record(self, target: str, what: str, undo: Callable) -> None:
        self.applied.append({"target": target, "what": what})
        self._undo.append(undo)

    def undo(self) -> None:
        """Restore every swapped class, wrapped forward and optimizer setting (last change first)."""
        while self._undo:
            self._undo.pop()()
        self.applied = []

    def __enter__(self) -> "Patch":
        self._mode = ReplacementMode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        try:
            if self._mode is not None:
                self._mode.__exit__(*exc)
                self._mode = None
        finally:
            self.undo()
        return False

    def __repr__(self) -> str:
        return f"<dmlprof Patch: {len(self.applied)} changes>"


def patch(model: Optional[torch.nn.Module] = None, optimizer: Optional[torch.optim.Optimizer] = None) -> Patch:
    """Swap a model's modules and its optimizer for DirectML-native replacements; returns an undoable Patch.

    * modules of the types in ``SWAPPED_MODULES`` (exact types) get a class whose
      forward runs under the replacements; the model's own forward is wrapped the
      same way, so functional calls inside it (``F.grid_sample``, ``torch.cumprod``...)
      are replaced as well;
    * the optimizer's step runs with ``lerp`` as mul/add (state kept); a fused
      Adam/AdamW is switched to its foreach path (``_fused_adamw_`` falls back whole).

    Use ``with dmlprof.patch(model, optimizer): ...`` to also cover code outside
    the model (the loss) and to undo on leaving, or call ``.undo()`` yourself.
    """
    handle = Patch()
    if model is not None:
        if not isinstance(model, torch.nn.Module):
            from dmlprof.errors import UsageError

            raise UsageError(f"patch() wants an nn.Module, got {type(model).__name__}")
        for name, module in model.named_modules():
            if type(module) in SWAPPED_MODULES:
                _swap_class(handle, module, name or type(module).__name__)
        if type(model) not in SWAPPED_MODULES:
            _wrap_forward(handle, model)
    if optimizer is not None:
        patch_optimizer(optimizer, handle)
    return handle


def _swap_class(handle: Patch, obj, label: str) -> None:
    original = type(obj)
    obj.__class__ = safe_class(original)

    def undo(obj=obj, original=original):
        obj.__class__ = original
        vars(obj).pop("_dmlprof_idle_calls", None)

    handle._record(label, f"{original.__name__} -> {obj.__class__.__name__}", undo)


class _ReplacedForward:
    """A model's forward run under the replacements; an object (not a closure) so that a patched
    model still pickles (``torch.save(model)``)."""

    def __init__(self, module: torch.nn.Module, previous=None):
        self.module = module
        self.previous = previous  # an instance-level forward the model had before patching, if any

    def __call__(self, *args, **kwargs):
        if self.previous is not None:
            return _run_adaptive(self, self.previous, *args, **kwargs)
        return _run_adaptive(self, type(self.module).forward, self.module, *args, **kwargs)

    def __reduce__(self):
        return (_ReplacedForward, (self.module, self.previous))


def _wrap_forward(handle: Patch, model: torch.nn.Module) -> None:
    previous = vars(model).get("forward")
    model.forward = _ReplacedForward(model, previous)

    def undo():
        if previous is not None:
            model.forward = previous
        else:
            vars(model).pop("forward", None)

    handle._record(type(model).__name__, "forward runs under the replacements (functional calls)", undo)


def patch_optimizer(optimizer: torch.optim.Optimizer, handle: Optional[Patch] = None) -> Patch:
    """Make an optimizer's step DirectML-safe in place, keeping its state (moments, step counts).

    Its ``lerp`` (Adam/AdamW's first-moment update, which falls back once per
    parameter per step) runs as ``mul_``/``add_``; ``fused=True`` is switched to
    the foreach path. Recreating the optimizer each epoch is not a fix: it
    resets the moments and leaves the fallback in place.
    """
    handle = handle or Patch()
    if not isinstance(optimizer, torch.optim.Optimizer):
        from dmlprof.errors import UsageError

        raise UsageError(f"patch_optimizer() wants a torch.optim.Optimizer, got {type(optimizer).__name__}")
    fused_groups = [g for g in optimizer.param_groups if g.get("fused")]
    if fused_groups:
        for group in fused_groups:
            group["fused"], group["foreach"] = False, True

        def undo_fused(groups=fused_groups):
            for group in groups:
                group["fused"], group["foreach"] = True, None

        handle._record(type(optimizer).__name__, "fused=True -> foreach (the fused kernel falls back whole)", undo_fused)
    if not hasattr(type(optimizer), "_dmlprof_original_class"):
        _swap_class(handle, optimizer, type(optimizer).__name__)
    return handle
