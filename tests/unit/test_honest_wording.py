"""Each command says what its figures mean and what it could not see, and offers a command that works
(issue 37): the emulated device's times, the LSTM fix's command."""
from __future__ import annotations

import shlex

import pytest

from dmlprof.backends.emulated import EmulatedDmlBackend
from dmlprof.backends.errors import match_known_error
from dmlprof.cli import build_parser


def test_an_emulated_scan_says_its_times_are_the_host_cpus():
    """The run's timing fact (the report's 'timing' line) on the emulated device names the host CPU, not a GPU."""
    timing = EmulatedDmlBackend().run_meta().timing
    assert "host CPU" in timing and "never a GPU's" in timing
    assert "synchronised" not in timing


def test_the_lstm_fix_names_a_scan_command_that_parses_and_is_not_refused():
    """The LSTM failure's remedy names the command that shows the result; that command must be one dmlprof
    accepts (--replace is refused with --target; it runs on --device emulated-dml)."""
    known = match_known_error("Could not run 'aten::_thnn_fused_lstm_cell' with arguments from the 'CPU' backend")
    command = known.remedy[known.remedy.index("dmlprof scan"):known.remedy.index(" shows the result")]
    args = build_parser().parse_args(shlex.split(command)[1:])
    assert args.replace and args.device == "emulated-dml" and not args.target


def test_a_missing_file_or_a_syntax_error_is_said_before_torch_is_imported(tmp_path):
    """`dmlprof scan nope.py` answered in 6.5 s (torch imported first): the file is read before torch is."""
    import subprocess
    import sys
    from pathlib import Path

    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n", encoding="utf-8")
    code = ("import sys\nfrom dmlprof.cli import main\n"
            "for argv in sys.argv[1:]:\n"
            "    command, path = argv.split('=')\n"
            "    print('exit', main([command, path]))\n"
            "print('torch imported' if 'torch' in sys.modules else 'torch not imported')\n")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code, f"scan={tmp_path / 'nope.py'}", f"scan={bad}",
                           f"check={tmp_path / 'nope.py'}", f"check={bad}"],
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path),
                          env={**__import__("os").environ, "PYTHONPATH": str(root)})
    assert done.stdout.count("exit 2") == 4, done.stdout + done.stderr
    assert done.stderr.count("no such file") == 2 and done.stderr.count("syntax error in") == 2
    assert "torch not imported" in done.stdout


def test_a_script_stopped_before_its_first_step_says_no_warm_up_ran():
    """'0 optimizer steps taken: 0 recorded after 1 warm-up, the script ended' said a warm-up ran and the script
    ended where neither happened: the warm-ups counted are those taken, and a stopped run says it was stopped."""
    from dmlprof.render.terminal import render_text
    from session_kinds import KINDS, _changed

    stopped = _changed(KINDS["script_mode"](), steps=0, partial=True, partial_reason="KeyboardInterrupt",
                       script_window={"warmup_steps": 1, "steps_requested": 2, "optimizer_steps_taken": 0,
                                      "window_closed": False, "run_to_end": False})
    text = " ".join(render_text(stopped, width=200).split())
    assert "no optimizer step taken: recorded from its start until it was stopped" in text
    ended = _changed(stopped, partial=False, partial_reason=None)
    assert "no optimizer step taken: recorded from its start until it ended" in " ".join(
        render_text(ended, width=200).split())
    ran = " ".join(render_text(KINDS["script_mode"](), width=200).split())
    assert "3 optimizer steps taken: 2 recorded after 1 warm-up, then stopped" in ran


def test_report_trace_of_a_prediction_refuses_before_printing_the_report(tmp_path, capsys):
    """`dmlprof report PREDICTION --trace FILE` printed the whole report, then refused: refuse first."""
    from dmlprof.cli import main
    from session_kinds import KINDS

    path = tmp_path / "predicted.session.json"
    KINDS["predicted"]().save(str(path))
    code = main(["report", str(path), "--trace", str(tmp_path / "trace.json")])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "no timed op calls" in err and "--device emulated-dml" in err
    assert not (tmp_path / "trace.json").exists()


@pytest.mark.parametrize("recorded, says", [([30.0], "recording's own cost"), ([8.0], "no slower")])
def test_the_step_time_line_credits_recording_only_with_a_cost_it_had(recorded, says):
    from dmlprof.render.terminal import render_text
    from session_kinds import KINDS, _changed

    session = _changed(KINDS["live_dml"](), step_times_ms=[10.0, 10.0, 10.0], recorded_step_times_ms=recorded)
    text = " ".join(render_text(session, width=200).split())
    assert says in text and ("recording's own cost" in text) == (recorded[0] > 10.0)


def test_a_run_folders_saved_line_has_no_escaped_newline(tmp_path, capsys):
    """A literal '\\x0a' stood before every 'run saved to': the blank line before it is a real one."""
    import argparse

    from dmlprof.job.report import print_run
    from session_kinds import job_run, rank_session

    job_run(tmp_path, {0: rank_session(0), 1: rank_session(1)})
    print_run(str(tmp_path), argparse.Namespace(quiet=False, top=15, json=None, html=None, trace=None, tb=None))
    out = capsys.readouterr().out
    assert "\\x0a" not in out and "\nrun saved to" in out


