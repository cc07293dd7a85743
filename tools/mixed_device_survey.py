"""Measure, on real torch-directml, which aten calls take a CPU tensor argument beside device tensors.

    source ~/.cache/realdml/env.sh
    until PYTHONPATH=. ~/.cache/dmlprof/venv-torch2.4.1/bin/python tools/mixed_device_survey.py --log s.jsonl; do :; done
    PYTHONPATH=. ~/.cache/dmlprof/venv-torch2.4.1/bin/python tools/mixed_device_survey.py --log s.jsonl --summary

Every OpInfo op of this torch (float32 samples, the first ``--samples`` of each, forward and, where differentiable, backward) and a few calls OpInfo
does not make the way models do (``EXTRA_CALLS``: the forms of re-probe 21, cases 15-17, 23, 25 and 26) run on the
DirectML device under a dispatch mode. For every aten call it sees, the mode first runs the call as given (all on the
device) and then, once per (overload, argument, kind), the same call with that one tensor argument on the CPU: "nd"
(the tensor as it is, of one or more dimensions) and "0d" (a 0-d tensor as it is, or an n-d one's first element as a 0-d
CPU tensor). A variant counts only where the same call all
on the CPU runs (so what it tells is the device's, not the arguments'); its verdict is "accept" or "refuse" with the
error's class and first line. Every step goes to an append-only record (``--log``, JSON lines) before it runs, so a
call that ends the process (torch-directml aborts on some: "terminate called after throwing ... unbox expects Dml")
is recorded as refused with ``aborts`` by the next run, which goes on from the record; a variant after which the
device is lost (DXGI_ERROR_DEVICE_REMOVED) is recorded with ``device_removed`` and the process exits 3 for a fresh
one. ``--summary`` prints ``{overload: {argument: {kind: verdict}}}`` and the counts: the measurement
dmlprof/directml/mixed_devices.py states as a rule.
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

SKIPPED_OPS = {"sgn"}
DEVICE_GONE_EXIT = 3  # the device was lost; run again with --resume  # ends the process on some torch versions (tools/unmarked_writes_survey.py)


class DeviceGone(Exception):
    """The device was lost (DXGI_ERROR_DEVICE_REMOVED): every later call in this process fails."""


def _alive(device) -> bool:
    try:
        return torch.ones(2, device=device).sum().item() == 2.0
    except Exception:  # noqa: BLE001 - a removed device
        return False


def _first_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error).strip().splitlines()[0][:300] if str(error).strip() else ''}"


class MixedDevices(TorchDispatchMode):
    """Tries each aten call's tensor arguments, one at a time, on the CPU (see the module docstring)."""

    def __init__(self, device, found: dict, log):
        super().__init__()
        self.device = device
        self.found = found
        self.log = log  # the append-only record: a variant is written as pending before it runs

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not str(func).startswith("aten::") and not str(func).startswith("aten."):
            return out
        tensors = list(_device_tensors(func, args, kwargs))
        if len(tensors) < 2:  # with its one device tensor on the CPU, the call is a CPU call
            return out
        for place, name, tensor in tensors:
            for kind in ("nd", "0d") if tensor.dim() else ("0d",):
                seen = self.found.setdefault(str(func), {}).setdefault(name, {})
                if kind in seen or (kind == "0d" and tensor.numel() == 0):
                    continue
                key = {"func": str(func), "arg": name, "kind": kind}
                self.log.write({"pending": key})
                verdict = self._variant(func, args, kwargs, place, kind)
                if verdict is not None and verdict["verdict"] == "refuse" and not _alive(self.device):
                    verdict["device_removed"] = True  # DirectML lost the device: a fresh process goes on
                seen[kind] = verdict
                self.log.write({**key, "verdict": verdict})
                if verdict is not None and verdict.get("device_removed"):
                    raise DeviceGone(str(func))
        return out

    def _variant(self, func, args, kwargs, place, kind):
        def on_cpu(tensor):
            cpu = tensor.detach().cpu()
            return cpu.reshape(-1)[0].clone() if kind == "0d" else cpu

        try:  # the same call all on the CPU: is it a call at all?
            cpu_args, cpu_kwargs = _replaced(args, kwargs, place, on_cpu, everything_to_cpu=True)
            func(*cpu_args, **cpu_kwargs)
        except Exception:  # noqa: BLE001 - not a call this op takes
            return None
        try:
            mixed_args, mixed_kwargs = _replaced(args, kwargs, place, on_cpu, everything_to_cpu=False)
            func(*mixed_args, **mixed_kwargs)
        except Exception as error:  # noqa: BLE001 - the device's refusal, the measurement
            return {"verdict": "refuse", "error": _first_line(error)}
        return {"verdict": "accept"}


