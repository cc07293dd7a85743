"""Measure the DirectML truth table on real torch-directml (Linux, realdml; see docs/realdml.md).

    . ~/.cache/realdml/env.sh
    python tools/realdml/measure_truth.py --out dmlprof/tables/data/torch_directml-0.2.5.dev240914.measured.json

Runs every truth-table sample (tools/realdml/truth_samples.py) on the real torch-directml in worker
processes (truth_worker.py: each sample on the CPU, then a run nothing intercepts, which alone judges
values, then a run under dmlprof's recorder for verdicts and the call a failure is at, each followed by a
device health probe). truth_supervisor.py decides what each result is worth: a worker is discarded after
any abort or failed probe; a sample that ended its worker after other work, or after which the device
failed its probe, is re-run alone in a fresh worker; one that removes the device again is "device_lost",
never its op's failure. Workers are forked from this process once torch and OpInfo's database are loaded
(Linux), so a restart costs a DirectML device, not an interpreter. The samples that stopped at "no
float64" run again on an adapter with float64 (``VKD3D_REALDML_FORCE_FP64=1``): the table holds both
adapter classes. ``--keys-file`` measures a chosen set (a re-measure; ship_truth.py --merge folds it in).
"""
from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import platform
import select
import signal
import sys
import time
from pathlib import Path


HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

from truth_supervisor import GENERATOR, Supervisor  # noqa: E402  (beside this file; torch-free)

#: a worker silent this long is stuck (a kernel compile takes seconds; a hang never ends)
SILENCE_LIMIT_S = 300
FLOAT64_ERROR = "does not support Double (Float64)"
FORCE_FP64_ENV = "VKD3D_REALDML_FORCE_FP64"


class Worker:
    """A forked worker running keys; :meth:`events` yields its JSON events until it ends."""

    def __init__(self, keys: list, env: dict, order: str = "clean-first"):
        read_fd, write_fd = os.pipe()
        err_read, err_write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the worker
            os.close(read_fd)
            os.close(err_read)
            os.environ.update(env)
            os.dup2(write_fd, 1)
            os.dup2(err_write, 2)
            sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), encoding="utf-8", write_through=True)
            code = 1
            try:
                import truth_worker

                truth_worker._out = sys.stdout
                code = truth_worker.main(keys, order)
            finally:
                os._exit(code)
        os.close(write_fd)
        os.close(err_write)
        self.stream = os.fdopen(read_fd, "r", encoding="utf-8")
        self.errors = os.fdopen(err_read, "r", encoding="utf-8", errors="replace")
        self.stderr_tail = ""

    def events(self):
        buffered = ""
        while True:
            ready, _, _ = select.select([self.stream, self.errors], [], [], SILENCE_LIMIT_S)
            if not ready:
                os.kill(self.pid, signal.SIGKILL)
                yield {"silent": True}
                return
            if self.errors in ready:
                chunk = os.read(self.errors.fileno(), 65536).decode("utf-8", "replace")
                self.stderr_tail = (self.stderr_tail + chunk)[-20000:]
            if self.stream in ready:
                chunk = os.read(self.stream.fileno(), 1 << 20).decode("utf-8", "replace")
                if not chunk:
                    return
                buffered += chunk
                *lines, buffered = buffered.split("\n")
                for line in lines:
                    if line.strip():
                        yield json.loads(line)

    def exit_status(self) -> str:
        _, status = os.waitpid(self.pid, 0)
        try:  # what it printed after the pipe closed
            self.stderr_tail = (self.stderr_tail + self.errors.read())[-20000:]
        except (OSError, ValueError):
            pass
        if os.WIFSIGNALED(status):
            return signal.Signals(os.WTERMSIG(status)).name
        return f"exit {os.WEXITSTATUS(status)}"


