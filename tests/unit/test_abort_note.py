"""The emulated device's note of every abort it raises (issue 33, re-probe D2, D4): a refusal raised where nothing
records the call (a warm-up step, past the recorded steps, another thread, a forked DataLoader worker) still ends
the run as a recorded one the code caught does (R29): exit 4, the report leads with it."""
from __future__ import annotations

import os
import sys
import threading

import pytest

POSIX = sys.platform != "win32"
pytestmark = [
    pytest.mark.live,  # the device's C++ note builds against torch 2.4.1 too: its CI lane runs these
    pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning"),  # threads die on purpose
]


def _raise_abort(device):
    import torch

    torch.fft.rfft(torch.randn(8, device=device))


def _caught(device):
    try:
        _raise_abort(device)
    except RuntimeError:
        pass


def test_the_device_notes_each_abort_it_raises_in_any_thread_and_each_is_taken_once(emulated_dml_backend):
    import torch

    from dmlprof import testing

    device = emulated_dml_backend.device()
    testing.take_abort_note()  # earlier tests' aborts
    before = testing.abort_count()
    _caught(device)
    worker = threading.Thread(target=_raise_abort, args=(device,))  # dies of it: the main thread goes on
    worker.start()
    worker.join()
    note = testing.take_abort_note()
    assert note.count == 2 and testing.abort_count() == before + 2
    assert note.op == "aten::_fft_r2c" and note.message.startswith("torch-directml ends the process here (SIGABRT)")
    assert note.pid == os.getpid() and note.thread == threading.get_native_id()  # the first one's: this thread's
    assert testing.take_abort_note() is None
    # an error DirectML raises itself (a 2-D cdist of unequal rows) is no abort: nothing noted
    with pytest.raises(RuntimeError):
        torch.cdist(torch.randn(3, 4, device=device), torch.randn(2, 4, device=device))
    assert testing.take_abort_note() is None


