"""Runs truth-table samples on real torch-directml, one JSON line per event on stdout.

    (run by measure_truth.py, which forks it: ``main(keys, order)``)

Each sample runs three times: on the CPU (the reference; a sample the CPU refuses is not DirectML's to
fail), then twice on the DirectML device, each followed by a device health probe:

- the **clean** run, which nothing intercepts: its outputs and gradients are compared with the CPU's.
  Only this run judges values. dmlprof's recorder re-runs each call from Python, and a kernel that returns
  a tensor other than the one it was given (torch-directml's in-place ``masked_fill_``) loses its write
  there, so values seen under the recorder can be the recorder's, not DirectML's;
- the **recorded** run, under dmlprof's recorder and verifier: every aten call below autograd, its verdict
  (device, or fallback from torch-directml's own warning), the call a failure happened at, and each device
  call recomputed on the CPU from the device's inputs. A call's divergence is kept only where the clean run
  shows the same part (forward outputs for a forward call, gradients for a backward call) differing from
  the CPU; one the clean run does not show is counted, not kept (the recorder's artifact, or an output
  nothing reads, such as ``nll_loss``'s ``total_weight`` for ``reduction="none"``).

Backward samples use random incoming gradients (truth_samples.incoming_gradients). Before every recorded
call the worker prints which call it is about to make: torch-directml ends the process on some calls (a
fatal check, SIGABRT; SIGSEGV), and the parent then knows the call that did it.

``order`` is "clean-first" (the usual) or "recorded-first" (a sample re-run alone after an abort, so the call
that ends the process is named).

Events: ``{"start": key}``, ``{"phase": "clean"|"recorded"}``, ``{"call": op, "dtypes": [...]}``,
``{"probe": bool, "message": str}`` (after each device run), ``{"done": key, ...}``.
"""
from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))  # this checkout's dmlprof

import torch  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402

import truth_samples  # noqa: E402
from dmlprof.backends.dml import DmlBackend  # noqa: E402
from dmlprof.record.frame import op_name, rows_to_frame  # noqa: E402
from dmlprof.record.recorder import Recorder  # noqa: E402
from dmlprof.verify import Verifier  # noqa: E402
from dmlprof.verify import tolerance  # noqa: E402

_out = sys.stdout

#: OpInfo ops whose values are not comparable with the CPU's: random draws, uninitialised memory (an op's
#: name, without ``nn.functional.`` and the variant: ``normalize`` and ``poisson_nll_loss`` are compared)
_UNCOMPARABLE = frozenset({
    "bernoulli", "multinomial", "normal", "poisson", "uniform", "cauchy", "exponential", "geometric", "log_normal",
    "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "rrelu", "dropout",
    "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout", "native_dropout", "empty", "empty_like",
    "new_empty", "new_empty_strided", "empty_strided", "empty_permuted",
})


def emit(event: dict) -> None:
    _out.write(json.dumps(event) + "\n")
    _out.flush()


def _dtypes(inputs, device_type: str) -> list:
    return sorted({str(m[1]).replace("torch.", "") for m in inputs if m[0] == device_type})


# -- the health probe: scan --confirm's own (a removed device fails every later call under its own op's name)
from dmlprof.confirm.worker import describe as _describe, probe_device  # noqa: E402,F401


# -- judging values ----------------------------------------------------------------------------------------
def comparable(label: str) -> bool:
    """Whether a sample's values can be compared with the CPU's (a backward kernel of a random op, such as
    ``native_dropout_backward``, is given its mask: it is)."""
    parts = label.split(".")
    name = parts[2] if label.startswith("nn.functional.") and len(parts) > 2 else parts[0]
    return name not in _UNCOMPARABLE


def _tensors(value) -> list:
    return [leaf for leaf in tree_flatten(value)[0]]


def _dense(tensor):
    """A sparse output compared by its values (the CPU's sparse tensors have no ``equal``)."""
    return tensor.to_dense() if tensor.layout != torch.strided else tensor