def measure(keys: list, env: dict, log=print, spawn=Worker, journal=None, alone=()) -> dict:
    """Every key's result, judged by :class:`Supervisor` (``spawn(keys, env, order)`` starts a worker)."""
    if spawn is Worker:  # dmlprof asks for the adapters in a child process once per process: ask here, under
        from dmlprof.backends.dml import probe_adapters  # this pass's env, so forked workers inherit the answer

        saved = {name: os.environ.get(name) for name in env}
        os.environ.update(env)
        probe_adapters.cache_clear()
        probe_adapters()
        for name, value in saved.items():
            os.environ.pop(name, None) if value is None else os.environ.__setitem__(name, value)
    return Supervisor(spawn, env, lambda line: log(line, flush=True), journal).measure(keys, alone)


def versions() -> dict:
    from importlib.metadata import version

    import torch

    found = {"torch_directml": version("torch-directml"), "torch": torch.__version__,
             "python": platform.python_version(), "platform": platform.platform()}
    found["vkd3d_proton"] = os.environ.get("REALDML_VKD3D_PROTON", "3.0.1")
    found["mesa"] = os.environ.get("REALDML_MESA", "25.0.7 (lavapipe)")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--samples-per-op", type=int, default=None, help="the same count for every dtype")
    parser.add_argument("--only", default="", help="comma-separated OpInfo labels (to look closer)")
    parser.add_argument("--dtypes", default=",".join(__import__("truth_samples").DTYPES))
    parser.add_argument("--alone-keys", type=Path, help="keys known to end the process: each runs alone at once")
    parser.add_argument("--journal", type=Path, help="append each sample's result here as it is decided (JSON lines)")
    parser.add_argument("--keys-file", type=Path, help="measure only these sample keys (one a line): a re-measure "
                                                         "that ship_truth.py --merge folds into the shipped table")
    args = parser.parse_args()
    import torch  # loaded before forking: each worker starts from here
    import truth_samples

    # One thread, here and so in every worker: an OpenMP pool started before fork() deadlocks the
    # child's first parallel op (the samples are small; nothing is lost).
    torch.set_num_threads(1)

    only = frozenset(filter(None, args.only.split(",")))
    counts = dict.fromkeys(truth_samples.DTYPES, args.samples_per_op) if args.samples_per_op else None
    keys = list(truth_samples.keys(counts, tuple(args.dtypes.split(",")), only))
    keys += [key for key in truth_samples.probe_keys() if not only or key.split("|")[0] in only]
    if args.keys_file:
        try:
            keys = args.keys_file.read_text(encoding="utf-8").split()
        except OSError as exc:
            print(f"error: cannot read --keys-file: {exc}", file=sys.stderr)
            return 2
    print(f"{len(keys)} samples", flush=True)
    started = time.time()
    alone = args.alone_keys.read_text(encoding="utf-8").split() if args.alone_keys else ()
    base = measure(keys, {FORCE_FP64_ENV: "0"}, journal=args.journal, alone=alone)
    refused = [key for key, result in base.items() if FLOAT64_ERROR in result.get("message", "")]
    print(f"{len(refused)} samples stopped at float64; again on an adapter with float64", flush=True)
    with_fp64 = measure(refused, {FORCE_FP64_ENV: "1"}, journal=args.journal.with_suffix(".float64.jsonl")
                        if args.journal else None) if refused else {}
    document = {
        "about": "torch-directml measured on real DirectML: OpInfo samples, each call's verdict, "
                 "failures and error against the CPU (docs/realdml.md, tools/realdml/measure_truth.py)",
        "date": datetime.date.today().isoformat(),
        "versions": versions(),
        "adapter_profiles": {"no_float64": "this stack as it is (lavapipe has no float64)",
                             "float64": f"{FORCE_FP64_ENV}=1: float64 reported and run (at float32 precision)"},
        "samples_per_op": counts or truth_samples.SAMPLES_PER_OP,
        "generator": GENERATOR,
        "keys_file": str(args.keys_file) if args.keys_file else None,
        "seconds": round(time.time() - started),
        "samples": base,
        "float64_samples": with_fp64,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=0, sort_keys=True), encoding="utf-8")
    print(f"wrote {args.out} ({len(base)} samples, {time.time() - started:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
