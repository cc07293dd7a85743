"""Real code, unmodified: every zoo entry run without dmlprof, with it, and predicted, and compared.

GIVEN any ``*.py`` in the zoo folders (tests/zoo/models, tests/zoo/scripts, or
      the folders in ``DMLPROF_ZOO_DIRS``): model files and scripts alike,
      read by their syntax tree only (see zoo_harness/entries.py)
WHEN  it runs on the emulated DirectML device (each run in a fresh process,
      one optimizer-step window: 1 warm-up + 2 measured steps)
        bare:      without dmlprof (the oracle: the device's own fallback counters);
        dmlprof:   ``dmlprof scan FILE --device emulated-dml`` through the real CLI;
        predicted: ``dmlprof scan FILE --target dml`` in a process of its own
THEN  recording changes nothing: the same losses bit for bit, the same calls
      reaching the CPU fallback, the same profiler calls per step (each
      difference listed; the only accepted ones are the act of recording,
      see compare.EXPLANATIONS); the report's fallbacks are the device's; the
      report names only ops the program calls; the prediction equals the
      emulated scan call for call on the device (op, verdict, fallback ops;
      calls on CPU tensors include host work whose timing varies, such as a
      DataLoader unpickling its workers' batches); every process exits cleanly.
      An entry that stops on DirectML (the emulated device fails where
      torch-directml raises or ends the process) is compared up to that call,
      and the prediction must stop at the same call.

No entry is special-cased. An entry whose packages are not installed is
skipped, or fails when ``DMLPROF_ZOO_STRICT`` says they must be (``1``: all of
them; or a list of package names; CI sets it where the zoo's packages are installed).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zoo_harness import compare
from zoo_harness.entries import WINDOW, discover, selected, strict

REPO = Path(__file__).resolve().parents[2]
ZOO = Path(__file__).resolve().parent
ENTRIES = selected(discover())
TIMEOUT_S = 900

pytestmark = [pytest.mark.zoo, pytest.mark.slow]
_runs: dict = {}


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(ZOO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("PYTHONIOENCODING", "utf-8")
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


def _run(command: list, cwd: Path) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(command, cwd=cwd, env=_env(), capture_output=True, text=True, encoding="utf-8",
                              errors="replace", timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(command, -1, exc.stdout or "", f"timed out after {TIMEOUT_S} s")


def _harness_run(entry, mode: str, work: Path, repeat: int = 0) -> dict:
    """``run_entry`` in a fresh process; its JSON plus the process's exit code and stderr."""
    key = (entry.path, mode, repeat)
    if key not in _runs:
        folder = work / entry.name / f"{mode}{repeat or ''}"
        folder.mkdir(parents=True, exist_ok=True)
        out = folder / "result.json"
        command = [sys.executable, "-m", "zoo_harness.run_entry", mode, str(entry.path), "--out", str(out)]
        if mode == "dmlprof":
            command += ["--sessions", str(folder / "sessions")]
        done = _run(command, folder)
        result = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {
            "error": f"the process died before writing its result (exit code {done.returncode})"}
        result.update(returncode=done.returncode, stderr=done.stderr[-3000:])
        _runs[key] = result
    return _runs[key]


def _predict_run(entry, work: Path) -> dict:
    key = (entry.path, "predicted")
    if key not in _runs:
        folder = work / entry.name / "predicted"
        folder.mkdir(parents=True, exist_ok=True)
        warmup, steps = WINDOW
        command = [sys.executable, "-m", "dmlprof", "scan", str(entry.path), "--target", "dml", "--warmup",
                   str(warmup), "--steps", str(steps), "--out", str(folder / "sessions"), "--quiet"]
        if entry.from_device:
            command += ["--from", entry.from_device]
        done = _run(command, folder)
        sessions = sorted((folder / "sessions").glob("*.session.json"))
        _runs[key] = {"returncode": done.returncode, "stderr": done.stderr[-3000:], "command": command[3:],
                      "session": compare.load_session(sessions[0]) if sessions else None}
    return _runs[key]


@pytest.fixture(scope="session")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("zoo")


@pytest.fixture(params=ENTRIES, ids=[f"{e.path.parent.name}/{e.name}" for e in ENTRIES])
def entry(request):
    entry = request.param
    missing = entry.missing()
    if missing:
        message = f"{entry.name} needs {', '.join(missing)}, not installed with this torch"
        if strict(missing):
            pytest.fail(message)
        pytest.skip(message)
    return entry


