"""The hostile-but-realistic probe of issue 16, kept as tests: bad model files, bad session files,
bad option values and bad file-system conditions, each through the real CLI in a subprocess.

Every failing case asserts the same contract (docs/exit_codes.md): exactly one
``dmlprof: error:`` line on stderr, no traceback, the documented exit code, and
what was kept on disk. Cases name the defect they keep out (D1, D2, ...).

File-system conditions are real: a small tmpfs filled to the brim for a full
disk (where this process may mount one: root on Linux, as in CI), else
RLIMIT_FSIZE on the child; a read-only tmpfs (root) or a chmod-ed folder
(anyone else) for a read-only folder; /dev/full for standard output.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import pytest

from conftest import SIGNALS_REACH, run_cli

pytestmark = pytest.mark.slow
POSIX = sys.platform != "win32"
LINUX = sys.platform.startswith("linux")

CONTRACT = '''\
import os, sys, torch
BATCH_SIZE = {batch_size}

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)
        self.calls = 0

    def forward(self, x):
        self.calls += 1  # call 1 is the warm-up step, 2 the first measured step, 3 the second
        {forward}
        return self.fc(x)

def build_model():
    {build}
    return Net()

def make_batch(batch_size):
    {batch}
    g = torch.Generator().manual_seed(0)
    return torch.randn(batch_size, 4, generator=g), torch.randn(batch_size, 2, generator=g)

def loss_fn(output, target):
    {loss}
    return torch.nn.functional.mse_loss(output, target)

def make_optimizer(params):
    {optimizer}
    return torch.optim.SGD(params, lr=0.1)
'''

SCRIPT = '''\
import os, sys, torch
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    model(torch.randn(3, 4)).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
{end}
'''


def contract(batch_size="4", **hooks) -> str:
    parts = {"forward": "pass", "build": "pass", "batch": "pass", "loss": "pass", "optimizer": "pass", **hooks}
    return CONTRACT.format(batch_size=batch_size, **parts)


def script(end: str = "") -> str:
    return SCRIPT.format(end=end)


# -- what each case checks ---------------------------------------------------------------------------------
def error_line(result) -> str:
    """The one stderr line of a failed run (and no traceback)."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("dmlprof: error: "), lines[0]
    return lines[0]


def sessions(folder: Path) -> list:
    return sorted(folder.rglob("*.session.json")) if folder.exists() else []


def no_session(tmp: Path, result) -> None:
    assert sessions(tmp / "reports") == []


def partial_session(steps: int, at_least: bool = False):
    """One partial session with ``steps`` measured steps (``at_least``: a script's, whose window is its own)."""
    def check(tmp: Path, result) -> None:
        (path,) = sessions(tmp / "reports")
        meta = json.loads(path.read_text(encoding="utf-8"))["meta"]
        assert meta["partial"] is True and (meta["steps"] >= steps if at_least else meta["steps"] == steps), meta
        assert str(path.relative_to(tmp)) in result.stderr  # the error line says where it went
    return check


def complete_session(tmp: Path, result) -> dict:
    (path,) = sessions(tmp / "reports")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["meta"]["partial"] is False
    return data


@dataclass
class Case:
    id: str
    args: list
    code: int
    words: str = ""
    files: dict = field(default_factory=dict)
    kept: Optional[Callable] = None
    env: dict = field(default_factory=dict)
    live: bool = False  # runs the recorder: also in the torch 2.4.1 lane

    def param(self):
        return pytest.param(self, id=self.id, marks=[pytest.mark.live] if self.live else [])