def compare_parts(cpu: tuple, device: tuple) -> dict:
    """``{"forward": [...], "backward": [...]}``: what differs between the CPU's and the clean device run's
    outputs and gradients, each ``{"index", "reason", "max_abs_error", ...}``. Only what the sample returns is
    compared (a functional's own outputs, the gradients asked for), never a kernel's private outputs."""
    found: dict = {"forward": [], "backward": []}
    for part, cpu_value, device_value in (("forward", cpu[0], device[0]), ("backward", cpu[1], device[1])):
        cpu_leaves, device_leaves = _tensors(cpu_value), _tensors(device_value)
        if len(cpu_leaves) != len(device_leaves):
            found[part].append({"index": -1, "reason": f"{len(device_leaves)} outputs on the device, "
                                f"{len(cpu_leaves)} on the CPU", "max_abs_error": None, "max_rel_error": None})
            continue
        for index, (c, d) in enumerate(zip(cpu_leaves, device_leaves)):
            if isinstance(c, torch.Tensor) and isinstance(d, torch.Tensor):
                difference = tolerance.compare(_dense(d.detach().to("cpu")), _dense(c.detach()))
            elif isinstance(c, torch.Tensor) or isinstance(d, torch.Tensor):
                difference = {"reason": "a tensor on one side only", "max_abs_error": None, "max_rel_error": None}
            else:
                difference = tolerance.compare_numbers(d, c, None) if (c is not None or d is not None) else None
            if difference is not None:
                found[part].append({"index": index, **{k: difference.get(k) for k in
                                                       ("reason", "max_abs_error", "max_rel_error", "mismatched", "numel")}})
    return found


# -- the two device runs -----------------------------------------------------------------------------------
def clean_run(sample, device) -> dict:
    """The run nothing intercepts: its outputs and gradients, or its error (with the forward's outputs
    where only the backward raised, so they are still judged)."""
    forward: list = []
    try:
        output, grads = sample.run(device, lambda out: forward.append(truth_samples.to_cpu(out)))
        return {"values": (truth_samples.to_cpu(output), truth_samples.to_cpu(grads))}
    except Exception as exc:
        return {"error": _describe(exc), **({"forward": forward[0]} if forward else {})}


def recorded_run(sample, backend) -> dict:
    device_type = backend.device_type
    recorder = Recorder(backend, sync=False, verifier=Verifier(backend))
    # measure what the device does, unguarded: no refusal of a call the rules say ends the process (the
    # call is named by the process it ends, never by the rules this table is the evidence for)
    recorder.refuse = None
    recorder.rule = None
    recorder.refusals = None
    recorder.before_call = lambda func, inputs: emit({"call": op_name(func), "dtypes": _dtypes(inputs, device_type)})
    recorder.phase = "forward"
    forward_rows: list = []

    def between(_output):
        forward_rows.append(len(recorder.rows))
        recorder.phase = "backward"

    error = None
    with recorder:
        try:
            sample.run(backend.device(), between)
        except Exception as exc:
            error = exc
    frame = rows_to_frame(recorder.rows, recorder.evidence, backend)
    calls = [[op, verdict, fallback, dtypes] for op, verdict, fallback, dtypes in
             zip(frame["op"], frame["verdict"], frame["fallback_ops"], frame["dtypes"])]
    split = forward_rows[0] if forward_rows else len(calls)
    divergent = [{**{k: d[k] for k in ("op", "max_abs_error", "max_rel_error", "mismatched", "numel",
                                        "input_dtypes", "input_shapes", "reason")},
                  "dtypes": calls[d["seq"]][3] if d["seq"] < len(calls) else "",
                  "part": "forward" if d["seq"] < split else "backward"}
                 for d in recorder.verifier.divergent]
    result = {"calls": calls, "divergent_recorded": divergent}
    if error is not None:
        failed = frame["op"].iloc[recorder.failed_row] if recorder.failed_row is not None else None
        result.update(error=_describe(error), failed_op=failed,
                      failed_dtypes=calls[recorder.failed_row][3] if recorder.failed_row is not None else "")
    return result


