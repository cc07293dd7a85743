"""One batch size of a sweep, measured in a fresh process.

``python -m dmlprof.sweep.child MODEL.py --batch-size N [--device D] ...``
prints exactly one line starting with :data:`RESULT_MARKER` followed by a JSON
object on stdout (the model's own prints go to stderr). It always exits 0 when
it could print that line, whether the size ran, ran out of memory or raised;
only a child that dies (killed, segfault) prints nothing, and the parent
records that as an error.

Throughput and step times come from un-recorded steps (no recorder overhead);
the fallback time share from one extra step under the recorder, taken only on
backends that can fall back to the CPU (elsewhere it is 0 by definition).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import warnings
from contextlib import nullcontext
from pathlib import Path
from typing import Optional

RESULT_MARKER = "DMLPROF_SWEEP_RESULT "
AMP_DTYPES = ("fp16", "bf16")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m dmlprof.sweep.child", description=__doc__)
    parser.add_argument("model")
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--device-index", type=int, default=0, help="which device of that kind (sweep --devices)")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--amp", choices=AMP_DTYPES)
    parser.add_argument("--memory-limit", type=int, help="bytes of address space the child may add (Linux)")
    parser.add_argument("--record", choices=("auto", "always", "never"), default="auto",
                        help="record one step for the fallback share: auto = only where the backend can fall back")
    return parser


# -- the memory cap -------------------------------------------------------------
def memory_limit_supported() -> tuple:
    """(supported, why not): the cap needs RLIMIT_AS and /proc/self/statm (Linux)."""
    try:
        import resource  # noqa: F401  (POSIX only)
    except ImportError:
        return False, "--child-memory-limit needs POSIX resource limits (RLIMIT_AS); not available on this platform, ignored"
    if not hasattr(__import__("resource"), "RLIMIT_AS"):
        return False, "--child-memory-limit needs RLIMIT_AS, which this platform lacks; ignored"
    if not Path("/proc/self/statm").exists():
        return False, "--child-memory-limit needs /proc/self/statm (Linux) to read the starting address space; ignored"
    return True, ""


def address_space_bytes() -> Optional[int]:
    """This process's virtual address space now (Linux), else ``None``."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[0])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class MemoryCap:
    """RLIMIT_AS set to (address space now + headroom); lifted again by :meth:`lift`.

    The headroom is relative because importing torch alone maps gigabytes of
    address space, an amount that differs between machines and builds; a cap
    relative to the loaded state means the same thing everywhere.
    """

    def __init__(self, headroom_bytes: Optional[int]):
        self.headroom_bytes = headroom_bytes
        self.applied = False
        self.note = ""
        self._saved = None

    def apply(self) -> None:
        if not self.headroom_bytes:
            return
        supported, why = memory_limit_supported()
        base = address_space_bytes() if supported else None
        if not supported or base is None:
            self.note = why or "could not read the address space; --child-memory-limit ignored"
            return
        import resource  # windows: memory_limit_supported() is False where there is no resource module

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = min(base + int(self.headroom_bytes), 2**63 - 1)  # setrlimit takes a signed 64-bit value
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
        self._saved = (soft, hard)
        self.applied = True

    def lift(self) -> None:
        """Give the address space back, so the child can report what happened."""
        if self._saved is not None:
            import resource  # windows: _saved is set only by apply(), which needs the resource module

            resource.setrlimit(resource.RLIMIT_AS, self._saved)
            self._saved = None