def _stop(entry, work) -> dict:
    """Where the entry stops on DirectML, as the scan on the emulated device reports it (``{}``: it runs).

    The emulated device fails where torch-directml fails (raises, or would end the process): such an entry's
    runs are compared up to that call, and the stop itself must be the same without dmlprof, with it and
    in the prediction."""
    scanned = _harness_run(entry, "dmlprof", work)
    sessions = scanned.get("sessions") or []
    if scanned.get("exit_code") in (0, None) or len(sessions) != 1:
        return {}
    return compare.load_session(sessions[0])["meta"].get("device_failure") or {}


def _bare(entry, work) -> dict:
    bare = _harness_run(entry, "bare", work)
    stop = _stop(entry, work) if bare.get("error") else {}
    if bare.get("error") and not (stop.get("message") and stop["message"].split("\n")[0][:80] in bare["error"]):
        pytest.fail(f"without dmlprof the entry does not run on the emulated device, so there is nothing to "
                    f"compare with: {bare['error']}\n{bare.get('traceback', bare.get('stderr', ''))[-1500:]}")
    return bare


def _error_lines(stderr: str) -> str:
    """dmlprof's own one-line errors, else the end of stderr (without the profiler's chatter)."""
    lines = [line for line in stderr.splitlines() if not line.startswith(("USDT:", "W1", "I1"))]
    errors = [line for line in lines if line.startswith("dmlprof: error")]
    return "\n".join(errors or lines[-15:])


def _scanned(entry, work) -> dict:
    scanned = _harness_run(entry, "dmlprof", work)
    if scanned.get("error") or (scanned.get("exit_code") and not _stop(entry, work)):
        pytest.fail(f"dmlprof scan --device emulated-dml failed (exit code {scanned.get('exit_code')}): "
                    f"{scanned.get('error') or ''}\n{_error_lines(scanned.get('stderr', ''))}")
    return scanned


def _session(scanned: dict) -> dict:
    sessions = scanned.get("sessions") or []
    assert len(sessions) == 1, f"dmlprof saved {len(sessions)} sessions"
    session = compare.load_session(sessions[0])
    steps = session["meta"].get("steps")
    assert session["meta"].get("device_failure") or steps == WINDOW[1], (f"the session holds {steps} optimizer steps; asked for --warmup {WINDOW[0]} "
                                f"--steps {WINDOW[1]} (the program ran {scanned['optimizer_steps']} in all)")
    return session


def test_the_device_falls_back_only_where_directml_would(entry, work):
    """The oracle's own check: no op torch-directml has a kernel for reaches the emulated device's fallback."""
    from dmlprof.tables import load_table

    registered = set().union(*load_table("dml").registrations.values())
    wrong = sorted(set(_bare(entry, work)["fallback_counts"] or {}) & registered)
    assert not wrong, (f"the emulated device sent ops torch-directml registers to its CPU fallback: "
                       f"{', '.join(wrong)} (were they registered before their library was imported?)")


def _retaken(entry, work) -> bool:
    """Whether the scan took a failed warm-up step again, recorded (to show the call that fails): its
    process then made that step's calls twice, each time up to the failure."""
    return bool(_stop(entry, work)) and _harness_run(entry, "bare", work)["optimizer_steps"] < WINDOW[0]


def test_dmlprof_keeps_the_losses(entry, work):
    bare, scanned = _bare(entry, work), _scanned(entry, work)
    if not bare.get("error"):  # an entry that stops on DirectML keeps the losses before its stop
        assert len(bare["losses"]) >= sum(WINDOW), "the step window saw no loss: is backward() ever called?"
    if _retaken(entry, work):  # the failed step's losses once more, the same bit for bit
        bare = dict(bare, losses=bare["losses"] * 2)
    differences = compare.loss_differences(bare, scanned)
    assert not differences, "dmlprof changed what the program computes:\n" + compare.shorten(differences)


def test_dmlprof_keeps_the_fallbacks(entry, work):
    bare, scanned = _bare(entry, work), _scanned(entry, work)
    expected = bare["fallback_counts"] or {}
    if _retaken(entry, work):  # the failed step's fallbacks once more
        expected = {op: 2 * count for op, count in expected.items()}
    differences = compare.count_differences(expected, scanned["fallback_counts"],
                                            "reach the fallback without dmlprof", "with it")
    assert not differences, ("dmlprof changed which calls reach the device's CPU fallback (its own counters, "
                             "measured steps):\n" + compare.shorten(differences))