def test_ctrl_c_before_any_step_says_nothing_was_saved(tmp_path, capsys):
    """Ctrl-C while the model was being built said 'interrupted before any step ran' and left the reader to
    guess whether anything was kept (issue 37): it says that nothing was."""
    from dmlprof.cli import main

    model = tmp_path / "interrupted_model.py"
    model.write_text("def build_model():\n    raise KeyboardInterrupt\n\n\ndef make_batch(batch_size):\n"
                     "    return None\n", encoding="utf-8")
    assert main(["scan", str(model), "--device", "cpu", "--no-profiler", "--out", str(tmp_path / "out")]) == 130
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("dmlprof: error:")]
    assert "interrupted before any step ran" in line and "nothing was saved" in line
    assert not list((tmp_path / "out").glob("*.session.json"))


def test_a_run_folders_saved_line_fits_as_a_scans_does(tmp_path, capsys):
    """'run saved to DIR  (re-render: dmlprof report DIR)' was one line of 125 characters at 80 columns: the
    command goes on a line of its own, as a scan's 'session saved to' puts it."""
    import argparse

    from dmlprof.job.report import print_run
    from session_kinds import job_run, rank_session

    job_run(tmp_path, {0: rank_session(0), 1: rank_session(1)})
    print_run(str(tmp_path), argparse.Namespace(quiet=False, top=15, json=None, html=None, trace=None, tb=None))
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2] == f"run saved to {tmp_path}"
    assert lines[-1] == f"  re-render it: dmlprof report {tmp_path}"


@pytest.mark.parametrize("warmup, taken, setup_recorded", [(0, 3, True), (1, 3, False), (2, 1, True)])
def test_cpu_calls_of_a_scripts_set_up_are_not_said_to_be_inside_the_step(warmup, taken, setup_recorded):
    """With --warmup 0 a script's set-up (parameter init before model.to(device)) is recorded with its first
    step, and its CPU calls were listed as 'inside the step' (issue 37): the table says the set-up is in it."""
    from dmlprof.render.terminal import render_text
    from session_kinds import _changed, script_mode

    window = {"warmup_steps": warmup, "steps_requested": 2, "optimizer_steps_taken": taken,
              "window_closed": taken >= warmup + 2, "run_to_end": False}
    text = render_text(_changed(script_mode(), script_window=window), width=200)
    assert "Calls on CPU tensors" in text
    assert ("the script's set-up before its first optimizer step included" in text) is setup_recorded
    assert ("Calls on CPU tensors inside the step" in text) is not setup_recorded


INTERRUPTED_AT_SECOND_FORWARD = """
import torch

CALLS = [0]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] == 2:  # the recorded step is done: Ctrl-C while it is timed again, unrecorded
            raise KeyboardInterrupt
        return self.fc(x)


def build_model():
    return Net()


def make_batch(batch_size):
    return torch.randn(batch_size, 4), torch.randn(batch_size, 2)
"""


def test_ctrl_c_while_the_step_is_timed_unrecorded_keeps_the_whole_recording(tmp_path):
    """On an accelerator the recorded steps are timed again, unrecorded; a Ctrl-C there lost the whole recording
    ('interrupted', nothing saved). GIVEN it; THEN the run stops with the recorded session, said so, exit 130."""
    from dmlprof.backends.cpu import CpuBackend
    from dmlprof.runner import ScanStopped
    from dmlprof.runner.contract import ContractRun

    class Accelerator(CpuBackend):  # the CPU's kernels, run as an accelerator's would be (unrecorded steps timed)
        def is_accelerator(self):
            return True

    model = tmp_path / "net.py"
    model.write_text(INTERRUPTED_AT_SECOND_FORWARD, encoding="utf-8")
    run = ContractRun(model, Accelerator(), sync=True, profiler=False, run_mode="contract")
    with pytest.raises(ScanStopped) as stopped:
        run.run(batch_size=2, steps=1, warmup=0)
    assert stopped.value.exit_code == 130 and "the recording is whole" in str(stopped.value.cause)
    session = stopped.value.session
    assert not session.ops.empty and session.meta.steps == 1 and session.meta.partial


def test_ctrl_c_in_the_warm_up_says_nothing_was_saved(tmp_path):
    from dmlprof.backends.cpu import CpuBackend
    from dmlprof.errors import Interrupted
    from dmlprof.runner.contract import ContractRun

    model = tmp_path / "net.py"
    model.write_text(INTERRUPTED_AT_SECOND_FORWARD.replace("CALLS[0] == 2", "CALLS[0] == 1"), encoding="utf-8")
    with pytest.raises(Interrupted, match="before any step was recorded: nothing was saved"):
        ContractRun(model, CpuBackend(), sync=True, profiler=False, run_mode="contract").run(
            batch_size=2, steps=1, warmup=1)


@pytest.mark.parametrize("target, device", [("mps", "MPS"), ("xpu", "XPU"), ("dml", "DirectML")])
def test_a_predicted_failure_names_the_target_it_was_predicted_for(target, device):
    """Re-probe 12: every MPS and XPU prediction's headline said "Fails on DirectML"."""
    from session_kinds import _changed, predicted

    from dmlprof.report import build_report

    failure = {"op": "aten::_copy_from", "kind": "raises", "message": "no", "observed": False}
    for calls_after in (None, 3):
        session = _changed(predicted(), target=target, device_failure=dict(failure, calls_after=calls_after))
        note = build_report(session).device_failure_note
        assert note.startswith(f"Fails on {device}: aten::_copy_from")
        assert ("DirectML" in note) == (device == "DirectML")
