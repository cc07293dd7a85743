"""Re-probe 17, case 6: a write into a view past its base's start made in a worker thread's forward (a threaded
forward: a hand-rolled data-parallel, a pipeline stage) and backpropagated by the main thread trains on a wrong
gradient on DirectML (realdml: grad [-4.565, -16.841] where the CPU gives [-7.634, -19.91]). The recorder records
its own thread only, so the write went unjudged and ``check`` passed. Threads started while recording have their
in-place writes watched (dmlprof.record.thread_writes): a write of the class makes its row where a backward runs
through it, and nothing else of the thread's is kept or changed."""
from __future__ import annotations

import json
import threading

import pytest
import torch

from dmlprof.record.frame import op_name
from dmlprof.record.recorder import Recorder
from dmlprof.tables.wrong_classes import Call, classes_for


def _flagged(recorder) -> list:
    """The rows the written-view class flags: (op, source's file name and line, whether of another thread)."""
    found = []
    for row in recorder.rows:
        if row[-1] and any("past its base" in c.klass for c in classes_for(
                Call(op_name(row[2]), ("float32",), ((),), "forward", json.loads(row[-1])))):
            found.append((op_name(row[2]), row[10].rsplit("/", 1)[-1], row[11] != threading.get_ident()))
    return found


def _threaded_forward(dev, backward=True, write=True):
    """The reproducer's step (docs/probe17/written_view_in_worker_thread.py): the forward in a worker thread."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8).to(dev)
    x = torch.arange(16., device=dev).view(2, 8).requires_grad_()
    box = {}

    def forward():
        h = lin(x)
        out = torch.zeros(2, 8, device=dev)
        if write:
            out[:, 2:] = h[:, :6]  # the write
        else:
            out = torch.cat([out[:, :2], h[:, :6]], 1)
        box["out"] = out

    worker = threading.Thread(target=forward)
    worker.start()
    worker.join()
    loss = (box["out"] * torch.arange(16., device=dev).view(2, 8)).sum()
    if not backward:
        return round(loss.item(), 3)
    loss.backward()
    return [round(v, 3) for v in x.grad.sum(1).cpu().tolist()]


def _recorded(backend, step, **kwargs):
    recorder = Recorder(backend, sync=False)
    with recorder:
        result = step(backend.device(), **kwargs)
    return recorder, result


@pytest.mark.live
def test_a_worker_threads_write_backpropagated_by_the_main_thread_is_flagged_at_its_line(emulated_dml_backend):
    recorder, grad = _recorded(emulated_dml_backend, _threaded_forward)
    assert grad == _threaded_forward("cpu")  # the watch changes no gradient
    assert _flagged(recorder) == [("aten::copy_", "test_written_view_threads.py:41", True)]
    # the thread's other calls (linear, zeros) are not recorded, as before: its write alone joins the recording
    worker_rows = [op_name(row[2]) for row in recorder.rows if row[11] != threading.get_ident()
                   and row[1] != "backward"]
    assert worker_rows == ["aten::copy_"]


@pytest.mark.live
def test_a_worker_threads_write_no_backward_runs_through_makes_no_row(emulated_dml_backend):
    recorder, loss = _recorded(emulated_dml_backend, _threaded_forward, backward=False)
    assert loss == _threaded_forward("cpu", backward=False)
    assert _flagged(recorder) == []
    assert [row for row in recorder.rows if row[11] != threading.get_ident()] == []
    recorder, _ = _recorded(emulated_dml_backend, _threaded_forward, write=False)  # built out of place: right
    assert _flagged(recorder) == []


@pytest.mark.live
def test_a_worker_threads_write_in_a_step_left_unrecorded_makes_no_row(emulated_dml_backend):
    from dmlprof.record.window import _set_recording

    recorder = Recorder(emulated_dml_backend, sync=False)
    with recorder:
        _set_recording(recorder, False)  # a warm-up step beyond the first: no thread's calls are the recording's
        grad = _threaded_forward(emulated_dml_backend.device())
        _set_recording(recorder, True)
    assert recorder.rows == [] and grad == _threaded_forward("cpu")


@pytest.mark.live
def test_a_worker_threads_backpropagated_write_reaches_the_journal(emulated_dml_backend, tmp_path):
    from dmlprof.record.journal import Journal, read_journal

    recorder = Recorder(emulated_dml_backend, sync=False)
    recorder.journal = Journal(tmp_path / "j")
    with recorder:
        _threaded_forward(emulated_dml_backend.device())
    recorder.journal.close()
    written = [call for call in read_journal(tmp_path / "j").calls if "view_offset" in call.arguments]
    assert [(call.op, json.loads(call.arguments)["backward_runs"]) for call in written] == [("aten::copy_", True)]
    assert written[0].source.endswith("test_written_view_threads.py:41")


@pytest.mark.live
def test_the_watch_costs_other_threads_only_their_in_place_calls_and_ends_with_the_recording(emulated_dml_backend):
    from dmlprof.record.thread_writes import WATCH_KEY_NAME, watch_key

    dev = emulated_dml_backend.device()
    recorder = Recorder(emulated_dml_backend, sync=False)
    seen, go_on, done = {}, threading.Event(), threading.Event()

    def worker():
        seen["watched"] = torch._C._dispatch_tls_is_dispatch_key_included(watch_key())
        try:  # an error of the user's own is theirs, unchanged
            torch.ones(2, device=dev)[1:].add_(torch.ones(3, device=dev))
        except RuntimeError as exc:
            seen["error"] = str(exc)
        go_on.wait(30)
        torch.zeros(3, device=dev)[1:].fill_(1)  # after the recording: the thread is watched no more
        seen["after"] = torch._C._dispatch_tls_is_dispatch_key_included(watch_key())
        done.set()

    bootstrap = threading.Thread._bootstrap_inner
    with recorder:
        thread = threading.Thread(target=worker)
        thread.start()
    go_on.set()
    thread.join(30)
    assert seen["watched"] is True and seen["after"] is False and threading.Thread._bootstrap_inner is bootstrap
    with pytest.raises(RuntimeError) as plain:
        torch.ones(2, device=dev)[1:].add_(torch.ones(3, device=dev))
    assert seen["error"] == str(plain.value)
    # only the writes have kernels on the key: every other op passes it by a fallthrough, no Python reached
    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    assert has_kernel("aten::copy_", WATCH_KEY_NAME) and has_kernel("aten::add_.Tensor", WATCH_KEY_NAME)
    assert not has_kernel("aten::addmm", WATCH_KEY_NAME) and not has_kernel("aten::slice.Tensor", WATCH_KEY_NAME)


THREADED_MODEL = '''
import threading
import torch
from torch import nn

BATCH_SIZE = 4


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.out = nn.Linear(8, 3)

    def forward(self, x):
        box = {}

        def stage():  # a pipeline stage in a thread of its own
            hidden = self.fc(x).clone()
            hidden[:, 4:] = 0.0
            box["hidden"] = hidden
        worker = threading.Thread(target=stage)
        worker.start()
        worker.join()
        return self.out(box["hidden"])


def build_model():
    torch.manual_seed(0)
    return Net()


def make_batch(batch_size):
    return torch.randn(batch_size, 8), torch.randint(0, 3, (batch_size,))
'''


@pytest.mark.live
def test_the_prediction_judges_a_write_in_a_models_thread_too(tmp_path):
    from dmlprof.predict import predict_scan
    from dmlprof.report import build_report

    path = tmp_path / "net.py"
    path.write_text(THREADED_MODEL)
    report = build_report(predict_scan(path, batch_size=4))
    found = [k for k in report.known_wrong_results if "starts past its base's start" in k.klass]
    assert [(k.op, [source.rsplit("/", 1)[-1] for source in k.sources]) for k in found] == [
        ("aten::copy_", ["net.py:20"])], report.known_wrong_results