def test_reported_fallbacks_are_the_devices(entry, work):
    bare, scanned = _bare(entry, work), _scanned(entry, work)
    session = _session(scanned)
    differences = compare.count_differences(bare["fallback_counts"], compare.reported_fallbacks(session),
                                            "reach the device's fallback", "reported")
    assert not differences, "the report's fallbacks are not the device's:\n" + compare.shorten(differences)


def test_dmlprof_keeps_the_op_sequence(entry, work):
    bare, scanned = _bare(entry, work), _scanned(entry, work)
    unexplained, explained = compare.trace_differences(bare, scanned)
    if explained:
        print("explained differences (the act of recording):\n" + compare.shorten(explained))
    assert not unexplained, ("torch.profiler's calls differ with and without dmlprof:\n"
                             + compare.shorten(unexplained) + "\nexplained:\n" + compare.shorten(explained, 10))


def test_reported_ops_are_the_programs(entry, work):
    bare, scanned = _bare(entry, work), _scanned(entry, work)
    if _retaken(entry, work):
        pytest.skip(f"stops on DirectML at {_stop(entry, work)['op']} in its first step: the program has no "
                    "measured step to count calls in (the stop is compared by the prediction and fallback tests)")
    differences = compare.reported_op_differences(_session(scanned), bare)
    assert not differences, ("the report names calls the program without dmlprof does not make:\n"
                             + compare.shorten(differences))


#: Entries whose prediction cannot equal emulation call for call, the only calls it may miss, and why.
#: Not a verdict of the product's; any other difference, or one more op, still fails.
PREDICTION_GAPS: dict = {}


def test_prediction_equals_emulation(entry, work):
    gap_ops, gap = PREDICTION_GAPS.get(entry.path.stem, (frozenset(), ""))
    scanned = _scanned(entry, work)
    predicted = _predict_run(entry, work)
    session = predicted["session"]
    if session is None:
        pytest.fail(f"dmlprof {' '.join(predicted['command'])} saved no session (exit code "
                    f"{predicted['returncode']}): {_error_lines(predicted['stderr'])}")
    emulated = _session(scanned)
    stopped = (emulated["meta"].get("device_failure") or {}).get("op")
    assert (session["meta"].get("device_failure") or {}).get("op") == stopped, (
        f"the emulated device {'stopped at ' + stopped if stopped else 'ran'}; the prediction "
        f"{'stopped at ' + session['meta']['device_failure']['op'] if session['meta'].get('device_failure') else 'ran'}")
    differences = compare.row_differences(compare.session_rows(emulated, device_only=True, as_on_directml=True),
                                          compare.session_rows(session, device_only=True, as_on_directml=True),
                                          emulated_only=gap_ops)
    assert not differences, ("prediction and emulation differ call for call"
                             + compare.meta_differences(emulated, session) + (f" beyond the known gap ({gap})" if gap else "")
                             + ":\n" + compare.shorten(differences, 60))
    assert predicted["returncode"] == (scanned["exit_code"] or 0), predicted["stderr"][-1500:]
    # the steps of the calls compared above: host calls (a DataLoader rebuilding its workers' batches)
    # land in whichever step their timing decides
    if not gap_ops:
        assert compare.session_steps(emulated, device_only=True) == compare.session_steps(session, device_only=True)
    else:
        assert emulated["meta"]["steps"] == session["meta"]["steps"]


#: the zoo on the real torch-directml (tools/realdml/run_zoo.py): each entry's outcome and calls per step
REAL_DIRECTML = ZOO / "realdml_results.json"


def _real_directml(entry) -> dict:
    """What the real torch-directml did with this entry (skips where it was not measured, or on another torch)."""
    import torch

    if not REAL_DIRECTML.is_file():
        pytest.skip("the zoo has not been run on the real torch-directml (tools/realdml/run_zoo.py)")
    measured = json.loads(REAL_DIRECTML.read_text(encoding="utf-8"))
    torch_there = measured["versions"]["torch"].split("+")[0]
    if torch.__version__.split("+")[0] != torch_there:
        pytest.skip(f"measured on torch {torch_there} (torch-directml's pin); this is torch {torch.__version__}")
    key = str(entry.path.relative_to(REPO)).replace(os.sep, "/") if entry.path.is_relative_to(REPO) else ""
    if key not in measured["entries"]:
        pytest.skip(f"{entry.name} was not run on the real torch-directml (tools/realdml/run_zoo.py {key})")
    return measured["entries"][key]