def _is_device(value) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "privateuseone"


def _device_tensors(func, args, kwargs):
    """``(place, argument name, tensor)`` for every device tensor argument; ``place`` is (args or kwargs, key, item)."""
    for index, argument in enumerate(func._schema.arguments):
        if argument.name in kwargs:
            where, key, value = "kwargs", argument.name, kwargs[argument.name]
        elif index < len(args) and not argument.kwarg_only:
            where, key, value = "args", index, args[index]
        else:
            continue
        if _is_device(value):
            yield (where, key, None), argument.name, value
        elif isinstance(value, (list, tuple)):
            for item, element in enumerate(value):
                if _is_device(element):
                    yield (where, key, item), f"{argument.name}[]", element


def _replaced(args, kwargs, place, on_cpu, everything_to_cpu: bool):
    """Fresh arguments (device tensors cloned, so an in-place variant writes no one's tensor) with ``place`` on the
    CPU, and every other device tensor too where ``everything_to_cpu``."""
    moved = (lambda t: t.detach().cpu().clone()) if everything_to_cpu else (lambda t: t.detach().clone())
    fresh = lambda value: moved(value) if _is_device(value) else value  # noqa: E731
    new_args, new_kwargs = list(tree_map(fresh, list(args))), dict(tree_map(fresh, dict(kwargs)))
    where, key, item = place
    holder = new_args if where == "args" else new_kwargs
    original = (args if where == "args" else kwargs)[key]
    if item is None:
        holder[key] = on_cpu(original)
    else:
        values = list(holder[key])
        values[item] = on_cpu(original[item])
        holder[key] = type(holder[key])(values) if isinstance(holder[key], tuple) else values
    return tuple(new_args), new_kwargs


def _extra_calls(dev):
    """The forms of re-probe 21 (docs/probe21.md cases 15-17, 23, 25, 26), each a function of the device."""
    import torch.nn.functional as F

    h = lambda *shape: torch.randn(*shape).to(dev).requires_grad_()  # noqa: E731
    return {
        "cross_entropy": lambda: F.cross_entropy(h(8, 6), torch.zeros(8, dtype=torch.long).to(dev)),
        "batch_norm_train": lambda: F.batch_norm(h(8, 6), torch.zeros(6).to(dev), torch.ones(6).to(dev),
                                                 torch.ones(6).to(dev), torch.zeros(6).to(dev), training=True),
        "batch_norm_eval": lambda: F.batch_norm(h(8, 6), torch.zeros(6).to(dev), torch.ones(6).to(dev),
                                                torch.ones(6).to(dev), torch.zeros(6).to(dev), training=False),
        "instance_norm": lambda: F.instance_norm(h(8, 6, 3), torch.zeros(6).to(dev), torch.ones(6).to(dev),
                                                 use_input_stats=True),
        "layer_norm": lambda: F.layer_norm(h(8, 6), (6,), torch.ones(6).to(dev), torch.zeros(6).to(dev)),
        "group_norm": lambda: F.group_norm(h(8, 6), 2, torch.ones(6).to(dev), torch.zeros(6).to(dev)),
        "embedding": lambda: F.embedding(torch.zeros(8, dtype=torch.long).to(dev), h(6, 6)),
        "prelu": lambda: F.prelu(h(8, 6), torch.full((1,), 0.2).to(dev)),
        "where": lambda: torch.where(h(8, 6) > 0, h(8, 6), h(6)),
        "masked_fill": lambda: h(8, 6).masked_fill(h(8, 6) < 0, torch.tensor(-0.5).to(dev)),
        "cat": lambda: torch.cat([h(8, 6), h(8, 1)], 1),
        "gather": lambda: h(8, 6).gather(1, torch.zeros(8, 6, dtype=torch.long).to(dev)),
        "index": lambda: h(8, 6)[torch.arange(8).to(dev)],
        "mm": lambda: h(8, 6) @ h(6, 6),
        "linear": lambda: F.linear(h(8, 6), h(6, 6), h(6)),
        "mul": lambda: h(8, 6) * h(8, 6),
        "clamp": lambda: torch.clamp(h(8, 6), min=torch.tensor(-0.5).to(dev)),
        "copy_": lambda: h(8, 6).copy_(h(8, 6)),
    }


