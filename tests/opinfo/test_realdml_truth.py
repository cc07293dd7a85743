"""The prediction and the emulated device, judged by the real torch-directml's truth table.

GIVEN every sample the truth table measured on real torch-directml (tests/opinfo/realdml_truth.json.gz,
      made by tools/realdml/measure_truth.py and ship_truth.py: OpInfo samples, float32 forward and
      backward, forward in float16, int64, bool and complex64), split into shards
WHEN  the same samples (rebuilt from their keys, the same inputs) run under ``dmlprof scan
      --device emulated-dml`` and under ``dmlprof scan --target dml`` (tests/opinfo/truth_replay.py)
THEN  each path does what real DirectML did: a sample that ran there runs, with the same device calls
      (op, verdict, fallback ops); a sample that raised there raises at the same op; a sample that
      ended the process there fails at the same op, said as an abort. Every disagreement is a failure
      unless KNOWN names it with its cause.

This needs no realdml: the truth is committed. It runs on torch 2.4.1 (the samples, and the paths torch
takes, are that torch's), in CI's torch 2.4.1 lane.
"""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TRUTH = HERE / "realdml_truth.json.gz"
MODEL = HERE / "truth_replay.py"
SHARDS = int(os.environ.get("DMLPROF_TRUTH_SHARDS", "4"))
TIMEOUT_S = 1800
EMULATED_HAS_STORAGE = ("the emulated device's tensors have storage, so the view scatters run there (the prediction "
                        "refuses them; docs/realdml.md)")
#: What real DirectML does that the paths do not model yet, each named with its cause: (how it ended there,
#: the op it ended at or None, words of its message) -> why. Matched per sample; any other difference fails.
KNOWN = {
    ("raises", "aten::repeat", "Unknown error -2147024809"):
        "repeat of some 0-d inputs is an invalid argument to DirectML; which inputs is not isolated (repeat(3) runs)",
    ("raises", "aten::masked_select", "CreateOperator"):
        "masked_select of a one-element input cannot build DirectML's operator; not isolated",
    ("aborts", "aten::nanmedian.dim", ""): "median/nanmedian along a dim end the process for some inputs only",
    ("aborts", "aten::median.dim", ""): "median/nanmedian along a dim end the process for some inputs only",
    ("aborts", "aten::_unique2", ""): "unique of a bool tensor ends the process for some inputs (a wrong result for others)",
    ("aborts", "aten::_to_copy", "corrupted"): "heap corruption: the process died at a later call from memory an earlier "
                                               "DirectML call corrupted (this stack's or DirectML's: not isolated)",
    ("aborts", "aten::_to_copy", "malloc"): "heap corruption, as above",
    ("raises", None, "CdistBackward0 returned an invalid gradient"):
        "cdist's backward returns a gradient of the wrong shape on torch-directml (its forward ran)",
    ("raises", None, "NativeBatchNormBackward0 returned an invalid gradient"):
        "batch_norm's backward returns a gradient of the wrong shape for OpInfo's input without batch statistics",
    ("raises", None, "NativeBatchNormLegitBackward0 returned an invalid gradient"): "as batch_norm's, above",
    ("raises", None, "isDifferentiableType"):
        "native_dropout_backward called directly returns a bool tensor (a float times a bool is a bool on DirectML)",
    ("raises", "aten::constant_pad_nd", "ensure_in_bounds"):
        "padding local_response_norm's view is refused as beyond its storage; which views is not isolated",
    ("raises", "aten::scatter_.src", "Unknown error -2147024809"):
        "the backward of sort/max along a dimension of some inputs is an invalid argument to DirectML; not isolated "
        "(a 0-d median's runs)",
    ("raises", "aten::scatter_add_", "Unknown error -2147024809"): "cummax/cummin's backward, as sort's above",
    ("aborts", "aten::max_pool2d_with_indices_backward", "free()"):
        "max pooling's backward corrupted the heap for some 1-D inputs (the process died); not isolated",
    ("raises", "aten::convolution", "Unknown error -2147024809"):
        "a transposed convolution of OpInfo's third sample is an invalid argument to DirectML; not isolated",
    ("aborts", "aten::_linalg_check_errors", ""): "linalg.inv ended the process in its error check for one input; "
                                                   "not isolated",
    ("raises", None, "Could not run 'aten::equal' with arguments from the 'SparseCPU'"):
        "to_sparse of some inputs made a sparse tensor on the real torch-directml, which the measuring harness could "
        "not compare; the paths refuse sparse results (torch-directml registers no sparse kernels)",
    ("raises", "aten::masked_scatter_", "ensure_in_bounds"): "a view beyond the storage, as above",
    ("raises", "aten::as_strided", "ensure_in_bounds"):
        "as_strided views beyond the tensor's own elements: torch-directml checks them against its allocation",
    ("raises", "aten::_prelu_kernel", "0 elements"):
        "an earlier call returned an empty result where the CPU's has elements (a wrong shape), and this one failed on it",
    ("raises", "aten::sub.Tensor", "size of tensor a (0)"): "an empty result from an earlier call, as above",
    ("raises", "aten::sub_.Tensor", "size of tensor a (0)"): "an empty result from an earlier call, as above",
    ("raises", "aten::as_strided_scatter", "has_storage"): EMULATED_HAS_STORAGE,
    ("raises", "aten::slice_scatter", "has_storage"): EMULATED_HAS_STORAGE,
    ("raises", "aten::select_scatter", "has_storage"): EMULATED_HAS_STORAGE,
    ("raises", "aten::diagonal_scatter", "has_storage"): EMULATED_HAS_STORAGE,
}
#: samples that ran on real DirectML where a path fails, by words of the path's error -> why
KNOWN_RAN = {
    "Could not run 'aten::_sparse_coo_tensor_with_dims_and_tensors' with arguments from the 'SparsePrivateUse1'":
        "to_sparse of some inputs makes a sparse tensor on real torch-directml (the clean generator ran it; the old "
        "one failed comparing it); the prediction and the emulated device have no sparse kernels and refuse it",
    "does not support Double (Float64)":
        "torch-directml converts some dtypes (bool) to float32 when asked for float64, without an error (a wrong dtype)",
    "cov(): aweights cannot be negative":
        "the prediction's check of cov's weights read a value it had not computed (its guess; the report marks it)",
}
#: calls real DirectML made beyond the paths' (or not made), by op -> why
KNOWN_CALLS = {
    "aten::_to_copy": "an earlier call returned another dtype on torch-directml (a float times a bool is a bool), so a "
                      "later .to() copies where it does nothing on the CPU",
}


