"""Runs a sweep: one fresh child process per batch size, ``--auto`` doubling, the stop rules."""
from __future__ import annotations

import datetime as _dt
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Optional

from dmlprof import progress
from dmlprof.analysis.sweep import SWEEP_COLUMNS, failed_row
from dmlprof.errors import ModelFileError, UsageError
from dmlprof.facts import run_facts
from dmlprof.meta import SWEEP, Device, RunMeta, SweepRun, SweepSettings
from dmlprof.model_file import inspect_model_file
from dmlprof.sweep.child import AMP_DTYPES, RESULT_MARKER, memory_limit_supported
from dmlprof.sweep.options import (DEFAULT_CHILD_TIMEOUT_S, DEFAULT_MAX_BATCH_SIZE, DEFAULT_STEPS, DEFAULT_TIME_BUDGET_S,
                                   DEFAULT_WARMUP, MemoryBudget, auto_sizes, auto_start_size, parse_memory_budget)

_clock = time.monotonic  # one name to fake in tests
_DETAIL_KEYS = ("batch_size", "step_times_ms", "fallback_recorded", "fallback_ops", "memory_total_bytes", "notes", "elapsed_s")


@dataclass
class SweepResult:
    """What a sweep found: one child result per size run, and why it stopped."""

    model: Path
    device: str
    results: List[dict] = field(default_factory=list)
    budget: MemoryBudget = field(default_factory=MemoryBudget)
    stop_reason: str = ""
    notes: List[str] = field(default_factory=list)
    settings: SweepSettings = field(default_factory=SweepSettings)
    started_at: str = ""
    duration_s: float = 0.0
    interrupted: bool = False

    @property
    def memory_total_bytes(self) -> Optional[int]:
        for result in self.results:
            if result.get("memory_total_bytes"):
                return int(result["memory_total_bytes"])
        return None

    @property
    def memory_budget_bytes(self) -> Optional[int]:
        return self.budget.resolve(self.memory_total_bytes)

    def rows(self) -> List[dict]:
        """The per-size rows with exactly the schema's keys."""
        return [{key: result.get(key) for key in SWEEP_COLUMNS} for result in self.results]

    def summary(self) -> dict:
        """``Session.extras["sweep"]``: rows, recommendation, knee, budget (docs/sweep_schema.md)."""
        from dmlprof.analysis.sweep import sweep_summary

        return sweep_summary(self.rows(), self.memory_budget_bytes)

    def first(self, key: str, default=None):
        for result in self.results:
            if result.get(key):
                return result[key]
        return default

    def meta(self) -> RunMeta:
        """The sweep's run facts (the device as its children's results name it)."""
        total = self.memory_total_bytes
        device = Device(backend=self.first("backend", self.device), device=self.first("device", ""),
                        name=self.first("device_name", "unknown"))
        accelerator = device.backend != "cpu"
        facts = run_facts(self.model, kind=SWEEP, run_mode=SWEEP, torch_version=self.first("torch_version", ""))
        facts.set(device=device, started_at=self.started_at, duration_s=round(self.duration_s, 3),
                  partial=self.interrupted, partial_reason="interrupted" if self.interrupted else None,
                  sweep=SweepRun(
                      stop_reason=self.stop_reason,
                      memory_budget=self.budget.describe(total, "device memory" if accelerator else "physical memory"),
                      memory_total_bytes=total, settings=self.settings, notes=tuple(self.notes),
                      details=tuple({k: r.get(k) for k in _DETAIL_KEYS if k in r} for r in self.results)))
        return facts.build()

    def to_session(self):
        """The sweep as a Session (no op rows; the sweep in ``extras["sweep"]``)."""
        from dmlprof.session import Session

        return Session(meta=self.meta(), sweep=self.summary())



def child_command(model: Path, batch_size: int, *, device: str, steps: int, warmup: int, amp: Optional[str],
                  memory_limit: Optional[int], record: str = "auto", device_index: Optional[int] = None) -> List[str]:
    """The argv of one child (``sys.executable -m dmlprof.sweep.child ...``)."""
    from dmlprof.survival import interpreter_options  # the model runs with the options python was given (-W, -O)

    argv = [sys.executable, *interpreter_options(), "-m", "dmlprof.sweep.child", str(model),
            "--batch-size", str(batch_size),
            "--device", device, "--steps", str(steps), "--warmup", str(warmup), "--record", record]
    if device_index is not None:
        argv += ["--device-index", str(int(device_index))]
    if amp:
        argv += ["--amp", amp]
    if memory_limit:
        argv += ["--memory-limit", str(int(memory_limit))]
    return argv