def _samples(dev, per_op: int):
    """``(name, make_calls)`` for every op surveyed; the calls are made after the op is recorded as started (making
    some samples on the device ends the process: a complex one)."""
    from torch.testing._internal.common_methods_invocations import op_db

    for name, call in _extra_calls(dev).items():
        yield f"extra:{name}", lambda call=call: [_with_backward(call)]
    for info in op_db:
        if info.name not in SKIPPED_OPS:
            yield f"{info.name}.{info.variant_test_name}".rstrip("."), lambda info=info: _op_calls(info, dev, per_op)


def _op_calls(info, dev, per_op: int) -> list:
    try:
        samples = list(info.sample_inputs(dev, torch.float32, requires_grad=info.supports_autograd))[:per_op]
    except Exception:  # noqa: BLE001 - an OpInfo without float32 samples, or none the device can make
        return []
    return [_with_backward(lambda s=sample, op=info.op: op(s.input, *s.args, **s.kwargs)) for sample in samples]


def _with_backward(call):
    """``call``, then the backward of its outputs that need a gradient (their sum), on the calling thread."""
    def forward_and_backward():
        outs = [o for o in tree_flatten(call())[0] if isinstance(o, torch.Tensor) and o.requires_grad]
        if outs:
            torch.autograd.backward([sum(o.float().sum() for o in outs)])
    return forward_and_backward


class Log:
    """The survey's append-only record (JSON lines), so that a call ending the process loses nothing before it."""

    def __init__(self, path: Path):
        self.path = path

    def write(self, entry: dict) -> None:
        with self.path.open("a") as stream:
            stream.write(json.dumps(entry) + "\n")

    def replay(self) -> tuple:
        """``(found, done ops)``: a variant pending at the end of a run ended the process (recorded as refused so);
        an op started with no variant pending ended it itself (recorded as done, crashed)."""
        found, done, started, pending = {}, set(), None, None
        lines = self.path.read_text().splitlines() if self.path.exists() else []
        for entry in map(json.loads, lines):
            if "start" in entry:
                if started is not None and pending is None:
                    done.add(started)  # the run ended in it, all on the device
                    found.setdefault("_ops_crashed", []).append(started)
                started, pending = entry["start"], None
            elif "pending" in entry:
                pending = entry["pending"]
            elif "done" in entry:
                done.add(entry["done"])
                started = pending = None
            else:
                pending = None
                found.setdefault(entry["func"], {}).setdefault(entry["arg"], {})[entry["kind"]] = entry["verdict"]
            if "pending" not in entry and "start" not in entry and "done" not in entry and entry["verdict"] is None:
                found[entry["func"]][entry["arg"]].pop(entry["kind"])
                found[entry["func"]][entry["arg"]].setdefault("_invalid", []).append(entry["kind"])
        if pending is not None:
            verdict = {"verdict": "refuse", "error": "the process ended (abort) in the call", "aborts": True}
            found.setdefault(pending["func"], {}).setdefault(pending["arg"], {})[pending["kind"]] = verdict
            self.write({**pending, "verdict": verdict})
        elif started is not None:
            done.add(started)
            found.setdefault("_ops_crashed", []).append(started)
            self.write({"done": started})
        return found, done