pytestmark = [pytest.mark.live, pytest.mark.slow]


def _truth() -> dict:
    with gzip.open(TRUTH, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def _run(command, keys_file: Path, status: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, DMLPROF_TRUTH_KEYS=str(keys_file), DMLPROF_TRUTH_STATUS=str(status),
               PYTHONIOENCODING="utf-8")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, encoding="utf-8",
                          errors="replace", timeout=TIMEOUT_S)


def _scan(where: str, keys_file: Path, work: Path) -> tuple:
    """(status per module name, device rows per module name) of one scan of the replay."""
    out, status = work / where, work / f"{where}-status.json"
    device = ["--target", "dml"] if where == "predicted" else ["--device", "emulated-dml"]
    done = _run([sys.executable, "-m", "dmlprof", "scan", str(MODEL), *device, "--warmup", "0", "--steps", "1",
                 "--no-profiler", "--out", str(out), "--quiet"], keys_file, status, work)
    sessions = sorted(out.glob("*.session.json"))
    assert sessions and status.is_file(), f"the {where} scan did not finish: exit {done.returncode} {done.stderr[-2000:]}"
    ops = json.loads(sessions[0].read_text(encoding="utf-8"))["ops"]
    rows: dict = {}
    prefix = "Replay.samples."
    for op, verdict, fallback, module in zip(ops["op"], ops["verdict"], ops["fallback_ops"], ops["module"]):
        if module.startswith(prefix):  # every call (the one a sample failed at may have touched the CPU only)
            rows.setdefault(module[len(prefix):].split(".")[0], []).append((op, verdict, fallback or ""))
    return json.loads(status.read_text(encoding="utf-8")), rows