def run_case(case: Case, tmp: Path):
    for name, text in case.files.items():
        if isinstance(text, bytes):
            (tmp / name).write_bytes(text)
        else:
            (tmp / name).write_text(text, encoding="utf-8")
    result = run_cli(*case.args, cwd=tmp, env=case.env)
    assert result.returncode == case.code, (result.returncode, result.stdout[-2000:], result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    if case.code != 0:
        assert case.words.lower() in error_line(result).lower(), result.stderr
    if case.kept is not None:
        case.kept(tmp, result)
    return result


# -- model files ---------------------------------------------------------------------------------------------
def _nan_kept(tmp, result):
    meta = complete_session(tmp, result)["meta"]
    assert meta["nonfinite_loss"]["value"] == "nan" and meta["nonfinite_loss"]["step"] == 1
    assert "op calls" in result.stdout and "LOSS" in result.stdout  # the report is there, and says it


def _report_and_complete(tmp, result):
    complete_session(tmp, result)
    assert "op calls" in result.stdout


def _chdir_kept(tmp, result):
    (path,) = sessions(tmp)
    assert path.parent == tmp / "reports" and (tmp / "r.json").is_file()
    assert list((tmp / "elsewhere").iterdir()) == []
    assert f"session saved to {path.relative_to(tmp)}" in result.stdout


def _long_name_kept(tmp, result):
    complete_session(tmp, result)
    assert (tmp / "r.json").is_file() and (tmp / "r.html").is_file()


def _model_untouched(tmp, result):
    assert (tmp / "m.py").read_text(encoding="utf-8") == contract()
    no_session(tmp, result)


def _stdout_json(tmp, result):
    assert json.loads(result.stdout)["summary"]["op_calls"] > 0
    complete_session(tmp, result)
    assert "session saved to" in result.stderr


def _contract_scan(tmp, result):
    complete_session(tmp, result)
    assert json.loads((tmp / "r.json").read_text(encoding="utf-8"))["meta"]["run_mode"] == "contract"


def _escapes_shown(tmp, result):
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "Fallbacks: none - forged" not in result.stdout.splitlines()
    assert "\\x1b]2;pwned" in result.stdout


LONG = "m" * 226 + ".py"  # 229 characters: over NAME_MAX once "-cpu-<stamp>.session.json" is added

MODEL_CASES = [
    # D1: sys.exit() from contract code is a model error (exit 3), never a silent success
    Case("D1-build_model-exit0", ["scan", "m.py"], 3, "build_model() called sys.exit(0)",
         {"m.py": contract(build="sys.exit(0)")}, no_session, live=True),
    Case("D1-make_batch-exit0", ["scan", "m.py"], 3, "make_batch() called sys.exit(0)",
         {"m.py": contract(batch="sys.exit(0)")}, no_session, live=True),
    Case("D1-make_optimizer-exit0", ["scan", "m.py"], 3, "make_optimizer() called sys.exit(0)",
         {"m.py": contract(optimizer="sys.exit(0)")}, no_session, live=True),
    Case("D1-forward-exit0-on-step2", ["scan", "m.py", "--steps", "3"], 3, "step 2 called sys.exit(0)",
         {"m.py": contract(forward="if self.calls == 3: sys.exit(0)")}, partial_session(1), live=True),
    Case("D1-loss-exit5-on-step2", ["scan", "m.py", "--steps", "3"], 3, "step 2 called sys.exit(5)",
         {"m.py": contract(forward="if self.calls == 3: self.fc.weight.data.fill_(float('nan'))",
                           loss="if not torch.isfinite(output).all(): sys.exit(5)")}, partial_session(1), live=True),
    # D18: os._exit() ends the scanned process there, as under plain python; the supervisor still reports and saves
    # what the child journaled (its calls, and a model file's measured steps with their times)
    Case("D18-script-os_exit0", ["scan", "s.py"], 0, "", {"s.py": script("os._exit(0)")}, _report_and_complete,
         live=True),
    Case("D18-script-os_exit2", ["scan", "s.py"], 3, "exited with status 2 (os._exit) at s.py:",
         {"s.py": script("os._exit(2)")}, partial_session(1), live=True),  # 2 steps taken, 1 after the warm-up
    Case("D18-forward-os_exit0", ["scan", "m.py", "--steps", "3"], 3, "m.py called os._exit(0) at m.py:",
         {"m.py": contract(forward="if self.calls == 3: os._exit(0)")}, partial_session(1), live=True),
    # D6: a script's os.chdir does not move dmlprof's outputs
    Case("D6-script-chdir", ["scan", "s.py", "--json", "r.json"], 0, "",
         {"s.py": "import os\nos.makedirs('elsewhere', exist_ok=True)\nos.chdir('elsewhere')\n" + script()}, _chdir_kept,
         live=True),
    # D12: BATCH_SIZE that is not a batch size
    *[Case(f"D12-BATCH_SIZE-{label}", ["scan", "m.py"], 2, "BATCH_SIZE must be a whole number",
           {"m.py": contract(batch_size=value)}, no_session)
      for label, value in (("abc", '"abc"'), ("None", "None"), ("list", "[8]"), ("zero", "0"), ("True", "True"))],
    # D16: make_optimizer returning something that is not an optimizer
    Case("D16-optimizer-list", ["scan", "m.py"], 2, "make_optimizer() must return an optimizer",
         {"m.py": contract(optimizer="return [torch.optim.SGD(params, lr=0.1)]")}, no_session),
    Case("contract-function-not-callable", ["scan", "m.py"], 2, "make_batch must be a function",
         {"m.py": contract() + "make_batch = 3\n"}, no_session),
    # D14: a NaN or infinite loss fails the scan (exit 3) after a complete report and session
    Case("D14-nan-loss", ["scan", "m.py", "--steps", "2"], 3, "the loss was nan at training step 1",
         {"m.py": contract(loss="return torch.nn.functional.mse_loss(output, target) * float('nan')")}, _nan_kept,
         live=True),
    Case("D14-inf-loss-from-step3", ["scan", "m.py", "--steps", "3"], 3, "the loss was inf at training step 3",
         {"m.py": contract(loss="if self_calls[0] >= 2: return output.abs().sum() * float('inf')\n    self_calls[0] += 1")
          + "self_calls = [0]\n"}, complete_session, live=True),
    # D24: a contract defined through a star import is scanned as a contract
    Case("D24-star-import-contract", ["scan", "m.py", "--json", "r.json"], 0, "",
         {"parts.py": contract(), "m.py": "from parts import *\n"}, _contract_scan, live=True),
    # D10: a model file name too long for a file system's NAME_MAX once decorated
    Case("D10-230-char-name", ["scan", LONG, "--json", "r.json", "--html", "r.html"], 0, "", {LONG: contract()},
         _long_name_kept),
    # D17: outputs that would destroy the input or each other are refused before anything runs
    Case("D17-json-is-the-model", ["scan", "m.py", "--json", "m.py"], 2, "is the input file itself", {"m.py": contract()},
         _model_untouched),
    Case("D17-json-and-html-one-file", ["scan", "m.py", "--json", "r.out", "--html", "./r.out"], 2,
         "name the same file", {"m.py": contract()}, no_session),
    Case("D17-json-to-stdout", ["scan", "m.py", "--json", "-"], 0, "", {"m.py": contract()}, _stdout_json),
]


@pytest.mark.parametrize("case", [case.param() for case in MODEL_CASES])
def test_bad_model_files(case, tmp_path):
    run_case(case, tmp_path)


# -- session files (dmlprof report) --------------------------------------------------------------------------
def _session_text(meta=None, ops=None, extras=None, version=1) -> str:
    data = {"format": "dmlprof-session", "format_version": version, "meta": {"model_name": "x", "backend": "dml"}
            if meta is None else meta, "ops": ops or {}, "profiler_ops": {}, "extras": extras or {}}
    return json.dumps(data)


def _unchanged(name, text):
    def check(tmp, result):
        assert (tmp / name).read_text(encoding="utf-8") == text  # a failed report never touches its input
    return check


ESC_OPS = {"op": ["aten::x\x1b]2;pwned\x07\nFallbacks: none - forged"], "verdict": ["fallback"],
           "fallback_ops": ["aten::x=1"], "fallback_calls": [1], "module": ["M\x1b[31m"], "source": ["a.py:1"],
           "time_ns": [5], "seq": [0], "step": [0], "phase": ["forward"]}
SESSION_BODIES = {
    "D4-version-string": (_session_text(version="1"), "format_version"),
    "D4-version-null": (_session_text(version=None), "format_version"),
    "D4-meta-list": (_session_text(meta=[1]), "meta should be an object"),
    "D4-meta-string": (_session_text(meta="x"), "meta should be an object"),
    "D4-ragged-ops": (_session_text(ops={"op": ["a", "b"], "seq": [1]}), "different lengths"),
    "D4-infinity": (_session_text(ops={"time_ns": [1]}).replace('"time_ns": [1]', '"time_ns": [Infinity]'), "Infinity"),
    "D4-bad-verify": (_session_text(extras={"verify": {"divergent": [{"op": 3}]}}), "extras.verify.divergent[0].op"),
    "D4-meta-types": (_session_text(meta={"step_times_ms": "fast"}), "meta.step_times_ms"),
    "D4-deep-nesting": ('{"format": "dmlprof-session", "format_version": 1, "meta": '
                        + "[" * 50_000 + "]" * 50_000 + "}", "nested too deeply"),
    "not-json": ("{", "not a dmlprof session file"),
    "not-utf8": (b"\xff\xfe{", "not UTF-8"),
}
SESSION_CASES = [
    *[Case(name, ["report", "s.session.json"], 2, words, {"s.session.json": text},
           _unchanged("s.session.json", text) if isinstance(text, str) else None)
      for name, (text, words) in SESSION_BODIES.items()],
    # D8: names with terminal escapes are shown, not obeyed
    Case("D8-escapes-in-names", ["report", "s.session.json"], 0, "", {"s.session.json": _session_text(ops=ESC_OPS)},
         _escapes_shown),
    # D17: a report written over its own session is refused
    Case("D17-json-is-the-session", ["report", "s.session.json", "--json", "s.session.json"], 2,
         "is the input file itself", {"s.session.json": _session_text()},
         _unchanged("s.session.json", _session_text())),
]


@pytest.mark.parametrize("case", [case.param() for case in SESSION_CASES])
def test_bad_session_files(case, tmp_path):
    run_case(case, tmp_path)


# -- option values ---------------------------------------------------------------------------------------------
OPTION_CASES = [
    Case("D13-view-port-99999", ["view", ".", "--port", "99999"], 2, "--port: 99999 is too large"),
    Case("D13-view-port-negative", ["view", ".", "--port", "-1"], 2, "--port: -1 is too small"),
    *[Case(f"D13-memory-budget-{v}", ["sweep", "m.py", "--batch-sizes", "4", "--memory-budget", v], 2,
           "--memory-budget", {"m.py": contract()}) for v in ("nan", "inf", "1e400")],
    Case("D13-batch-sizes-past-int64", ["sweep", "m.py", "--batch-sizes", "99999999999999999999"], 2,
         "beyond any batch size", {"m.py": contract()}),
    Case("D13-child-memory-limit-huge", ["sweep", "m.py", "--batch-sizes", "4", "--child-memory-limit",
                                         "99999999999T"], 2, "larger than any memory", {"m.py": contract()}),
    Case("D13-child-timeout-nan", ["sweep", "m.py", "--batch-sizes", "4", "--child-timeout", "nan"], 2,
         "not a finite number of seconds", {"m.py": contract()}),
    Case("D13-time-budget-nan", ["sweep", "m.py", "--auto", "--time-budget", "nan"], 2,
         "not a finite number of seconds", {"m.py": contract()}),
    Case("D13-top-negative", ["scan", "m.py", "--top", "-1"], 2, "--top: -1 is too small", {"m.py": contract()}),
    Case("D13-report-top-negative", ["report", "s.json", "--top", "-1"], 2, "--top: -1 is too small"),
    Case("D13-steps-zero", ["scan", "m.py", "--steps", "0"], 2, "--steps: 0 is too small", {"m.py": contract()}),
    Case("D25-extensions-dir-is-a-file", ["scan", "m.py", "--device", "emulated-dml"], 4,
         "cannot create the build folder", {"m.py": contract(), "blocker": "x"}, no_session,
         env={"DMLPROF_TORCH_EXTENSIONS_DIR": "blocker"}),
]


@pytest.mark.parametrize("case", [case.param() for case in OPTION_CASES])
def test_bad_option_values(case, tmp_path):
    run_case(case, tmp_path)


# -- file-system conditions -----------------------------------------------------------------------------------------
def _mount_tmpfs(path: Path, options: str) -> bool:
    if not LINUX or os.geteuid() != 0 or not shutil.which("mount"):
        return False
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    return done.returncode == 0


def _unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def full_folder(tmp_path):
    """(folder, preexec): a 64 KiB tmpfs (fill it with _fill once the test put what it wants there), or,
    where no tmpfs can be mounted, a folder and a preexec that caps the child's file size (RLIMIT_FSIZE)."""
    folder = tmp_path / "full"
    if _mount_tmpfs(folder, "size=64k"):
        yield folder, None
        _unmount(folder)
        return
    if not POSIX:
        pytest.skip("needs a tmpfs (root) or RLIMIT_FSIZE (POSIX) to make a full disk")
    folder.mkdir()

    def limited():  # the child may write nothing bigger than 1 KiB: a disk that fills at once
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))

    yield folder, limited


