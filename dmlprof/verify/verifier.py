"""The live check behind ``scan --verify``: every device op call recomputed on the CPU.

The recorder's dispatch mode hands each call to :meth:`Verifier.before`
(copies of its inputs on the host, taken before the call because in-place and
``out=`` ops overwrite them) and, once the device has run it, to
:meth:`Verifier.after`, which runs the same overload on the copies and compares
every output and every tensor the call wrote with dtype-aware tolerances
(:mod:`dmlprof.verify.tolerance`). Because the CPU recomputes from the device's
own inputs, an error is flagged at the op that made it, not at every op
downstream. Around ``optimizer.step()`` it snapshots the parameters and reports
by name those that did not change although their gradient was non-zero.
"""
from __future__ import annotations

import threading
from collections import Counter
from typing import Optional

import torch
from torch.utils import _pytree as pytree

from dmlprof.record.attribution import user_source_line
from dmlprof.record.frame import op_name
from dmlprof.verify import tolerance as tol

#: divergent calls kept in full (all are counted)
MAX_DIVERGENT_RECORDS = 200

# Random ops: the device draws its own numbers. Names without the namespace.
_RANDOM = frozenset({
    "bernoulli", "bernoulli_", "dropout", "native_dropout", "_fused_dropout", "feature_dropout", "alpha_dropout",
    "feature_alpha_dropout", "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm",
    "normal", "normal_", "uniform_", "random_", "exponential_", "geometric_", "cauchy_", "log_normal_",
    "multinomial", "poisson", "binomial", "rrelu_with_noise", "rrelu_with_noise_", "_standard_gamma",
    "_sample_dirichlet", "_fused_rms_norm_dropout",
})
# Outputs whose contents are undefined (fresh memory, resized storage).
_UNINITIALISED = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted", "resize_",
    "resize_as_", "_resize_output_", "set_", "_empty_affine_quantized", "_empty_per_channel_affine_quantized",
})
# Writes at possibly repeated indices without accumulating: which write wins is unspecified.
_UNORDERED_WRITES = frozenset({"index_put", "index_put_", "_index_put_impl_", "_index_put_impl", "put", "put_"})
_SCATTER = frozenset({"scatter", "scatter_"})
# Index outputs of these may pick a different one of several equal values.
_TIE_INDEX_OPS = frozenset({
    "sort", "topk", "max", "min", "argmax", "argmin", "kthvalue", "mode", "median", "nanmedian", "argsort",
    "msort", "cummax", "cummin", "_cummax_helper", "_cummin_helper", "max_pool2d_with_indices",
    "max_pool3d_with_indices", "adaptive_max_pool2d", "adaptive_max_pool3d",
})
# Take the indices a device's pooling kernel made, and index memory with them unchecked on the CPU: torch-directml's
# max-pool indices are flat over the whole tensor, not per plane, and the CPU backward then writes out of bounds
# (measured: --verify --device dml of a segmentation model died of SIGABRT in max_pool2d_with_indices_backward).
_DEVICE_INDEX_INPUTS = frozenset({
    "max_pool2d_with_indices_backward", "max_pool3d_with_indices_backward", "max_unpool2d", "max_unpool3d",
    "fractional_max_pool2d_backward", "fractional_max_pool3d_backward", "adaptive_max_pool2d_backward",
    "adaptive_max_pool3d_backward",
})
# Outputs that are a kernel's private scratch (bytes its backward reads), not values.
_OPAQUE_OUTPUTS = {"mkldnn_rnn_layer": {3}, "_cudnn_rnn": {3, 4}, "miopen_rnn": {4}}
# Outputs undefined for some arguments, which nothing reads: (the argument's position, its value, the outputs).
# nll_loss's total_weight for reduction="none" (CPU 0.0, DirectML the weight sum: the loss itself is identical,
# measured on realdml; --verify of such a loss failed on it); eval-mode batch norm's saved mean and invstd.
_UNREAD_OUTPUTS = {"nll_loss_forward": (3, 0, {1}), "nll_loss2d_forward": (3, 0, {1}),
                   "native_batch_norm": (5, False, {1, 2})}
_SKIP_REASONS = {
    "random": "random (the device draws its own numbers)",
    "uninitialised": "output memory is uninitialised",
    "view": "view or metadata only (no data computed)",
    "unordered": "writes at possibly repeated indices (the winner is unspecified)",
    "cpu_raised": "the CPU kernel raised on the same inputs",
    "device_indices": "takes indices a device kernel made (max pooling's), whose layout is the device's own: the "
                      "CPU kernel would index out of bounds with them",
}