def _counted(calls) -> Counter:
    """Calls counted by (op, verdict, fallback ops), autograd's gradient accumulation named one way on every
    path (KNOWN["emulated_accumulate"]: the samples' autograd.grad runs inside a module's forward, so the phase
    does not tell the engine's accumulation from a sample's own add_: both sides are named alike)."""
    from dmlprof.testing import ACCUMULATES_IN_PLACE

    return Counter((ACCUMULATES_IN_PLACE.get(op, op), verdict, fallback) for op, verdict, fallback in calls)


def known(real: dict, status: str, rows: list) -> str:
    """Why a path differs from real DirectML on a sample, where the difference is named (KNOWN...); else ""."""
    outcome, message = real["outcome"], (real.get("message") or "") + (real.get("signal") or "")
    for (kind, op, words), why in KNOWN.items():
        if outcome == kind and real.get("failed_op") == op and words in message:
            return why
    if outcome == "ok" and status != "ok":
        return next((why for words, why in KNOWN_RAN.items() if words in status), "")
    return ""


def judge(real: dict, status: str, rows: list) -> str:
    """"" when a path did what real DirectML did with one sample (or the difference is named), else what differs."""
    from dmlprof.directml.failures import failure_in

    outcome = real["outcome"]
    if outcome in ("raises", "aborts"):
        said = (real.get("message") or "").partition(": ")[2][:60]
        if status != "ok" and said and said in status:
            return ""  # the same error, in the same words (where it arose may differ: torch's check, a kernel's)
        if status == "ok":
            return "" if known(real, status, rows) else (
                f"runs, where real DirectML {outcome} at {real.get('failed_op')}: {real.get('message', '')[:120]}")
        failed_at = rows[-1][0] if rows else None
        found = failure_in(RuntimeError(status.split(": ", 1)[-1]))
        kind = found.kind if found is not None else "raises (not as DirectML)"
        if (failed_at != real.get("failed_op") or kind != outcome) and not known(real, status, rows):
            return f"{kind} at {failed_at} ({status[:120]}); real DirectML {outcome} at {real.get('failed_op')}"
        return ""
    if status != "ok":
        return "" if known(real, status, rows) else f"fails ({status[:160]}); real DirectML ran it"
    off_device = ("cpu", "host")  # the stored truth says cpu for the host's bookkeeping too (made before host was a verdict)
    expected = _counted((op, verdict, fallback) for op, verdict, fallback, _ in real["calls"] if verdict not in off_device)
    got = _counted(row for row in rows if row[1] not in off_device)
    unexplained = {key for key in set(expected) ^ set(got) if expected[key] != got[key] and key[0] not in KNOWN_CALLS}
    if unexplained:
        return f"calls differ: only real {sorted((expected - got).items())[:4]}; only here {sorted((got - expected).items())[:4]}"
    return ""


@pytest.mark.skipif(not TRUTH.is_file(), reason="no truth table committed (tools/realdml/ship_truth.py)")
@pytest.mark.parametrize("shard", range(SHARDS), ids=lambda k: f"shard{k}of{SHARDS}")
@pytest.mark.parametrize("where", ["predicted", "emulated"])
def test_each_path_does_what_real_directml_did_with_each_sample(where, shard, tmp_path):
    truth = _truth()
    if torch.__version__.split("+")[0] != truth["versions"]["torch"].split("+")[0]:
        pytest.skip(f"the truth table's samples are torch {truth['versions']['torch']}'s; this is {torch.__version__}")
    import truth_replay

    judged = {key: real for index, (key, real) in enumerate(sorted(truth["samples"].items()))
              if index % SHARDS == shard and real["outcome"] in ("ok", "raises", "aborts")}
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text("\n".join(f"{key} {judged[key].get('incoming_gradients', 'ones')}" for key in judged),
                         encoding="utf-8")
    statuses, rows = _scan(where, keys_file, tmp_path)
    problems = {}
    for key, real in judged.items():
        name = truth_replay.module_name(key)
        problem = judge(real, statuses.get(name, "not run"), rows.get(name, []))
        if problem:
            problems[key] = problem
    outcomes = Counter(real["outcome"] for real in judged.values())
    print(f"{where}, shard {shard}/{SHARDS}: {len(judged)} samples judged ({dict(outcomes)}); {len(problems)} differ")
    assert not problems, f"{len(problems)} samples differ from real DirectML on the {where} path:\n" + "\n".join(
        f"{key}: {problem}"[:300] for key, problem in sorted(problems.items())[:60])
