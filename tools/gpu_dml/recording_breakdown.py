"""Where recording's cost goes on a device: each layer of a dmlprof scan timed alone, interleaved.

One process; in each round every variant runs ``--steps`` training steps (order reversed every other
round); the figures are medians per variant and per-round ratios to ``bare`` and ``profiler``.

Variants (each a layer of what ``dmlprof scan`` wraps a step in):
  bare              one step, synchronised at its end (benchmarks/overhead.py's timed())
  profiler          torch.profiler alone, as benchmarks/overhead.py starts it
  alongside         dmlprof's ProfilerAlongside (the same profiler plus its hook for the user's profiler)
  alongside_range   ProfilerAlongside plus a record_function range per step (steady without the warnings)
  warn_capture      dmlprof's WarningCapture alone (torch.set_warn_always(True), filter "always")
  prof_warn         torch.profiler + WarningCapture
  steady            what --no-sync's measured steps run under: Recording(WarningCapture, ProfilerAlongside)
                    plus a record_function range per step (the 'recorded' step of --no-sync)
  steady_losses     steady, every step's loss kept alive (the runner keeps them in self.losses)
  structure_steady  a recorded structure step (Recorder + ProfilerAlongside, its frame and events built
                    and kept, as the runner does), then steady steps
  scan_recorded     dmlprof's own scan_training_step(sync=False): its recorded steps' times, as
                    benchmarks/overhead.py reads them (the 1.72x figure's numerator)
  scan_recorded_nogc  the same with Python's garbage collector off
  tap_null          the dispatcher tap with a handler that only runs the op (the Python kernel's own cost)
  recorder          dmlprof's Recorder, sync off (the tap plus the per-call bookkeeping)
  recorder_prof     Recorder + ProfilerAlongside (--no-sync's structure step)
  recorder_sync     Recorder with per-call sync (scan's default mode)
Also: op calls per step, warnings per step under WarningCapture (and the first distinct ones), and
the device's cost per synchronize (idle, and after a small op).

    python recording_breakdown.py --repo DMLPROF_CHECKOUT --model models/resnet18.py --device dml \
        --rounds 6 --steps 5 --out breakdown.json
"""
from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