# -- measuring --------------------------------------------------------------------
def percentile(values, q: float) -> float:
    """Linear-interpolated percentile (``q`` in 0..100) of a non-empty list."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = (len(ordered) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (position - low))


def _autocast_factory(backend, amp: Optional[str]):
    """A zero-argument context factory for the forward pass: torch.autocast or nothing.

    Raises ValueError when autocast with that dtype is not available on the
    backend (torch warns and disables itself in that case; we refuse instead,
    so a sweep never silently measures full precision as AMP).
    """
    if not amp:
        return nullcontext
    import torch

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[amp]
    device_type = getattr(backend, "autocast_device_type", None) or backend.device_type
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            probe = torch.autocast(device_type=device_type, dtype=dtype)
            with probe:
                pass
        except (RuntimeError, ValueError, AttributeError) as exc:
            raise ValueError(f"--amp {amp}: torch.autocast is not available for {device_type}: {exc}") from None
    disabled = [str(w.message) for w in caught if "autocast" in str(w.message).lower()]
    if disabled or not probe.fast_dtype == dtype:
        raise ValueError(f"--amp {amp}: torch.autocast refuses {dtype} on {device_type}: {(disabled or ['disabled'])[0]}")
    return lambda: torch.autocast(device_type=device_type, dtype=dtype)


def measure(args) -> dict:
    """Run one batch size; returns the result dict (never raises for model errors)."""
    from dmlprof.analysis.sweep import failed_row

    # the row's schema, plus the details only the --json document carries
    result = dict(failed_row(args.batch_size), step_times_ms=[], memory_total_bytes=None, fallback_recorded=False,
                  notes=[], amp=args.amp)
    started = time.perf_counter()
    try:
        import torch

        from dmlprof.backends import resolve_backend
        from dmlprof.errors import DmlprofError
    except Exception as exc:  # a broken install: say so in the result
        result["error"] = f"cannot import torch/dmlprof: {type(exc).__name__}: {exc}"
        return result

    try:
        backend = resolve_backend(args.device, args.device_index)
    except DmlprofError as exc:
        result["error"] = exc.one_line()
        return result
    # the device as the backend's own record says it (what a scan's session holds), in the result's words
    from dmlprof.meta import Device

    device = _safe(lambda: backend.run_meta().device, Device(backend=backend.name, device="", name="unknown"))
    result.update(backend=device.backend, device=device.device or "", device_index=args.device_index,
                  device_name=device.name or "unknown", torch_version=torch.__version__)
    cap = MemoryCap(args.memory_limit)
    cap.apply()
    if cap.note:
        result["notes"].append(cap.note)
    failure = None
    try:
        _run(args, backend, result)
        _raise_caught_abort(backend)
        result["status"] = "ok"
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # MemoryError and SystemExit from a model count too
        cap.lift()
        failure = _classify(exc, backend)
    finally:
        cap.lift()
    if failure is not None:
        # Out of the except block the traceback (and the tensors its frames hold) is gone.
        gc.collect()
        result["status"], result["error"] = failure
        _read_memory(backend, result)
    result["elapsed_s"] = round(time.perf_counter() - started, 3)
    return result


def _raise_caught_abort(backend) -> None:
    """Raise the first error the device raised in place of a call that ends DirectML's process, where the model
    caught it and went on (``except RuntimeError``: a CPU fallback around an FFT): nothing records the timed
    steps, so only the device's own note says so. On DirectML the process ends at that call: the size fails."""
    backend.notice_unrecorded_aborts()
    refusal, backend.first_refusal = backend.first_refusal, None
    if refusal is not None:
        raise getattr(refusal, "error", refusal)


def _classify(exc: BaseException, backend) -> tuple:
    from dmlprof.backends.errors import explain_device_error, is_out_of_memory
    from dmlprof.model_file import describe_exception, printable

    exc = printable(exc)  # the model's own exception class may fail to say itself
    # A model error is wrapped (ModelRaisedError from the original); the cause says more.
    root = exc
    while root.__cause__ is not None and root is not root.__cause__:
        root = root.__cause__
    text = describe_exception(root)
    if is_out_of_memory(exc):
        return "oom", text[:500]
    known = explain_device_error(exc, backend)
    if known is not None:
        return "error", f"{known.explanation}: {text}"[:500]
    return "error", text[:500]


def _read_memory(backend, result: dict) -> None:
    reading = _safe(backend.memory, None)
    if reading is None:
        return
    peak = reading.peak_bytes if reading.peak_bytes is not None else reading.allocated_bytes
    result["peak_memory_bytes"] = None if peak is None else int(peak)
    result["memory_source"] = reading.source or ""
    result["memory_total_bytes"] = reading.total_bytes