def judge(label: str, cpu: tuple, clean: dict, recorded: dict) -> dict:
    """One sample's result from its three runs (see the module docstring)."""
    result = {"outcome": "ok", "calls": recorded.get("calls", []), "incoming_gradients": "random",
              "values": "compared" if comparable(label) else "not compared (random or uninitialised output)"}
    wrong_parts: dict = {"forward": [], "backward": []}
    if "values" in clean and comparable(label):
        wrong_parts = compare_parts(cpu, clean["values"])
    elif "forward" in clean and comparable(label):  # the backward raised: the forward is still judged
        wrong_parts = {"forward": compare_parts((cpu[0], []), (clean["forward"], []))["forward"], "backward": []}
    result["clean_wrong"] = {part: found for part, found in wrong_parts.items() if found}
    kept, unconfirmed = [], 0
    for d in recorded.get("divergent_recorded", []):
        if wrong_parts.get(d["part"]):
            kept.append(d)
        else:
            unconfirmed += 1
    result["divergent"] = kept
    result["divergent_not_in_clean_run"] = unconfirmed
    result["wrong_unattributed"] = bool(result["clean_wrong"]) and not kept
    if "error" in clean:  # what DirectML does is what the run nothing intercepted did
        result.update(outcome="raises", message=clean["error"],
                      failed_op=recorded.get("failed_op"), failed_dtypes=recorded.get("failed_dtypes", ""))
        if "error" not in recorded:
            result["raised_in"] = "clean run only (the recorded run ran: the call is not known)"
    elif "error" in recorded:  # dmlprof's own trouble (its verifier), not DirectML's: kept, not counted
        result.update(raised_in="recorded run only", recorded_error=recorded["error"],
                      recorded_failed_op=recorded.get("failed_op"))
    return result


def run_one(key: str, backend, order: str) -> dict:
    sample = truth_samples.sample(key)
    try:
        cpu = sample.run("cpu")
        cpu = (truth_samples.to_cpu(cpu[0]), truth_samples.to_cpu(cpu[1]))
    except Exception as exc:
        return {"outcome": "cpu_raises", "message": _describe(exc)}
    device = backend.device()
    clean, recorded = {}, {}
    for phase in (("clean", "recorded") if order == "clean-first" else ("recorded", "clean")):
        emit({"phase": phase})
        if phase == "clean":
            clean = clean_run(sample, device)
        else:
            recorded = recorded_run(sample, backend)
            emit({"recorded": {k: recorded.get(k) for k in ("error", "failed_op", "failed_dtypes")}})
        healthy, message = probe_device(device)
        emit({"probe": healthy, "message": message, "after": phase})
        if not healthy:  # what follows would run on a lost device: the parent re-runs the sample afresh
            return {"outcome": "unhealthy", "message": message, "after": phase,
                    "error": clean.get("error") or recorded.get("error"), "failed_op": recorded.get("failed_op")}
    return judge(sample.label, cpu, clean, recorded)


def main(keys: list, order: str = "clean-first") -> int:
    torch.set_warn_always(True)
    warnings.simplefilter("always")
    backend = DmlBackend(0)
    backend.prepare()
    healthy, message = probe_device(backend.device())
    emit({"probe": healthy, "message": message, "after": "start"})
    if not healthy:
        return 3
    emit({"adapter": backend.device_name()})
    for key in keys:
        emit({"start": key})
        try:
            result = run_one(key, backend, order)
        except Exception as exc:  # the harness's own trouble with this sample: said, not hidden
            result = {"outcome": "harness_error", "message": _describe(exc)}
        emit({"done": key, **result})
        if result.get("outcome") == "unhealthy":
            return 3
    return 0