def _child_env() -> dict:
    env = dict(os.environ)
    # The child must import this very dmlprof, installed or not.
    package_root = str(Path(__file__).resolve().parents[2])  # dmlprof/sweep/driver.py -> the folder holding dmlprof/
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env.setdefault("PYTHONIOENCODING", "utf-8")
    return env


def describe_exit(returncode: int) -> str:
    """Why a child ended without a result, in words (signals on POSIX, NTSTATUS codes on Windows)."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = " (the system's out-of-memory killer, or someone, killed it)" if name == "SIGKILL" else ""
        return f"the child process was killed by {name}{hint}"
    if returncode > 0xFFFF:  # Windows: an NTSTATUS such as 0xC0000005 (access violation)
        known = {0xC0000005: "access violation", 0xC00000FD: "stack overflow", 0xC0000017: "no memory"}
        return f"the child process crashed with 0x{returncode:08X} ({known.get(returncode, 'unknown status')})"
    return f"the child process exited with status {returncode} without a result"


def parse_child_output(batch_size: int, returncode: int, stdout: str, stderr: str) -> dict:
    """The child's result dict, or an ``error`` result when it printed none (it died)."""
    for line in reversed((stdout or "").splitlines()):
        if line.startswith(RESULT_MARKER):
            try:
                result = json.loads(line[len(RESULT_MARKER):])
            except ValueError:
                break
            if isinstance(result, dict) and result.get("batch_size") == batch_size:
                return result
    reason = describe_exit(returncode)
    last = [line.strip() for line in (stderr or "").splitlines() if line.strip()]
    if last:
        reason += f"; last output: {last[-1][:300]}"
    return failed_row(batch_size, reason)


def run_child(argv: List[str], batch_size: int, timeout_s: float, tick: Optional[Callable[[], None]] = None) -> dict:
    """Run one child; a crash, a hang or a missing result becomes an ``error`` result.

    ``tick`` is called about once a second while the child runs (the progress
    bar's clock). Ctrl-C kills the child and propagates.
    """
    try:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                 text=True, encoding="utf-8", errors="replace", env=_child_env())
    except OSError as exc:
        return failed_row(batch_size, f"could not start the child process: {exc}")
    deadline = _clock() + timeout_s
    try:
        while True:
            try:
                # Retrying communicate() after its timeout loses no output (documented).
                stdout, stderr = child.communicate(timeout=min(1.0, max(0.01, deadline - _clock())))
                break
            except subprocess.TimeoutExpired:
                if _clock() >= deadline:
                    child.kill()
                    child.communicate()
                    return failed_row(batch_size, f"timed out after {timeout_s:.0f} s (--child-timeout)")
                if tick is not None:
                    tick()
    except BaseException:  # Ctrl-C: never leave a child running behind us
        child.kill()
        child.wait()
        raise
    return parse_child_output(batch_size, child.returncode, stdout, stderr)


def outcome_text(result: dict) -> str:
    """A few words for the progress line."""
    if result["status"] == "ok":
        return f"ok {result['samples_per_s']:.0f} samples/s"
    if result["status"] == "oom":
        return "out of memory"
    return "error"