@pytest.fixture
def readonly_folder(tmp_path):
    folder = tmp_path / "readonly"
    if _mount_tmpfs(folder, "ro,size=64k"):
        yield folder
        _unmount(folder)
        return
    folder.mkdir()
    folder.chmod(0o555)
    try:
        (folder / "probe").write_text("x")
        pytest.skip("cannot make a read-only folder here (root without mount)")
    except OSError:
        pass
    yield folder
    folder.chmod(0o755)


def _cli(args, cwd, preexec=None, stdout=subprocess.PIPE, env=None, timeout=600):
    full_env = dict(os.environ, PYTHONIOENCODING="utf-8", **(env or {}))
    return subprocess.run([sys.executable, "-m", "dmlprof", *map(str, args)], cwd=cwd, env=full_env, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, encoding="utf-8", timeout=timeout, preexec_fn=preexec)


@pytest.fixture(scope="module")
def real_session(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("real")
    (folder / "m.py").write_text(contract(), encoding="utf-8")
    result = run_cli("scan", "m.py", "--steps", "1", "--quiet", cwd=folder)
    assert result.returncode == 0, result.stderr
    (path,) = sessions(folder / "reports")
    return path


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_d23_report_to_a_full_stdout_is_one_line(real_session, tmp_path):
    with open("/dev/full", "w") as full:
        result = _cli(["report", real_session], tmp_path, stdout=full)
    assert result.returncode == 2
    assert "cannot write to standard output: No space left on device" in error_line(result)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_d5_a_report_that_cannot_be_written_keeps_the_terminal_report_and_fails_after_it(real_session, tmp_path):
    result = _cli(["report", real_session, "--json", "/dev/full", "--html", "r.html"], tmp_path)
    assert "op calls" in result.stdout and (tmp_path / "r.html").is_file()  # the rest was still done
    assert result.returncode == 2
    assert "cannot write /dev/full (No space left on device)" in error_line(result)


def test_d5_d22_a_full_disk_keeps_the_old_report_whole_and_leaves_no_temp_file(real_session, tmp_path, full_folder):
    folder, preexec = full_folder
    old = folder / "r.json"
    old.write_text('{"old": "report"}', encoding="utf-8")
    if preexec is None:  # a tmpfs: fill it; otherwise the child's RLIMIT_FSIZE plays the full disk
        _fill(folder)
    result = _cli(["report", real_session, "--json", old], tmp_path, preexec=preexec)
    assert result.returncode == 2
    assert f"cannot write {old}" in error_line(result)
    assert old.read_text(encoding="utf-8") == '{"old": "report"}'
    assert sorted(p.name for p in folder.iterdir() if p.name != "filler") == ["r.json"]
    assert "op calls" in result.stdout


def _fill(folder: Path) -> None:
    """Fill the folder's tmpfs (64 KiB) to the last byte."""
    try:
        with open(folder / "filler", "wb") as handle:
            while True:
                handle.write(b"\0" * 4096)
                handle.flush()
    except OSError:
        pass


@pytest.mark.live
def test_d5_d22_scan_onto_a_full_disk_keeps_the_json_and_leaves_no_temp_session(tmp_path, full_folder):
    folder, preexec = full_folder
    if preexec is not None:
        pytest.skip("needs a tmpfs: RLIMIT_FSIZE would also stop the --json this test expects to be written")
    _fill(folder)
    (tmp_path / "m.py").write_text(contract(), encoding="utf-8")
    result = _cli(["scan", "m.py", "--steps", "1", "--out", folder, "--json", "r.json"], tmp_path)
    assert result.returncode == 2
    assert f"cannot write the session under {folder}" in error_line(result)
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["summary"]["op_calls"] > 0
    assert [p.name for p in folder.iterdir() if p.name != "filler"] == []  # no half session, no temp file
    assert "op calls" in result.stdout


@pytest.mark.live
def test_d5_a_failed_model_keeps_its_exit_code_when_an_output_cannot_be_written(tmp_path, readonly_folder):
    (tmp_path / "m.py").write_text(contract(forward="if self.calls == 3: raise ValueError('boom')"), encoding="utf-8")
    result = _cli(["scan", "m.py", "--steps", "3", "--json", readonly_folder / "r.json"], tmp_path)
    assert result.returncode == 3  # the model's own error, not the write error (2)
    line = error_line(result)
    assert "boom" in line and "partial session saved to reports" in line and "not written" in line
    assert len(sessions(tmp_path / "reports")) == 1


@pytest.mark.live
def test_d5_a_read_only_out_folder_still_writes_the_reports(tmp_path, readonly_folder):
    (tmp_path / "m.py").write_text(contract(), encoding="utf-8")
    result = _cli(["scan", "m.py", "--steps", "1", "--out", readonly_folder, "--json", "r.json"], tmp_path)
    assert result.returncode == 2
    assert f"cannot write the session under {readonly_folder}" in error_line(result)
    assert (tmp_path / "r.json").is_file() and "op calls" in result.stdout


@pytest.mark.live
@pytest.mark.skipif(not POSIX, reason="symlinks need privileges on Windows")
def test_d7_symlinks_planted_at_guessable_temp_names_are_not_followed(tmp_path):
    (tmp_path / "m.py").write_text(contract(), encoding="utf-8")
    victim = tmp_path / "victim"
    victim.write_text("precious", encoding="utf-8")
    out = tmp_path / "shared"
    out.mkdir()
    # every name the old code could have used for the next two minutes
    now = time.time()
    for second in range(-5, 120):
        stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(now + second))
        (out / f"m-cpu-{stamp}.session.json.tmp").symlink_to(victim)
    result = _cli(["scan", "m.py", "--steps", "1", "--out", out], tmp_path)
    assert result.returncode == 0, result.stderr
    assert victim.read_text(encoding="utf-8") == "precious"
    (path,) = sessions(out)
    assert json.loads(path.read_text(encoding="utf-8"))["meta"]["model_name"] == "m"