class _PeakTracker:
    """The largest memory reading seen, for backends whose reading has no peak of its own."""

    def __init__(self, backend):
        self.backend = backend
        first = _safe(backend.memory, None)
        self.active = bool(first is not None and first.peak_bytes is None and first.allocated_bytes is not None)
        self.largest_bytes = first.allocated_bytes if self.active else None

    def sample(self, *_hook_args) -> None:
        if not self.active:
            return
        reading = _safe(self.backend.memory, None)
        if reading is not None and reading.allocated_bytes is not None:
            self.largest_bytes = max(self.largest_bytes or 0, int(reading.allocated_bytes))

    def apply(self, result: dict) -> None:
        if not self.active or self.largest_bytes is None:
            return
        if result.get("peak_memory_bytes") is None or self.largest_bytes > result["peak_memory_bytes"]:
            result["peak_memory_bytes"] = self.largest_bytes
        result["memory_source"] = f"{result.get('memory_source') or 'memory in use'} (largest reading: end of forward, end of each step)"


def _run(args, backend, result: dict) -> None:
    from dmlprof.errors import ModelFileError
    from dmlprof.model_file import inspect_model_file
    from dmlprof.runner import TrainingStep

    path = Path(args.model)
    model_file = inspect_model_file(path)
    if model_file.mode != "contract":
        raise ModelFileError(f"{path.name} is a script; a sweep needs a model file (build_model, make_batch)")
    autocast = _autocast_factory(backend, args.amp)
    training = TrainingStep.from_file(model_file.path, backend, args.batch_size)
    training.autocast = autocast
    one_step = training.run

    backend.reset_peak_memory()
    tracker = _PeakTracker(backend)
    # Backends that keep no peak (DirectML, MPS) are read at the end of each
    # warm-up forward, when activations are alive; never inside a timed step.
    hook = training.model.register_forward_hook(tracker.sample) if tracker.active else None
    try:
        for _ in range(args.warmup):
            backend.synchronize([one_step()])
    finally:
        if hook is not None:
            hook.remove()
    times_ns = []
    for _ in range(args.steps):
        start = time.perf_counter_ns()
        loss = one_step()
        backend.synchronize([loss])
        times_ns.append(time.perf_counter_ns() - start)
        tracker.sample()
    _read_memory(backend, result)
    tracker.apply(result)
    times_ms = [t / 1e6 for t in times_ns]
    p50 = percentile(times_ms, 50)
    result.update(
        step_times_ms=[round(t, 3) for t in times_ms],
        step_ms_p50=p50,
        step_ms_p95=percentile(times_ms, 95),
        # From the median step: one step stalled by another process must not
        # move the throughput (and so the recommendation) on a few samples.
        samples_per_s=(args.batch_size * 1000.0 / p50) if p50 > 0 else 0.0,
    )
    if args.record == "always" or (args.record == "auto" and backend.has_cpu_fallback):
        result["fallback_time_share"], result["fallback_ops"] = _recorded_share(backend, one_step)
        result["fallback_recorded"] = True


def _recorded_share(backend, one_step) -> tuple:
    """Fallback share of op time over one recorded step (with per-op sync on accelerators)."""
    from dmlprof.analysis import summary
    from dmlprof.analysis.core import fallback_op_set
    from dmlprof.record.recorder import Recorder

    recorder = Recorder(backend, sync=True)
    with recorder:
        loss = one_step(recorder)
        recorder.active = False  # the closing sync is ours, not the model's
        backend.synchronize([loss])
    frame = recorder.frame()
    return float(summary(frame)["fallback_time_share"]), sorted(fallback_op_set(frame))


def _safe(fn, default):
    try:
        return fn()
    except Exception:
        return default


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    # The model may print; only our one result line goes to the real stdout.
    real_stdout = sys.stdout
    sys.stdout = sys.stderr
    try:
        result = measure(args)
    finally:
        sys.stdout = real_stdout
    from dmlprof.plain import plain

    real_stdout.write(RESULT_MARKER + json.dumps(plain(result), allow_nan=False) + "\n")
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
