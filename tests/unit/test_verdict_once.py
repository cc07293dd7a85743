"""The op verdict is judged once, where the op frame is made, and every reader of the frame reads it.

GIVEN an accelerator step recorded through the frame builder (``rows_to_frame``): device calls, a
fallback, the optimizer's step counters on the CPU (0-dim tensors: the host's bookkeeping) and one
real call on a CPU tensor
WHEN each reader of the op frame takes it (the report, a sweep child's recorded fallback share, a
job's merged report, the Perfetto/TensorBoard trace), straight from the recorder or from a session
file, a format 1 file saved before ``host`` was a verdict of the frame included
THEN every one of them sees ``host`` for the bookkeeping and ``cpu`` only for the real finding.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from dmlprof.backends.cuda import CudaBackend
from dmlprof.distributed import env
from dmlprof.distributed.run_dir import load_run
from dmlprof.record.frame import rows_to_frame
from dmlprof.render.trace import trace_dict
from dmlprof.report import build_report
from dmlprof.report.run import merged_report
from dmlprof.schema import CPU, HOST
from dmlprof.session import Session

US = 1_000
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sessions"
#: a format 1 session of an emulated DirectML step whose AdamW keeps 54 step-counter calls on the CPU
OLD_SESSION = FIXTURES / "replace_groupnorm.session.json"


class _Gpu(CudaBackend):
    """A CUDA-like accelerator that names the op in a ``FALLBACK op`` message and needs no device."""

    def fallback_ops_in(self, message):
        return message.split(" ", 1)[1] if message.startswith("FALLBACK ") else None

    def synchronize(self, outputs=None):
        pass


def _t(device, shape):
    return (device, torch.float32, shape, 4 * max(1, int(torch.Size(shape).numel())))


def _raw_step(step=0, clock=0):
    """(raw rows, evidence): 100 us on the device, 50 us fallen back, 70 us of step counters, 10 us on a CPU tensor."""
    aten = torch.ops.aten
    calls = [  # func, inputs, outputs, time, evidence
        (aten.addmm.default, (_t("cuda", (4,)), _t("cuda", (2, 3)), _t("cuda", (3, 4))), (_t("cuda", (2, 4)),), 100, 0),
        (aten.cumsum.default, (_t("cuda", (8,)),), (_t("cuda", (8,)),), 50, 1),
        (aten._foreach_add_.Scalar, (_t("cpu", ()), _t("cpu", ())), (), 40, 0),
        (aten._local_scalar_dense.default, (_t("cpu", ()),), (), 30, 0),
        (aten.mul.Tensor, (_t("cpu", (1,)), _t("cpu", ())), (_t("cpu", (1,)),), 10, 0),
    ]
    rows, evidence = [], []
    for func, inputs, outputs, time_us, warned in calls:
        lo = len(evidence)
        evidence += ["FALLBACK aten::cumsum.out"] * warned
        rows.append((step, "optimizer" if func is not aten.addmm.default else "forward", func, inputs, outputs,
                     clock, time_us * US, lo, len(evidence), "Net.fc", "train.py:7", 1))
        clock += (time_us + 5) * US
    return rows, evidence


def _frame():
    rows, evidence = _raw_step()
    return rows_to_frame(rows, evidence, _Gpu())


def _session(ops, **meta) -> Session:
    base = {"backend": "cuda", "device": "cuda:0", "model_name": "net", "mode": "live", "run_mode": "contract",
            "batch_size": 2, "steps": 1, "step_times_ms": [0.5]}
    return Session(meta=dict(base, **meta), ops=ops)


def _as_format_1(path: Path) -> None:
    """Rewrite a saved session as dmlprof wrote it before the verdict was final: format 1, ``cpu`` for ``host``."""
    data = json.loads(path.read_text(encoding="utf-8"))
    data["format_version"] = 1
    data["ops"]["verdict"] = [CPU if v == HOST else v for v in data["ops"]["verdict"]]
    path.write_text(json.dumps(data), encoding="utf-8")


def test_the_frame_builder_judges_host_bookkeeping_once():
    assert list(_frame()["verdict"]) == ["device", "fallback", HOST, HOST, CPU]


def test_the_report_reads_the_judged_column():
    head = build_report(_session(_frame())).summary
    assert (head.host_bookkeeping_calls, head.cpu_calls) == (2, 1)
    assert head.fallback_time_share == pytest.approx(50 / 160)  # 230 us less 70 us of counters


def test_a_sweep_childs_fallback_share_leaves_host_bookkeeping_out_as_the_report_does(monkeypatch):
    from dmlprof.record import recorder
    from dmlprof.sweep import child

    rows, evidence = _raw_step()

    class Recorded:
        """The recorder, as the child uses it: a context whose rows and evidence are this step's."""

        def __init__(self, backend, sync):
            self.rows, self.evidence, self.active, self.backend = rows, evidence, True, backend

        def frame(self):
            from dmlprof.record.frame import rows_to_frame

            return rows_to_frame(self.rows, self.evidence, self.backend)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(recorder, "Recorder", Recorded)
    share, fallen = child._recorded_share(_Gpu(), lambda rec: None)
    assert share == pytest.approx(50 / 160) == build_report(_session(_frame())).summary.fallback_time_share
    assert fallen == ["aten::cumsum.out"]


