"""scan --confirm's parts that need no real torch-directml: the signatures a prediction keeps and their
rebuilding in a worker (the calls it replays must be the calls the step made), each row's judgement, and the
one-line refusals."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dmlprof.confirm.signatures import SignatureCapture, decode, load
from dmlprof.confirm.worker import _cpu_tensor, overload
from dmlprof.report.confirmation import CONFIRMED, CONTRADICTED, Confirmation, ConfirmationRow

REPO = Path(__file__).resolve().parents[2]


def _row(predicted="device", predicted_wrong=False, real="device", real_wrong=False) -> ConfirmationRow:
    return ConfirmationRow("aten::mul.Tensor", "float32", "4x4", 1, "backward", "", "", predicted, predicted_wrong,
                           real, real_wrong)


def test_a_row_is_confirmed_only_where_verdict_and_values_agree():
    assert _row().status == CONFIRMED
    assert _row(predicted_wrong=True, real_wrong=True).status == CONFIRMED
    assert _row(real="fallback").status == CONTRADICTED
    assert _row(real="aborts", real_wrong=None).status == CONTRADICTED
    assert _row(real_wrong=True).status == CONTRADICTED  # a wrong result the prediction missed
    assert _row(predicted_wrong=True, real_wrong=False).status == CONTRADICTED  # a false alarm
    assert _row(predicted_wrong=True, real_wrong=None).status == CONFIRMED  # values not compared: the verdict judges


def test_the_headline_counts_contradicted_rows():
    confirmation = Confirmation("m.py", "lavapipe", (_row(), _row(real="fallback")), 1.0, 1)
    assert confirmation.headline.startswith("1 of 2 call signatures")
    assert confirmation.to_dict()["rows"][1]["status"] == CONTRADICTED


def _captured(calls, tmp_path):
    capture = SignatureCapture(lambda t: t, "cpu")  # the CPU stands for the device: its values are all known
    for row, (func, args, kwargs) in enumerate(calls):
        capture(func, args, kwargs, row)
    return capture, capture.save(tmp_path)


def test_calls_with_one_signature_are_one_row_and_others_are_not(tmp_path):
    x, w = torch.randn(3, 4), torch.randn(4, 3)
    add = torch.ops.aten.add.Tensor
    capture, _ = _captured([(add, (x, x), {}), (add, (x * 2, x), {}), (add, (x, x), {"alpha": 2}),
                            (add, (w.t(), x), {})], tmp_path)
    rows = capture.rows()
    assert [len(r["rows"]) for r in rows] == [2, 1, 1]  # same op, dtypes, shapes, strides: one signature
    assert rows[2]["tensors"][0]["stride"] == [1, 3]  # a transposed view keeps its strides


def test_an_op_the_model_defines_is_not_replayed_and_so_never_contradicted(tmp_path):
    # re-probe 10: a torch.library custom op of the model file's own read "contradicted ... harness_error" and exit 5:
    # the replaying worker has torch's ops, not the ones the model's import defined
    library = torch.library.Library("dmlprof_probe10", "DEF")
    library.define("scale(Tensor x, float k) -> Tensor")
    library.impl("scale", lambda x, k: x * k, "CompositeExplicitAutograd")
    try:
        x = torch.randn(2, 3)
        capture, _ = _captured([(torch.ops.dmlprof_probe10.scale.default, (x, 2.0), {}),
                                (torch.ops.aten.mul.Tensor, (x, x), {})], tmp_path)
    finally:
        library._destroy()
    assert [row["op"] for row in capture.rows()] == ["aten::mul.Tensor"]
    assert "dmlprof_probe10::scale" in capture.unreplayable


def test_a_replayed_call_computes_what_the_recorded_call_computed(tmp_path):
    weight = torch.randn(6, 4)
    scores, targets = torch.randn(5, 7).log_softmax(1), torch.tensor([1, -100, 3, 6, 0])
    calls = [(torch.ops.aten.addmm.default, (torch.randn(6), torch.randn(5, 4), weight.t()), {"beta": 0.5}),
             (torch.ops.aten.nll_loss_forward.default, (scores, targets, None, 1, -100), {}),
             (torch.ops.aten.sum.dim_IntList, (torch.randn(2, 3, 4), [-1], True), {"dtype": torch.float64})]
    capture, (signatures, values) = _captured(calls, tmp_path)
    loaded, raw = load(signatures), values.read_bytes()
    for (func, args, kwargs), found in zip(calls, capture.rows()):
        signature = loaded[found["key"]]
        tensors = [_cpu_tensor(meta, raw, seed=0) for meta in signature["tensors"]]
        for rebuilt, meta in zip(tensors, signature["tensors"]):
            assert list(rebuilt.stride()) == meta["stride"]
        replayed = overload(signature["op"])(*[decode(a, tensors, torch.device("cpu")) for a in signature["args"]],
                                             **{k: decode(v, tensors, torch.device("cpu"))
                                                for k, v in signature["kwargs"].items()})
        expected = func(*args, **kwargs)
        for got, want in zip(replayed if isinstance(replayed, tuple) else (replayed,),
                             expected if isinstance(expected, tuple) else (expected,)):
            assert torch.equal(got, want), signature["op"]


def _dmlprof(*args, cwd):
    return subprocess.run([sys.executable, "-m", "dmlprof", *args], capture_output=True, text=True, cwd=cwd,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(cwd)}, timeout=300)


def test_confirm_without_a_prediction_is_a_usage_error(tmp_path):
    done = _dmlprof("scan", str(REPO / "models" / "lenet5.py"), "--confirm", "--device", "cpu", cwd=tmp_path)
    assert done.returncode == 2 and "--confirm" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.skipif(__import__("importlib.util").util.find_spec("torch_directml") is not None,
                    reason="torch-directml is installed in this Python: the refusal is for one without it")
def test_confirm_without_real_torch_directml_is_one_line_and_fails(tmp_path):
    done = _dmlprof("scan", str(REPO / "models" / "lenet5.py"), "--target", "dml", "--confirm", "--out",
                    str(tmp_path), cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 4, done.stderr
    assert len(lines) == 1 and "torch-directml" in lines[0] and "Traceback" not in done.stderr
    assert not list(tmp_path.glob("*.session.json"))  # refused before the scan ran


class _Session:
    def __init__(self, ops, failure=None):
        from types import SimpleNamespace

        self.ops, self.meta = ops, SimpleNamespace(device_failure=failure)


def _frame(rows):
    import pandas as pd

    from dmlprof.schema import typed_ops_frame

    return typed_ops_frame(pd.DataFrame([{"seq": seq, "op": op, "verdict": verdict, "phase": phase, "dtypes": dtypes,
                                          "shapes": shapes} for seq, op, verdict, phase, dtypes, shapes in rows]))


class _Capture:
    def __init__(self, signatures):
        self.signatures, self.unreplayable = signatures, {}

    def rows(self):
        return [{"key": str(i), **s} for i, s in enumerate(self.signatures)]


def _signature(op, dtypes, rows):
    return {"op": op, "args": [], "kwargs": {}, "rows": rows,
            "tensors": [{"dtype": d, "shape": [4, 4], "stride": [4, 1], "offset": 0, "device": "device"} for d in dtypes]}


def test_each_row_holds_the_frames_verdict_and_wrong_flag_against_what_the_device_did():
    from dmlprof.confirm.judge import confirmation

    ops = _frame([(0, "aten::relu", "device", "forward", "float32", "[[4, 4]]"),
                  (1, "aten::native_group_norm_backward", "fallback", "backward", "float32", "[[4, 4]]"),
                  (2, "aten::mul.Tensor", "device", "backward", "float32,bool", "[[4, 4], [4, 4]]"),
                  (3, "aten::relu", "device", "forward", "float32", "[[4, 4]]")])
    capture = _Capture([_signature("aten::relu", ["float32"], [0, 3]),
                        _signature("aten::native_group_norm_backward", ["float32"], [1]),
                        _signature("aten::mul.Tensor", ["float32", "bool"], [2])])
    results = {"0": {"outcome": "device", "values": "compared", "wrong": False},
               "1": {"outcome": "device", "values": "compared", "wrong": False},
               "2": {"outcome": "device", "values": "compared", "wrong": True, "max_abs_error": None,
                     "what": "output", "reason": "dtype bool on the device"}}
    rows = confirmation(_Session(ops), capture, results, "lavapipe", 1, 1.0, "m.py").rows
    assert [(r.calls, r.predicted, r.predicted_wrong, r.real, r.real_wrong, r.status) for r in rows] == [
        (2, "device", False, "device", False, CONFIRMED),
        (1, "fallback", False, "device", False, CONTRADICTED),  # the device ran what the prediction sent to the CPU
        (1, "device", True, "device", True, CONFIRMED)]  # the amax backward's bool-mask product, wrong on both


class _ConfirmWorker:
    """A fake ``dmlprof.confirm.worker``: its events for each key, ending its process at the keys in ``ends``
    (always) or ``ends_after_work`` (only after another key ran in the same process: heap corruption)."""

    def __init__(self, keys, ends=(), ends_after_work=(), started=None):
        self.keys, self.ends, self.ends_after_work = keys, set(ends), set(ends_after_work)
        self.status, self.stderr_tail = "exit 0", "[F1206 dml_util.cc:118] Invalid or unsupported data type"
        started.append(list(keys))

    def events(self):
        yield {"probe": True, "after": "start"}
        yield {"adapter": "fake adapter"}
        for position, key in enumerate(self.keys, 1):
            yield {"start": key}
            yield {"phase": "device"}
            yield {"call": f"aten::op{key}", "dtypes": ["float32"]}
            if key in self.ends or (key in self.ends_after_work and position > 1):
                self.status = "SIGABRT"
                return
            yield {"probe": True, "after": "device"}
            yield {"done": key, "outcome": "device", "values": "compared", "wrong": False}

    def exit_status(self):
        return self.status


def test_a_call_that_ends_its_worker_is_an_abort_only_when_it_ends_one_alone_and_the_rest_go_on():
    from dmlprof.confirm.supervisor import Supervisor

    started: list = []
    spawn = lambda keys, env, order: _ConfirmWorker(keys, ends={"1"}, ends_after_work={"3"}, started=started)  # noqa: E731
    results = Supervisor(spawn, {}, lambda line: None).measure(["0", "1", "2", "3", "4"])
    assert results["1"]["outcome"] == "aborts" and results["1"]["failed_op"] == "aten::op1"
    assert "unsupported data type" in results["1"]["message"]
    assert results["3"]["outcome"] == "device"  # it ended a worker after other calls only: replayed alone, it ran
    assert all(results[k]["outcome"] == "device" for k in ("0", "2", "4"))
    assert ["1"] in started and ["3"] in started  # each suspect replayed alone, in a fresh process


@pytest.mark.parametrize("target", ["xpu", "mps", "dml,xpu"])
def test_confirm_of_another_targets_prediction_is_refused_before_anything_runs(tmp_path, target):
    """--confirm replays on real torch-directml: an XPU prediction judged by it read '21 of 27 call signatures
    contradicted', exit 5 (DirectML's float64 refusals against XPU's verdicts); beside other targets it was
    silently dropped. Refused first, whether torch-directml is here or not."""
    from types import SimpleNamespace

    from dmlprof.cli.scan import prepare_confirm
    from dmlprof.errors import UsageError

    args = SimpleNamespace(confirm=True, target=target, model=str(REPO / "models" / "lenet5.py"))
    with pytest.raises(UsageError, match="needs --target dml alone"):
        prepare_confirm(args)


def test_a_replay_stopped_by_a_signal_leaves_no_worker_folder_behind(tmp_path, monkeypatch):
    # SIGTERM during --confirm (a CI job's cancel) raised out of the supervisor while a worker ran: the worker's
    # folder (its keys file), made in the temporary folder and removed only when its exit status was read, stayed
    import tempfile

    import dmlprof.confirm as confirm
    from dmlprof.confirm.supervisor import Supervisor
    from dmlprof.interrupts import Stopped

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def measure(self, keys, alone_from_start=()):
        worker = self.spawn(keys, self.env, "clean-first")
        worker.process.wait(timeout=120)
        raise Stopped(15)

    monkeypatch.setattr(Supervisor, "measure", measure)
    capture = SignatureCapture(lambda tensor: None, "privateuseone")
    with pytest.raises(Stopped):
        confirm.replay(capture)
    assert list(tmp_path.iterdir()) == []