ALL = ("bare,profiler,alongside_range,warn_capture,steady,steady_losses,structure_steady,scan_recorded,"
       "scan_recorded_nogc,tap_null,recorder,recorder_sync")  # also: alongside, recorder_prof


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--device", default="dml")
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--variants", default=ALL)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    repo = Path(args.repo).resolve()
    sys.path.insert(0, str(repo))
    import torch
    from dmlprof.backends import resolve_backend
    from dmlprof.record.profiler import ProfilerAlongside, quiet_native_stderr
    from dmlprof.record.recorder import Recorder
    from dmlprof.record.tap import DispatcherTap
    from dmlprof.record.warning_capture import WarningCapture
    from dmlprof.runner import TrainingStep, scan_training_step
    from dmlprof.runner.run import Recording

    backend = resolve_backend(args.device)
    path = repo / args.model
    training = TrainingStep.from_file(path, backend, args.batch_size)
    variants = args.variants.split(",")
    facts: dict = {}

    def timed(recorder=None, per_step=None) -> float:
        start = time.perf_counter_ns()
        with (per_step() if per_step else nullcontext()):
            loss = training.run(recorder)
        if recorder is not None:
            recorder.active = False
        backend.synchronize([loss])
        if recorder is not None:
            recorder.active = True
        return (time.perf_counter_ns() - start) / 1e6

    @contextmanager
    def torch_profiler():
        with quiet_native_stderr():
            prof = torch.profiler.profile(activities=backend.profiler_activities(), record_shapes=True)
            prof.__enter__()
        try:
            yield
        finally:
            with quiet_native_stderr():
                prof.__exit__(None, None, None)

    def null_tap():
        holder = {}

        def handler(op, a, kw):
            return holder["tap"].call(op, a, kw)

        tap = holder["tap"] = DispatcherTap(handler)

        @contextmanager
        def ctx():
            tap.install()
            try:
                with tap.enabled():
                    yield
            finally:
                tap.remove()
        return ctx()

    def run_variant(variant: str, steps: int) -> list:
        if variant == "bare":
            return [timed() for _ in range(steps)]
        if variant == "profiler":
            with torch_profiler():
                return [timed() for _ in range(steps)]
        if variant == "alongside":
            with ProfilerAlongside(backend):
                return [timed() for _ in range(steps)]
        if variant == "alongside_range":
            with ProfilerAlongside(backend):
                return [timed(per_step=lambda: torch.profiler.record_function("dmlprof.step")) for _ in range(steps)]
        if variant == "warn_capture":
            capture = WarningCapture()
            with capture:
                times = [timed() for _ in range(steps)]
            facts["warnings_per_step"] = len(capture.messages) / steps
            facts["warnings_distinct"] = sorted(set(m[:160] for m in capture.messages))[:8]
            return times
        if variant == "prof_warn":
            with torch_profiler(), WarningCapture():
                return [timed() for _ in range(steps)]
        if variant == "steady":
            capture = WarningCapture()
            with Recording(capture, ProfilerAlongside(backend)):
                times = [timed(per_step=lambda: torch.profiler.record_function("dmlprof.step")) for _ in range(steps)]
            facts["steady_warnings_per_step"] = len(capture.messages) / steps
            return times
        if variant == "steady_losses":
            losses = []

            def keep():
                start = time.perf_counter_ns()
                with torch.profiler.record_function("dmlprof.step"):
                    loss = training.run()
                losses.append(loss)
                backend.synchronize([loss])
                return (time.perf_counter_ns() - start) / 1e6
            with Recording(WarningCapture(), ProfilerAlongside(backend)):
                return [keep() for _ in range(steps)]
        if variant == "structure_steady":
            recorder = Recorder(backend, sync=False)
            recorder.modules.name_tree(training.model)
            structure_profiler = ProfilerAlongside(backend)
            with structure_profiler:
                with recorder:
                    timed(recorder)
                # what the runner builds from it and keeps while the steps run
                kept = (recorder.frame(), structure_profiler.op_events())  # noqa: F841
            with Recording(WarningCapture(), ProfilerAlongside(backend)):
                return [timed(per_step=lambda: torch.profiler.record_function("dmlprof.step")) for _ in range(steps)]
        if variant in ("scan_recorded", "scan_recorded_nogc"):
            if variant == "scan_recorded_nogc":  # Python's garbage collector off for the scan
                gc.collect()
                gc.disable()
            try:
                session = scan_training_step(training, backend, path, steps=steps, warmup=0, sync=False)
            finally:
                gc.enable()
            facts["scan_reported_ms"] = list(session.meta.to_dict()["step_times_ms"])
            return list(session.meta.to_dict().get("recorded_step_times_ms") or session.meta.to_dict()["step_times_ms"])
        if variant == "tap_null":
            with null_tap():
                return [timed() for _ in range(steps)]
        if variant in ("recorder", "recorder_prof", "recorder_sync"):
            recorder = Recorder(backend, sync=variant == "recorder_sync")
            recorder.modules.name_tree(training.model)
            with (ProfilerAlongside(backend) if variant == "recorder_prof" else nullcontext()):
                with recorder:
                    times = []
                    for step in range(steps):
                        recorder.step = step
                        recorder.modules.reset_nodes()
                        times.append(timed(recorder))
            facts["calls_per_step"] = len(recorder.rows) / steps
            return times
        raise SystemExit(f"unknown variant {variant!r}")

    t0 = time.time()
    for variant in variants:  # warm every path (kernels compile on first use)
        run_variant(variant, 1)
    rounds = []

    def summarize() -> dict:
        med = {v: statistics.median([t for r in rounds for t in r[v]]) for v in variants}
        per_round = {}
        for base in ("bare", "profiler"):
            if base in variants:
                for v in variants:
                    if v != base:
                        ratios = sorted(statistics.median(r[v]) / statistics.median(r[base]) for r in rounds)
                        per_round[f"{v}_vs_{base}"] = {"median": round(statistics.median(ratios), 4),
                                                       "min": round(ratios[0], 4), "max": round(ratios[-1], 4)}
        calls = facts.get("calls_per_step")
        per_call_us = {}
        if calls:
            for v in variants:
                if v != "bare" and "bare" in variants:
                    per_call_us[v] = round((med[v] - med["bare"]) * 1000 / calls, 2)
        result = {
            "model": path.name, "batch_size": training.batch_size, "device": backend.name,
            "device_name": backend.device_name(), "torch_version": torch.__version__,
            "versions": backend.versions(), "python_version": platform.python_version(),
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "rounds": len(rounds), "steps_per_round": args.steps, "wall_s": round(time.time() - t0, 1),
            "median_step_ms": {v: round(t, 3) for v, t in med.items()},
            "ratios_per_round": per_round,
            "extra_us_per_call_vs_bare": per_call_us,
            **facts,
            "rounds_raw": rounds,
        }
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        return result

    for r in range(args.rounds):
        order = variants if r % 2 == 0 else variants[::-1]
        row = {v: run_variant(v, args.steps) for v in order}
        rounds.append(row)
        summarize()
        print(f"round {r}: " + ", ".join(f"{v} {statistics.median(row[v]):.2f}" for v in variants), flush=True)

    # what one synchronize costs on this device: idle (nothing queued), and after one small op
    x = torch.ones(1024, device=backend.device())

    def per_call(fn, n=200):
        fn()
        start = time.perf_counter_ns()
        for _ in range(n):
            fn()
        return round((time.perf_counter_ns() - start) / n / 1000, 2)

    facts["sync_idle_us"] = per_call(lambda: backend.synchronize([x]))
    facts["small_add_us"] = per_call(lambda: x.add(1.0))
    facts["small_add_sync_us"] = per_call(lambda: backend.synchronize([x.add(1.0)]))
    result = summarize()
    print(json.dumps({k: v for k, v in result.items() if k != "rounds_raw"}, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