def survey(log: Log, per_op: int) -> None:
    import torch_directml

    dev = torch_directml.device()
    torch.autograd.set_multithreading_enabled(False)  # backward on this thread, under the mode
    found, done = log.replay()
    for name, make_calls in _samples(dev, per_op):
        if name in done:
            continue
        log.write({"start": name})
        for call in make_calls():
            try:
                with MixedDevices(dev, found, log):
                    call()
            except DeviceGone:  # a variant removed the device: this op again in a fresh process
                sys.exit(DEVICE_GONE_EXIT)
            except Exception:  # noqa: BLE001 - a sample the device refuses all on the device
                pass
            if not _alive(dev):  # the call itself, all on the device, removed it
                log.write({"done": name})
                sys.exit(DEVICE_GONE_EXIT)
        log.write({"done": name})


def summary(log: Log) -> dict:
    """``{overload: {argument: {kind: verdict}}}`` and the counts, from the record."""
    found, done = log.replay()
    crashed = found.pop("_ops_crashed", [])
    verdicts = [v for arguments in found.values() for kinds in arguments.values()
                for kind, v in kinds.items() if kind != "_invalid"]
    counts = {"ops_surveyed": len(done), "ops_crashed_all_on_device": sorted(crashed), "overloads": len(found),
              "variants": len(verdicts), "accept": sum(v["verdict"] == "accept" for v in verdicts),
              "refuse": sum(v["verdict"] == "refuse" for v in verdicts),
              "aborts": sum(bool(v.get("aborts")) for v in verdicts),
              "device_removed": sum(bool(v.get("device_removed")) for v in verdicts)}
    return {"counts": counts, "calls": {op: found[op] for op in sorted(found)}}


def _verdict_word(verdict: dict) -> str:
    """A measured verdict as dmlprof/directml/mixed_devices.py reads it."""
    if verdict["verdict"] == "accept":
        return "accept"
    error = verdict["error"]
    if verdict.get("aborts"):
        return "aborts"
    for marker, word in (("unbox expects Dml", "unbox"), ("Expected all tensors to be on the same device", "same_device"),
                         ("Expected condition, x and y to be on the same device", "where")):
        if marker in error:
            return word
    return error.split(": ", 1)[-1]


def module_text(result: dict) -> str:
    """dmlprof/directml/mixed_devices_measured.py: the survey's verdicts, one overload a line."""
    counts = result["counts"]
    lines = ['"""Measured by tools/mixed_device_survey.py on real torch-directml 0.2.5 (torch 2.4.1, lavapipe): each',
             "aten call's tensor arguments moved to the CPU one at a time, n-d and 0-d. Written by the tool",
             f"(--module); do not edit. {counts['ops_surveyed']} ops surveyed, {counts['overloads']} overloads, "
             f"{counts['variants']} calls:",
             f"{counts['accept']} accepted, {counts['refuse']} refused ({counts['aborts']} ending the process)."
             '"""', "", "#: {overload: {argument: {\"0d\" | \"nd\": verdict}}} (dmlprof/directml/mixed_devices.py)",
             "MEASURED = {"]
    for func, arguments in sorted(result["calls"].items()):
        name = "aten::" + func.split(".", 1)[1].replace(".default", "") if func.startswith("aten.") else func
        entry = {argument: {kind: _verdict_word(v) for kind, v in sorted(kinds.items()) if kind != "_invalid"}
                 for argument, kinds in sorted(arguments.items())}
        entry = {argument: kinds for argument, kinds in entry.items() if kinds}
        if entry:
            lines.append(f"    {name!r}: {entry!r},")
    return "\n".join(lines + ["}", ""])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, required=True, help="the record (JSON lines); a run goes on from it")
    parser.add_argument("--samples", type=int, default=2, help="OpInfo samples per op")
    parser.add_argument("--summary", action="store_true", help="print the result from the record, run nothing")
    parser.add_argument("--module", type=Path, help="write the result as this Python module (mixed_devices_measured)")
    options = parser.parse_args()
    warnings.filterwarnings("ignore")
    if options.module:
        options.module.write_text(module_text(summary(Log(options.log))), encoding="utf-8")
        return 0
    if options.summary:
        print(json.dumps(summary(Log(options.log)), indent=1, sort_keys=True))
        return 0
    survey(Log(options.log), options.samples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