def run_sweep(
    model,
    device: str = "auto",
    *,
    batch_sizes: Optional[List[int]] = None,
    auto: bool = False,
    start_batch_size: Optional[int] = None,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    steps: int = DEFAULT_STEPS,
    warmup: int = DEFAULT_WARMUP,
    amp: Optional[str] = None,
    memory_budget: Optional[MemoryBudget] = None,
    child_memory_limit: Optional[int] = None,
    time_budget_s: Optional[float] = DEFAULT_TIME_BUDGET_S,
    child_timeout_s: float = DEFAULT_CHILD_TIMEOUT_S,
    record: str = "auto",
    runner: Callable[..., dict] = run_child,
    device_index: Optional[int] = None,
) -> SweepResult:
    """Measure each batch size in its own process; returns a :class:`SweepResult`.

    ``batch_sizes`` runs every listed size. ``auto`` doubles from
    ``start_batch_size`` (default: the file's BATCH_SIZE // 4, else 1) and stops
    at the first out-of-memory or error, the first size whose peak memory is
    over the budget, ``max_batch_size``, or when the next size would likely end
    past ``time_budget_s``. Raises UsageError/ModelFileError for bad input.
    """
    from dmlprof.backends import resolve_backend

    model_file = inspect_model_file(model)
    if model_file.mode != "contract":
        raise ModelFileError(
            f"{model_file.path} is a script; a sweep needs a model file that defines build_model() and "
            "make_batch(batch_size) (see docs/model_contract.md)"
        )
    if bool(batch_sizes) == bool(auto):
        raise UsageError("give either --batch-sizes 8,16,32 or --auto")
    if steps < 1:
        raise UsageError("--steps must be at least 1")
    if warmup < 0:
        raise UsageError("--warmup cannot be negative")
    if amp is not None and amp not in AMP_DTYPES:
        raise UsageError(f"--amp must be one of {', '.join(AMP_DTYPES)}")
    if child_memory_limit is not None and child_memory_limit < 1:
        raise UsageError("--child-memory-limit must be a positive size")
    # Checked here (one line for an unavailable device) but measured only in the children.
    backend_name = resolve_backend(device).name
    budget = memory_budget or parse_memory_budget(None)
    sizes = auto_sizes(auto_start_size(model_file.path, start_batch_size), max_batch_size) if auto else list(batch_sizes)

    result = SweepResult(model=model_file.path, device=backend_name, budget=budget,
                         started_at=_dt.datetime.now().isoformat(timespec="seconds"))
    result.settings = SweepSettings(
        auto=bool(auto), sizes_planned=tuple(sizes), steps=steps, warmup_steps=warmup, amp=amp,
        max_batch_size=max_batch_size if auto else None, time_budget_s=time_budget_s if auto else None,
        child_memory_limit_bytes=child_memory_limit, device_index=device_index)
    if child_memory_limit:
        supported, why = memory_limit_supported()
        if not supported:
            result.notes.append(why)
    label = f"batch sizes (up to {len(sizes)}, --auto)" if auto else "batch sizes"
    started = _clock()
    last_wall_s = None
    last = ""
    with progress.phase(label, total=len(sizes), unit="size") as bar:  # sizes/s, not step/s
        try:
            for index, size in enumerate(sizes):
                if auto and time_budget_s and last_wall_s is not None:
                    # The next size is twice as large: expect up to twice the last child's time.
                    if _clock() - started + 2 * last_wall_s > time_budget_s:
                        result.stop_reason = f"time budget: batch size {size} would likely end past {time_budget_s:.0f} s (--time-budget)"
                        break
                bar.describe(f"bs={size} running" + (f"; {last}" if last else ""))
                child_started = _clock()
                argv = child_command(model_file.path, size, device=backend_name, steps=steps, warmup=warmup, amp=amp,
                                     memory_limit=child_memory_limit, record=record, device_index=device_index)
                child = runner(argv, size, child_timeout_s, tick=bar.tick)
                last_wall_s = _clock() - child_started
                result.results.append(child)
                for note in child.get("notes") or ():
                    if note not in result.notes:
                        result.notes.append(note)
                last = f"bs={size}: {outcome_text(child)}"
                bar.describe(last)
                bar.advance()
                if not auto:
                    continue
                if child["status"] == "oom":
                    result.stop_reason = f"out of memory at batch size {size}"
                    break
                if child["status"] == "error":
                    result.stop_reason = f"error at batch size {size}"
                    break
                limit = result.memory_budget_bytes
                peak = child.get("peak_memory_bytes")
                if limit is not None and peak is not None and peak > limit:
                    result.stop_reason = f"peak memory at batch size {size} is over the memory budget"
                    break
            else:
                if auto:
                    result.stop_reason = f"reached --max-batch-size {max_batch_size}"
                else:
                    result.stop_reason = "ran every listed size"
        except KeyboardInterrupt:
            result.interrupted = True
            result.stop_reason = "interrupted"
        finally:
            result.duration_s = _clock() - started
    return result


def run_sweep_devices(model, device: str, devices: List[int], **options) -> List[SweepResult]:
    """The same sweep on several devices at once: one thread per device, each running its own children.

    Every device gets the sizes and stop rules of :func:`run_sweep` (its own
    ``--auto`` doubling); at any moment one child runs per device. Returns
    one :class:`SweepResult` per device, in the order given.
    """
    from concurrent.futures import ThreadPoolExecutor

    from dmlprof.distributed.env import MAX_LOCAL_RANKS

    if not devices or len(set(devices)) != len(devices) or any(d < 0 for d in devices):
        raise UsageError("--devices takes distinct device indices, e.g. --devices 0,1")
    if len(devices) > MAX_LOCAL_RANKS:  # a thread and a child process each, at once
        raise UsageError(f"--devices takes at most {MAX_LOCAL_RANKS} devices here (twice the CPU cores, at least 8)")
    def quietly(index: int) -> SweepResult:
        with progress.off():  # one bar per device would interleave; each device's table follows
            return run_sweep(model, device, device_index=index, **options)

    with ThreadPoolExecutor(max_workers=len(devices)) as pool:
        futures = [pool.submit(quietly, index) for index in devices]
        return [future.result() for future in futures]