@pytest.mark.live
def test_d2_parallel_scans_keep_a_session_and_a_trace_each(tmp_path):
    (tmp_path / "m.py").write_text(contract(), encoding="utf-8")
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    count = 6
    processes = [subprocess.Popen([sys.executable, "-m", "dmlprof", "scan", "m.py", "--steps", "1", "--quiet",
                                   "--tb", "tb"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(count)]
    outputs = [p.communicate(timeout=600) for p in processes]
    assert [p.returncode for p in processes] == [0] * count, outputs
    saved = [line.split()[3] for _, err in outputs for line in err.splitlines() if line.startswith("session saved")]
    assert len(set(saved)) == count and len(sessions(tmp_path / "reports")) == count
    assert len(list((tmp_path / "tb").glob("*/*.pt.trace.json"))) == count


def test_d2_the_same_session_rendered_twice_to_tb_keeps_both_traces(real_session, tmp_path):
    for _ in range(2):
        result = _cli(["report", real_session, "--tb", "tb", "--quiet"], tmp_path)
        assert result.returncode == 0, result.stderr
    assert len(list((tmp_path / "tb").glob("*/*.pt.trace.json"))) == 2


# -- signals -------------------------------------------------------------------------------------------------------
#: a script that runs until a signal stops it (or, should the signal be lost, for four minutes): however late a
#: loaded machine delivers the signal, it comes while the script runs
LONG_SCRIPT = '''\
import os, time, torch
x = torch.ones(4)
i, ends = 0, time.monotonic() + 240
while time.monotonic() < ends:
    x = x + 1
    i += 1
    if i == {mark_at}:
        with open(os.environ["DMLPROF_TEST_MARKER"], "w") as marker:
            marker.write("recording")
'''


@pytest.mark.live
@pytest.mark.skipif(not POSIX, reason="sends SIGINT, a POSIX signal")
def test_d3_a_second_ctrl_c_while_a_long_recording_is_saved_does_not_lose_it(tmp_path):
    # past dmlprof.interrupts.ANNOUNCE_CALLS (20,000), where saving takes long enough to be announced
    (tmp_path / "long.py").write_text(LONG_SCRIPT.format(mark_at=25_000), encoding="utf-8")
    marker = tmp_path / "marker"
    env = dict(os.environ, DMLPROF_TEST_MARKER=str(marker), PYTHONIOENCODING="utf-8")
    process = subprocess.Popen([sys.executable, "-m", "dmlprof", "scan", "long.py"], cwd=tmp_path, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **SIGNALS_REACH)
    deadline = time.monotonic() + 300
    while not marker.exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    announced = process.stderr.readline()  # the saving has begun (torch.profiler stopped at 20,000 calls
    process.send_signal(signal.SIGINT)     # already: it is quick), and the second Ctrl-C comes meanwhile
    _, stderr = process.communicate(timeout=600)
    stderr = announced + stderr
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    (path,) = sessions(tmp_path / "reports")
    meta = json.loads(path.read_text(encoding="utf-8"))["meta"]
    assert meta["partial"] is True and "interrupted" in meta["partial_reason"]
    lines = stderr.strip().splitlines()
    assert lines[0].startswith("dmlprof: interrupted; saving the ") and "op calls recorded so far" in lines[0]
    assert lines[-1].startswith("dmlprof: error: interrupted") and "[partial session saved to reports" in lines[-1]


def _tensorboard_run(tmp_path, real_session) -> Path:
    result = _cli(["report", real_session, "--tb", "tb", "--quiet"], tmp_path)
    assert result.returncode == 0, result.stderr
    return tmp_path / "tb"


def _answers(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.skipif(not POSIX, reason="SIGHUP is POSIX")
def test_d20_d21_view_says_the_plugin_needs_the_internet_and_a_closed_terminal_stops_tensorboard(tmp_path,
                                                                                                real_session):
    logdir = _tensorboard_run(tmp_path, real_session)
    temp = tmp_path / "temp"
    temp.mkdir()
    env = dict(os.environ, PYTHONUNBUFFERED="1", TMPDIR=str(temp))
    process = subprocess.Popen([sys.executable, "-m", "dmlprof", "view", str(logdir)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env, stdin=subprocess.DEVNULL, **SIGNALS_REACH)
    try:
        url = process.stdout.readline()
        assert url.startswith("TensorBoard: http://127.0.0.1:"), (url, process.poll())
        note = process.stdout.readline()
        assert "Google Charts from the internet" in note and "--html" in note  # D20, said before the page is opened
        port = int(url.split("127.0.0.1:")[1].split("/")[0])
        assert _answers(port)
        process.send_signal(signal.SIGHUP)  # the terminal closed
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0
    deadline = time.monotonic() + 30
    while _answers(port) and time.monotonic() < deadline:  # its TensorBoard went with it
        time.sleep(0.2)
    assert not _answers(port)
    assert list(temp.glob("dmlprof-tensorboard-*.log")) == []  # and left no log behind


def test_d9_view_on_a_taken_port_is_one_line_and_starts_nothing(tmp_path, real_session):
    logdir = _tensorboard_run(tmp_path, real_session)
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        port = other.getsockname()[1]
        result = _cli(["view", logdir, "--port", port], tmp_path, timeout=120)
    assert result.returncode == 2
    assert f"port {port} on 127.0.0.1 is in use" in error_line(result)
    assert "http://" not in result.stdout


# -- a hostile session's page in a real browser ---------------------------------------------------------------------
def test_d19_a_page_from_a_session_with_thousands_of_ops_and_sweep_rows_opens_and_says_what_it_left_out(tmp_path):
    from conftest import require_chromium

    require_chromium()
    from dmlprof.render.html import PAGE_ROWS, render_html
    from dmlprof.session import Session
    from session_factory import SWEEP, make_session

    repo = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(repo / "benchmarks"))
    try:
        from report_scale import measure_load
    finally:
        sys.path.remove(str(repo / "benchmarks"))
    ops = make_session([{"op": f"aten::op{i}", "time_ns": 1_000 + i, "module": f"Net.block{i}.conv{i % 7}",
                         "verdict": "fallback" if i % 3 == 0 else "device"} for i in range(PAGE_ROWS * 3)])
    rows = [dict(SWEEP["rows"][0], batch_size=n + 1) for n in range(PAGE_ROWS * 5)]
    session = Session(meta=ops.meta, ops=ops.ops, **{"sweep": dict(SWEEP, rows=rows)})
    page = tmp_path / "hostile.html"
    page.write_text(render_html(session), encoding="utf-8")
    assert page.stat().st_size < 5_000_000
    loaded = measure_load(page, 1)
    assert loaded["console_errors"] == [] and loaded["load_ms"][0] > 0
    assert 0 < loaded["op_table_rows_in_dom"] <= PAGE_ROWS
    text = page.read_text(encoding="utf-8")
    assert f"{PAGE_ROWS * 2:,} of {PAGE_ROWS * 3:,} op rows" in text and f"of {PAGE_ROWS * 5:,} sweep rows" in text