#: why a call's values are not compared, by reason key (``scan --confirm`` says it per call)
SKIP_REASONS = _SKIP_REASONS

_enable_record_function = getattr(torch._C._autograd, "_enable_record_function", None)


class _Unobserved:
    """The verifier's own copies and CPU runs hidden from RecordFunction observers.

    torch.profiler, running alongside, would otherwise count them as the
    model's ops (and the emulated device's fault injection would see them).
    """

    def __enter__(self):
        if _enable_record_function is not None:
            _enable_record_function(False)

    def __exit__(self, *exc):
        if _enable_record_function is not None:
            _enable_record_function(True)
        return False


_UNOBSERVED = _Unobserved()


_Tensor = torch.Tensor
_CPU = torch.device("cpu")


class _Plan:
    """What the verifier does with every call of one overload, decided once."""

    __slots__ = ("name", "skip", "check_indices", "written", "fresh_returns_mask", "tie", "unread")

    def __init__(self, func):
        schema = func._schema
        self.name = op_name(func)
        base = schema.name.split("::", 1)[-1]
        try:
            tags = func.tags
        except AttributeError:
            tags = ()
        returns = schema.returns
        if base in _RANDOM or torch.Tag.nondeterministic_seeded in tags:
            self.skip = "random"
        elif base in _UNINITIALISED:
            self.skip = "uninitialised"
        elif returns and all(r.alias_info is not None and not r.alias_info.is_write for r in returns):
            self.skip = "view"
        elif base in _DEVICE_INDEX_INPUTS:
            self.skip = "device_indices"
        else:
            self.skip = None
        self.check_indices = base in _UNORDERED_WRITES or base in _SCATTER
        self.written = [(i, a.name) for i, a in enumerate(schema.arguments)
                        if a.alias_info is not None and a.alias_info.is_write]
        opaque = _OPAQUE_OUTPUTS.get(base, ())
        self.fresh_returns_mask = [not (r.alias_info is not None and r.alias_info.is_write) and i not in opaque
                                   for i, r in enumerate(returns)]
        self.tie = base in _TIE_INDEX_OPS
        self.unread = _UNREAD_OUTPUTS.get(base)

    def unread_outputs(self, args) -> frozenset:
        """The outputs of this call that are undefined, given its arguments (:data:`_UNREAD_OUTPUTS`)."""
        if self.unread is None:
            return frozenset()
        position, value, outputs = self.unread
        return frozenset(outputs) if len(args) > position and args[position] == value else frozenset()


def _touches(values, device_type: str) -> bool:
    """Whether any tensor (or list of tensors, or device argument) among ``values`` is on the device."""
    for x in values:
        if isinstance(x, _Tensor):
            if x.device.type == device_type:
                return True
        elif isinstance(x, (list, tuple)):
            for item in x:
                if isinstance(item, _Tensor) and item.device.type == device_type:
                    return True
        elif isinstance(x, torch.device) and x.type == device_type:
            return True
    return False


def _flat(value) -> list:
    """Results as a flat list: a tensor, a number or None, or the items of a list/tuple (one level deep)."""
    if isinstance(value, (list, tuple)):
        out = []
        for item in value:
            out.extend(_flat(item)) if isinstance(item, (list, tuple)) else out.append(item)
        return out
    return [value]


class _Pending:
    __slots__ = ("func", "plan", "cpu_args", "cpu_kwargs", "scale", "in_dtype")

    def __init__(self, func, plan, cpu_args, cpu_kwargs, scale, in_dtype):
        self.func, self.plan, self.cpu_args, self.cpu_kwargs = func, plan, cpu_args, cpu_kwargs
        self.scale, self.in_dtype = scale, in_dtype