def test_a_jobs_merged_report_splits_findings_from_bookkeeping_for_new_and_format_1_files(tmp_path):
    for rank in (0, 1):
        distributed = {"rank": rank, "local_rank": rank, "world_size": 2, "local_world_size": 2, "node_rank": 0,
                       "backend": "gloo"}
        path = _session(_frame(), distributed=distributed).save(env.session_path(tmp_path, rank))
        if rank == 1:
            _as_format_1(path)
    report = merged_report(load_run(tmp_path))
    for rank in report.ranks:
        assert rank.cpu_ms == pytest.approx(0.01) and rank.host_ms == pytest.approx(0.07)
        assert rank.busy_ms == pytest.approx(0.23)  # the bookkeeping is still time the rank is busy
        assert [p.part for p in rank.step_parts if p.part in ("cpu", "host")] == ["cpu", "host"]
    assert report.verdict_differences == ()  # the old file's rank judged as the new one's


def test_the_trace_labels_each_call_with_the_judged_verdict():
    events = [e for e in trace_dict(_session(_frame()))["traceEvents"] if e.get("cat") == "cpu_op"
              and "dmlprof verdict" in e.get("args", {})]
    verdicts = {e["name"]: e["args"]["dmlprof verdict"] for e in events}
    assert verdicts["aten::_foreach_add_.Scalar"] == verdicts["aten::_local_scalar_dense"] == HOST
    assert verdicts["aten::mul.Tensor"] == CPU


def test_a_format_1_session_file_loads_upgraded_and_saves_as_format_2(tmp_path):
    raw = json.loads(OLD_SESSION.read_text(encoding="utf-8"))
    assert raw["format_version"] == 1 and HOST not in raw["ops"]["verdict"]  # the fixture is old, as saved then
    old = Session.load(OLD_SESSION)
    counts = old.ops["verdict"].value_counts().to_dict()
    assert counts.get(HOST) == 54 and CPU not in counts  # its AdamW step counters, judged on load
    copy = tmp_path / "old.session.json"
    shutil.copy(OLD_SESSION, copy)
    again = Session.load(old.save(copy))
    saved = json.loads(copy.read_text(encoding="utf-8"))
    assert saved["format_version"] == 2 and saved["ops"]["verdict"].count(HOST) == 54
    assert build_report(again).to_dict()["summary"] == build_report(old).to_dict()["summary"]


def test_a_session_file_newer_than_this_dmlprof_is_refused(tmp_path):
    from dmlprof.errors import SessionFileError

    path = _session(_frame()).save(tmp_path / "new.session.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps(dict(data, format_version=3)), encoding="utf-8")
    with pytest.raises(SessionFileError, match="newer than this dmlprof"):
        Session.load(path)