@pytest.mark.skipif(not POSIX or not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_childs_abort_reaches_the_parents_note(emulated_dml_backend):
    from dmlprof import testing

    testing.take_abort_note()
    pid = os.fork()
    if pid == 0:  # the child: an abort caught, then out without any exit handler (as multiprocessing's fork does)
        try:
            _caught(emulated_dml_backend.device())
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    note = testing.take_abort_note()
    assert note is not None and note.count == 1 and note.pid == pid and note.op == "aten::_fft_r2c"


PREAMBLE = """\
import sys, threading, torch
device = torch.device("privateuseone", 0)
model = torch.nn.Linear(8, 8).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)

def fallback_fft(h):  # "a CPU fallback": on torch-directml the process has already ended at the FFT
    try:
        return torch.fft.rfft(h).abs()[..., :4]
    except RuntimeError:
        return torch.fft.rfft(h.cpu()).abs()[..., :4].to(device)

def step():
    model(torch.randn(2, 8, device=device)).sum().backward()
    opt.step()
    opt.zero_grad()
"""

#: where the probe found a caught refusal unnoticed (rc 0, "every call ran on the device")
UNRECORDED = {
    # the second warm-up step: script mode records the first only
    "warm-up": ("for n in range(5):\n    if n == 1:\n        fallback_fft(torch.randn(2, 8, device=device))\n"
                "    step()\n", 2, False, "nothing recorded"),
    # past the recorded steps (--run-to-end): an evaluation after training
    "past the window": ("for n in range(4):\n    step()\nfallback_fft(torch.randn(2, 8, device=device))\n",
                        0, True, "nothing recorded"),
    "caught in a thread": ("for n in range(3):\n    if n == 1:\n        t = threading.Thread(target=fallback_fft, "
                           "args=(torch.randn(2, 8, device=device),)); t.start(); t.join()\n    step()\n",
                           0, False, "another thread"),
    "a thread dies of it": ("for n in range(3):\n    if n == 1:\n        t = threading.Thread(target=torch.fft.rfft, "
                            "args=(torch.randn(2, 8, device=device),)); t.start(); t.join()\n    step()\n",
                            0, False, "another thread"),
}


def _scan_stopped(tmp_path, backend, body, warmup, run_to_end):
    from dmlprof import runner

    script = tmp_path / "unrecorded_abort.py"
    script.write_text(PREAMBLE + body + 'open(sys.argv[1], "w").write("ran to its end")\n', encoding="utf-8")
    marker = tmp_path / "marker.txt"
    with pytest.raises(runner.ScanStopped) as stopped:
        runner.scan(script, backend=backend, profiler=False, warmup=warmup, steps=2, run_to_end=run_to_end,
                    script_args=[str(marker)])
    return stopped.value, marker


@pytest.mark.parametrize("case", sorted(UNRECORDED))
def test_an_abort_raised_where_nothing_records_still_ends_the_run_with_exit_4(tmp_path, emulated_dml_backend, case):
    from dmlprof.report import build_report

    body, warmup, run_to_end, where = UNRECORDED[case]
    stopped, marker = _scan_stopped(tmp_path, emulated_dml_backend, body, warmup, run_to_end)
    assert stopped.exit_code == 4 and "ends the process" in str(stopped) and where in str(stopped)
    assert marker.exists() == run_to_end  # the emulated device let the script go on, as R29 keeps it
    failure = stopped.session.meta.device_failure
    assert failure is not None and failure.kind == "aborts" and failure.op.startswith("aten::_fft_r2c")
    assert where in failure.op
    report = build_report(stopped.session)
    assert report.notes[0].label == "Fails on the device" and report.verdict.tone == "bad"
    from dmlprof.render.terminal import render_text

    # no call fell back, but not "every call ran on the device" under the headline of one that fails
    text = render_text(stopped.session, width=200)
    assert "every call on device tensors ran on the device" not in text
    assert "Fallbacks: none among the recorded calls - but the run fails on the device" in text


@pytest.mark.skipif(not POSIX, reason="DataLoader workers by fork: POSIX")
def test_a_forked_dataloader_worker_that_catches_an_abort_ends_the_run_with_exit_4(tmp_path, emulated_dml_backend):
    body = """\
from torch.utils.data import DataLoader, Dataset

class Spectra(Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        return fallback_fft(torch.randn(8, device=device)).cpu()

loader = DataLoader(Spectra(), batch_size=2, num_workers=1, multiprocessing_context="fork")
for batch in loader:
    model(torch.cat([batch, batch], 1).to(device)).sum().backward()
    opt.step()
    opt.zero_grad()
"""
    stopped, _ = _scan_stopped(tmp_path, emulated_dml_backend, body, 0, False)
    assert stopped.exit_code == 4 and "in forked process" in str(stopped)
    failure = stopped.session.meta.device_failure
    assert failure is not None and failure.kind == "aborts" and "in forked process" in failure.op


def test_a_profiled_block_whose_thread_caught_an_abort_leads_with_it(emulated_dml_backend):
    import torch

    import dmlprof

    device = emulated_dml_backend.device()
    with dmlprof.profile(backend=emulated_dml_backend, profiler=False) as run:
        (torch.ones(3, device=device) * 2).sum()
        worker = threading.Thread(target=_caught, args=(device,))
        worker.start()
        worker.join()
    failure = run.session.meta.device_failure
    assert failure is not None and failure.kind == "aborts" and "another thread" in failure.op


def test_a_recorded_abort_is_noted_once_not_again_as_an_unrecorded_one(tmp_path, emulated_dml_backend):
    """The recorder keeps a recorded abort itself (R29): the note read after the step must not replace it."""
    from dmlprof import runner

    script = tmp_path / "recorded.py"
    script.write_text(PREAMBLE + "for n in range(3):\n    fallback_fft(torch.randn(2, 8, device=device))\n"
                      "    step()\n", encoding="utf-8")
    with pytest.raises(runner.ScanStopped) as stopped:
        runner.scan(script, backend=emulated_dml_backend, profiler=False, warmup=0, steps=2)
    failure = stopped.value.session.meta.device_failure
    assert failure.op == "aten::_fft_r2c" and failure.source.endswith("recorded.py:8") and failure.calls_after > 0


THREAD_CATCHES = PREAMBLE + """\
for n in range(3):
    if n == 1:
        t = threading.Thread(target=fallback_fft, args=(torch.randn(2, 8, device=device),))
        t.start()
        t.join()
    step()
"""


def test_check_fails_a_script_whose_thread_caught_the_abort_and_the_report_leads_with_it(tmp_path, capsys):
    """`check script.py --target dml` (a script runs on the emulated device): an abort caught in a thread nothing
    records passed the gate (rc 0)."""
    import json

    from dmlprof.cli import main

    script = tmp_path / "thread_fft.py"
    script.write_text(THREAD_CATCHES + 'open(sys.argv[1], "w").write("x")\n', encoding="utf-8")
    out = tmp_path / "r"
    assert main(["check", str(script), "--target", "dml", "--warmup", "0", "--out", str(out), "--",
                 str(tmp_path / "marker")]) == 4
    err = capsys.readouterr().err
    assert "the emulated device raised its error in its place in another thread" in err
    session = next(out.glob("*.session.json"))
    assert main(["report", str(session), "--json", str(tmp_path / "r.json")]) == 0
    notes = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["notes"]
    assert notes[0]["label"] == "Fails on the device" and "another thread" in notes[0]["text"]


THREAD_IN_FORWARD = """\
import threading
import torch
from torch import nn

BATCH_SIZE = 2


class Spectral(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        def spectrum():
            try:
                torch.fft.rfft(x)
            except RuntimeError:  # "a CPU fallback": on torch-directml the process has already ended
                pass
        worker = threading.Thread(target=spectrum)
        worker.start()
        worker.join()
        return self.fc(x)


def build_model():
    return Spectral()


def make_batch(batch_size):
    return torch.randn(batch_size, 8), torch.randn(batch_size, 2)
"""


def test_a_prediction_whose_model_caught_the_abort_in_a_thread_ends_with_it(tmp_path):
    """`scan model.py --target dml`: the stand-in's abort, caught in a thread nothing records, said nothing (rc 0)."""
    from dmlprof import runner
    from dmlprof.predict import predict_scan

    model = tmp_path / "threaded_spectrum.py"
    model.write_text(THREAD_IN_FORWARD, encoding="utf-8")
    with pytest.raises(runner.ScanStopped) as stopped:
        predict_scan(model, batch_size=2)
    assert stopped.value.exit_code == 4
    assert "the prediction raised its error in its place in another thread" in str(stopped.value)
    failure = stopped.value.session.meta.device_failure
    assert failure.kind == "aborts" and "another thread" in failure.op and not failure.observed


def test_a_caught_refusal_counts_as_refused_not_as_a_call_that_ran_on_the_device(tmp_path, emulated_dml_backend):
    """(re-probe D5) a 2-D cdist of unequal rows raises on DirectML; the script caught it and went on (rc 0 is right:
    the real one raises too), but the report counted the call among those that ran on the device."""
    from dmlprof import runner
    from dmlprof.render.terminal import render_text
    from dmlprof.report import build_report

    script = tmp_path / "cdist_fallback.py"
    script.write_text(PREAMBLE + """\
for n in range(3):
    h = torch.randn(4, 8, device=device)
    try:
        d = torch.cdist(h, h[:2])
    except RuntimeError:
        d = torch.cdist(h.cpu(), h[:2].cpu()).to(device)
    step()
""", encoding="utf-8")
    session = runner.scan(script, backend=emulated_dml_backend, profiler=False, warmup=0, steps=2)
    ops = session.ops
    refused = ops[ops["op"] == "aten::_cdist_forward"]
    refused = refused[refused["input_devices"].str.contains("privateuseone")]
    assert len(refused) >= 2 and (refused["evidence"] == "refused").all()
    summary = build_report(session).summary
    assert summary.refused_calls == len(refused)
    assert summary.device_calls == int(((ops["verdict"] == "device") & (ops["evidence"] != "refused")).sum())
    text = render_text(session)
    assert f"{summary.refused_calls} refused by the device" in text and "but the" in text
    # the HTML's share of calls has a part for them: the parts sum to the calls counted
    from dmlprof.render.html import render_html

    split = build_report(session).verdict_split
    assert [part.verdict for part in split.calls][:2] == ["device", "refused"]
    assert abs(sum(part.share for part in split.calls) - 1) < 1e-9
    html = render_html(session)
    assert 'class="v-refused"><title>refused:' in html and "refused by the device</span>" in html