class Verifier:
    """Checks a recorder's calls against the CPU; :meth:`result` is the session's ``extras['verify']``."""

    def __init__(self, backend, max_records: int = MAX_DIVERGENT_RECORDS):
        self.device_type = backend.device_type
        self.backend_name = backend.name
        self.max_records = max_records
        self.checked_calls = 0
        self.checked_by_op: Counter = Counter()
        self.skipped: Counter = Counter()  # (op, reason key) -> calls
        self.divergent_calls = 0
        self.divergent: list = []
        self.lost_updates: list = []
        self.optimizer_steps = 0
        self.parameters_checked = 0
        self.parameters_not_expected_to_move = 0
        self.recorder = None
        self._decisions: dict = {}
        self._param_names: dict = {}
        self._snapshots: list = []
        self._hooks: list = []
        self._lock = threading.Lock()

    # -- wiring ------------------------------------------------------------------
    def name_parameters(self, model: torch.nn.Module, root_name: Optional[str] = None) -> None:
        """Names for lost-update reports: ``Root.layer.weight``."""
        root_name = root_name or type(model).__name__
        for name, param in model.named_parameters():
            self._param_names.setdefault(id(param), f"{root_name}.{name}")

    def attach(self, recorder) -> None:
        """Called by the recorder on entry: optimizer hooks on, recorder known (to pause it)."""
        import torch.optim.optimizer as optim

        self.recorder = recorder
        self._hooks = [optim.register_optimizer_step_pre_hook(self._optimizer_pre),
                       optim.register_optimizer_step_post_hook(self._optimizer_post)]

    def detach(self) -> None:
        for handle in self._hooks:
            handle.remove()
        self._hooks = []

    # -- per call ------------------------------------------------------------------
    def _plan(self, func) -> "_Plan":
        plan = self._decisions.get(func)
        if plan is None:
            plan = self._decisions[func] = _Plan(func)
        return plan

    def before(self, func, args, kwargs) -> Optional[_Pending]:
        """Host copies of a device call's inputs, or ``None`` when the call is not checked."""
        device_type = self.device_type
        if not (_touches(args, device_type) or (kwargs and _touches(kwargs.values(), device_type))):
            return None  # nothing of this call is on the device
        plan = self._plan(func)
        decision = plan.skip
        if decision is None and plan.check_indices:
            decision = self._unordered(func, args, kwargs)
        if decision is not None:
            self.skipped[(plan.name, decision)] += 1
            return None
        copies: dict = {}
        # Functional calls leave their inputs as they were: CPU tensors need no copy.
        copy_cpu = bool(plan.written)
        stats = [0, None]  # largest input numel, a representative dtype

        def host(x):
            if isinstance(x, _Tensor):
                copied = copies.get(id(x))
                if copied is None:
                    if x.device.type == "cpu" and not copy_cpu:
                        copied = x.detach()
                    else:
                        copied = x.detach().to("cpu", copy=True)
                    copies[id(x)] = copied
                    if x.numel() > stats[0]:
                        stats[0] = x.numel()
                    if stats[1] is None or x.is_floating_point():
                        stats[1] = x.dtype
                return copied
            if isinstance(x, (list, tuple)):
                return type(x)(host(item) for item in x) if any(isinstance(i, _Tensor) for i in x) else x
            if isinstance(x, torch.device) and x.type == device_type:
                return _CPU
            return x

        with torch.no_grad(), _UNOBSERVED:
            cpu_args = tuple(host(x) for x in args)
            cpu_kwargs = {k: host(v) for k, v in kwargs.items()} if kwargs else {}
        return _Pending(func, plan, cpu_args, cpu_kwargs, stats[0], stats[1])

    def _unordered(self, func, args, kwargs) -> Optional[str]:
        name = func._schema.name.split("::", 1)[-1]
        if name in _UNORDERED_WRITES:
            accumulate = _argument(func, args, kwargs, "accumulate")
            return None if accumulate else "unordered"
        if name in _SCATTER and _argument(func, args, kwargs, "reduce") is None:
            return "unordered"
        return None

    def after(self, pending: _Pending, args, kwargs, out, *, step: int, phase: str, module: str,
              source: str, seq: int) -> None:
        """Recompute on the CPU and compare; divergent calls are kept with where they came from."""
        with _UNOBSERVED:
            self._after(pending, args, kwargs, out, step, phase, module, source, seq)

    def _after(self, pending: _Pending, args, kwargs, out, step, phase, module, source, seq) -> None:
        func, plan = pending.func, pending.plan
        try:
            # Under the call's own grad mode: some kernels return workspaces only when it is on
            # (mkldnn_rnn_layer). The copies do not require grad, so no graph is built.
            reference = func(*pending.cpu_args, **pending.cpu_kwargs)
        except Exception:
            self.skipped[(plan.name, "cpu_raised")] += 1
            return
        problems = []
        # In-place and out= results: the device tensor itself, after the call.
        for index, arg_name in plan.written:
            device_value = args[index] if index < len(args) else kwargs.get(arg_name)
            cpu_value = (pending.cpu_args[index] if index < len(pending.cpu_args)
                         else pending.cpu_kwargs.get(arg_name))
            what = "in-place write to self" if arg_name == "self" else f"write to {arg_name}="
            problems += self._compare_tree(device_value, cpu_value, pending, what, tie_indices=False)
        n_returns = len(plan.fresh_returns_mask)
        device_outs = out if n_returns != 1 else (out,)
        cpu_outs = reference if n_returns != 1 else (reference,)
        if isinstance(device_outs, (tuple, list)) and isinstance(cpu_outs, (tuple, list)):
            unread = plan.unread_outputs(pending.cpu_args)
            for index, fresh in enumerate(plan.fresh_returns_mask):
                if not fresh or index in unread:
                    continue  # the written argument (compared above), a private workspace, an undefined output
                if index >= len(device_outs) or index >= len(cpu_outs):
                    break
                label = f"output {index}" if n_returns > 1 else "output"
                problems += self._compare_tree(device_outs[index], cpu_outs[index], pending, label,
                                               tie_indices=plan.tie)
        with self._lock:
            self.checked_calls += 1
            self.checked_by_op[plan.name] += 1
            if not problems:
                return
            self.divergent_calls += 1
            if len(self.divergent) >= self.max_records:
                return
            if not source and threading.get_ident() == threading.main_thread().ident:
                source = user_source_line(4)
            worst = max(problems, key=lambda p: (p["max_abs_error"] is None, p["max_abs_error"] or 0.0))
            self.divergent.append({
                "seq": seq, "step": step, "phase": phase, "op": plan.name, "module": module, "source": source,
                "what": worst["what"] + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""),
                "reason": worst["reason"],
                "max_abs_error": worst["max_abs_error"], "max_rel_error": worst["max_rel_error"],
                "mismatched": worst["mismatched"], "numel": worst["numel"],
                "rtol": worst["rtol"], "atol": worst["atol"],
                "input_shapes": _shapes((args, kwargs)), "input_dtypes": _dtypes((args, kwargs)),
                "output_shape": worst["shape"], "output_dtype": worst["dtype"],
                "outputs_divergent": [p["what"] for p in problems],
            })

    def _compare_tree(self, device_value, cpu_value, pending: _Pending, what: str, tie_indices: bool) -> list:
        device_leaves = _flat(device_value)
        cpu_leaves = _flat(cpu_value)
        if len(device_leaves) != len(cpu_leaves):
            return [{"what": what, "reason": f"{len(device_leaves)} results on the device, {len(cpu_leaves)} on the CPU",
                     "max_abs_error": None, "max_rel_error": None, "mismatched": 0, "numel": 0, "rtol": 0.0,
                     "atol": 0.0, "shape": [], "dtype": ""}]
        problems = []
        many = isinstance(device_value, (list, tuple))
        for position, (d, c) in enumerate(zip(device_leaves, cpu_leaves)):
            label = f"{what}[{position}]" if many else what
            if isinstance(d, _Tensor) and isinstance(c, _Tensor):
                if tie_indices and not (d.is_floating_point() or d.is_complex()) and d.dtype != torch.bool:
                    continue  # indices among equal values may differ
                with torch.no_grad():
                    host = d.detach().to("cpu") if d.device.type != "cpu" else d.detach()
                    found = tol.compare(host, c, tol.reduction_scale(pending.scale, c.numel()))
                if found is not None:
                    found.update(what=label, shape=list(d.shape), dtype=str(d.dtype).replace("torch.", ""))
                    problems.append(found)
            elif isinstance(d, (bool, int, float, complex)) and isinstance(c, (bool, int, float, complex)):
                found = tol.compare_numbers(d, c, pending.in_dtype)
                if found is not None:
                    found.update(what=label, shape=[], dtype=type(d).__name__)
                    problems.append(found)
            elif d is None or c is None:
                continue  # an optional result (a workspace, a masked-out gradient) one side left out
            elif isinstance(d, _Tensor) != isinstance(c, _Tensor):
                problems.append({"what": label, "reason": f"{type(d).__name__} on the device, {type(c).__name__} on the CPU",
                                 "max_abs_error": None, "max_rel_error": None, "mismatched": 0, "numel": 0,
                                 "rtol": 0.0, "atol": 0.0, "shape": [], "dtype": ""})
        return problems

    # -- optimizer ---------------------------------------------------------------
    def _paused(self):
        recorder = self.recorder

        class _Pause:
            def __enter__(self_):
                self_.was = recorder.active if recorder is not None else None
                if recorder is not None:
                    recorder.active = False

            def __exit__(self_, *exc):
                if recorder is not None:
                    recorder.active = self_.was
                return False

        return _Pause()

    def _name_of(self, param, group_index: int, index: int) -> str:
        name = self._param_names.get(id(param))
        if name is None and self.recorder is not None:
            # Script mode: name from the modules the recorder has seen.
            for module, module_name in list(self.recorder.modules.names.items()):
                for param_name, p in module.named_parameters(recurse=False):
                    self._param_names.setdefault(id(p), f"{module_name}.{param_name}")
            name = self._param_names.get(id(param))
        return name or f"param_groups[{group_index}][{index}]"

    def _optimizer_pre(self, optimizer, args, kwargs) -> None:
        if self.recorder is not None and not self.recorder.active:
            return
        if any(entry[0] is optimizer for entry in self._snapshots):
            # A subclass's step() calling super().step(): both are hooked; the outer one counts.
            self._snapshots.append((optimizer, None, None))
            return
        snapshot = []
        with self._paused(), torch.no_grad(), _UNOBSERVED:
            for group_index, group in enumerate(optimizer.param_groups):
                lr = group.get("lr", None)
                try:
                    lr = float(lr) if lr is not None else None
                except (TypeError, ValueError, RuntimeError):
                    lr = None
                for index, param in enumerate(group["params"]):
                    if param.grad is None or param.grad.is_sparse:
                        continue
                    grad = param.grad.detach().to("cpu", copy=True)
                    if not bool(grad.ne(0).any()):
                        continue
                    before = param.detach().to("cpu", copy=True)
                    snapshot.append((param, group_index, index, before, grad, lr))
        self._snapshots.append((optimizer, type(optimizer).__name__, snapshot))

    def _optimizer_post(self, optimizer, args, kwargs) -> None:
        if not self._snapshots or self._snapshots[-1][0] is not optimizer:
            return
        _, optimizer_name, snapshot = self._snapshots.pop()
        if snapshot is None:
            return
        with self._paused(), torch.no_grad(), _UNOBSERVED:
            self.optimizer_steps += 1
            for param, group_index, index, before, grad, lr in snapshot:
                self.parameters_checked += 1
                after = param.detach().to("cpu")
                if not torch.equal(after, before):
                    continue
                if not _update_representable(before, grad, lr):
                    # lr * grad below half an ulp of every weight (or lr == 0): no change is correct.
                    self.parameters_not_expected_to_move += 1
                    continue
                self.lost_updates.append({
                    "parameter": self._name_of(param, group_index, index), "optimizer": optimizer_name,
                    "step": self.recorder.step if self.recorder is not None else None,
                    "shape": list(param.shape), "dtype": str(param.dtype).replace("torch.", ""),
                    "max_abs_grad": float(grad.abs().max()), "lr": lr,
                })

    # -- result ------------------------------------------------------------------
    def result(self, *, partial: bool = False) -> dict:
        """The verification as plain data (``extras['verify']``, see docs/verify.md)."""
        skipped = {}
        for (op, reason), calls in sorted(self.skipped.items()):
            entry = skipped.setdefault(reason, {"reason": _SKIP_REASONS[reason], "calls": 0, "ops": {}})
            entry["calls"] += calls
            entry["ops"][op] = calls
        return {
            "device_type": self.device_type,
            "backend": self.backend_name,
            "checked_calls": self.checked_calls,
            "checked_ops": len(self.checked_by_op),
            "divergent_calls": self.divergent_calls,
            "divergent": list(self.divergent),
            "divergent_records_capped": self.divergent_calls > len(self.divergent),
            "skipped_calls": sum(self.skipped.values()),
            "skipped": skipped,
            "optimizer_steps": self.optimizer_steps,
            "parameters_checked": self.parameters_checked,
            "parameters_not_expected_to_move": self.parameters_not_expected_to_move,
            "lost_updates": list(self.lost_updates),
            "tolerances": {str(k).replace("torch.", ""): {"rtol": v[0], "atol": v[1]} for k, v in tol.TOLERANCES.items()},
            "partial": bool(partial),
        }


def _update_representable(before: torch.Tensor, grad: torch.Tensor, lr: Optional[float]) -> bool:
    """Whether a plain ``lr * grad`` step would change at least one weight (``lr`` unknown: assume so)."""
    if lr is None:
        return True
    if lr == 0.0 or not before.is_floating_point():
        return False
    eps = torch.finfo(before.dtype).eps
    step = (grad.to(torch.float64).abs() * abs(lr))
    return bool((step > before.to(torch.float64).abs() * eps).any())


def _argument(func, args, kwargs, name: str):
    for index, argument in enumerate(func._schema.arguments):
        if argument.name == name:
            if index < len(args):
                return args[index]
            return kwargs.get(name, argument.default_value if argument.has_default_value() else None)
    return None


def _shapes(tree) -> list:
    return [list(x.shape) for x in pytree.tree_leaves(tree) if isinstance(x, torch.Tensor)]


def _dtypes(tree) -> list:
    return [str(x.dtype).replace("torch.", "") for x in pytree.tree_leaves(tree) if isinstance(x, torch.Tensor)]