#: calls that failed on realdml and that the prediction runs, each with why it holds that they run on GPUs
REALDML_ONLY_FAILURES = {
    "torchvision::_roi_align_backward": (
        "E_FAIL on realdml (lavapipe), not reported on GPUs: the adapter's, likely (roi_align's backward adds "
        "floats atomically); the prediction keeps torch-directml's registered kernel, which runs"),
}


#: entries whose prediction differs from real DirectML in these ops only, and why (a layout torch-directml's
#: opaque tensors report that the prediction's tensors, the CPU's layouts, do not: docs/realdml.md)
REAL_LAYOUT_GAPS = {
    "swin_t": ({"aten::as_strided_", "aten::as_strided", "aten::copy_", "aten::new_zeros", "aten::squeeze.dim"},
               "torch-directml's tensors never suggest a channels-last layout (its memory_format must be Contiguous), "
               "so adaptive_avg_pool2d of Swin's permuted features skips the as_strided_ (and its backward) that "
               "the prediction's tensors, laid out as on the CPU, take"),
    "detr": ({"aten::_reshape_alias", "aten::_unsafe_view", "aten::add_.Tensor", "aten::addmm", "aten::clone",
              "aten::mm", "aten::view"},
             "three linear layers see a contiguous input on torch-directml and a strided one in the prediction "
             "(addmm on a view there, clone + mm here): an output layout of torch-directml's kernels not modelled"),
}


def test_prediction_equals_real_directml(entry, work):
    """The prediction against the real torch-directml's own run of the entry (committed, measured on realdml):
    the same outcome, and the same device calls per step (op, verdict, fallback ops)."""
    real = _real_directml(entry)
    stack_only = REALDML_ONLY_FAILURES.get((real.get("device_failure") or {}).get("op"))
    if stack_only:
        pytest.skip(f"real DirectML stopped at {real['device_failure']['op']}: {stack_only}")
    predicted = _predict_run(entry, work)
    session = predicted["session"]
    assert session is not None, f"the prediction saved no session: {_error_lines(predicted['stderr'])}"
    failure = (session["meta"].get("device_failure") or {}).get("op")
    assert failure == (real.get("device_failure") or {}).get("op"), (
        f"real DirectML {'stopped at ' + real['device_failure']['op'] if real.get('device_failure') else 'ran'}; "
        f"the prediction {'stopped at ' + failure if failure else 'ran'}")
    from zoo_harness.realdml import device_calls, gradient_adds_merged

    expected, got = real["calls"], device_calls(session)
    if (session["meta"].get("device") or {}).get("backend") == "emulated-dml":  # a script's --target dml runs on the emulated device
        expected, got = gradient_adds_merged(expected), gradient_adds_merged(got)
    gap_ops, gap = REAL_LAYOUT_GAPS.get(entry.path.stem, (set(), ""))
    differences = [f"step {step}: {line}" for step in sorted(set(expected) | set(got))
                   for line in compare.count_differences(expected.get(step, {}), got.get(step, {}), "on DirectML",
                                                         "predicted")
                   if line.split("|", 1)[0] not in gap_ops]
    assert not differences, "prediction and real DirectML differ:\n" + "\n".join(differences)[:4000]


def test_runs_end_cleanly(entry, work):
    runs = {mode: _harness_run(entry, mode, work) for mode in ("bare", "dmlprof")}
    for mode, run in runs.items():
        assert run["returncode"] == 0 and "terminate called" not in run["stderr"], (
            f"the {mode} run's process ended with exit code {run['returncode']}: {run['stderr'][-800:]}")


def _first(kind: str):
    return next((e for e in ENTRIES if e.kind == kind and not e.missing()), None)


@pytest.mark.parametrize("kind", sorted({entry.kind for entry in ENTRIES}))  # the kinds selected
def test_the_bare_run_repeats_exactly(kind, work):
    """Two bare runs agree bit for bit and call for call, so every difference above is dmlprof's.

    Checked on the first installable entry of each kind (model file, script): the same harness,
    the same entry, two fresh processes.
    """
    entry = _first(kind)
    if entry is None:
        pytest.skip(f"no {kind} entry is installable here")
    first, second = _bare(entry, work), _harness_run(entry, "bare", work, repeat=1)
    assert second.get("error") == first.get("error"), second.get("error")  # an entry that stops, stops alike
    assert first["losses"] == second["losses"]
    assert first["fallback_counts"] == second["fallback_counts"]
    unexplained, explained = compare.trace_differences(first, second)
    assert not unexplained and not explained, compare.shorten(unexplained + explained)
