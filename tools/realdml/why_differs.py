"""Why does a truth sample compute otherwise under dmlprof's recorder? Each layer of it, alone.

    python tools/realdml/why_differs.py KEY [KEY ...]      (under realdml's env.sh, or on a GPU host's kit)

For each key (tools/realdml/truth_samples.py), runs the sample on the CPU (the reference), plainly on the
DirectML device (twice), and under each layer the recorder adds: a dispatch mode that only re-runs each call
from Python, the same plus a read-back of one element of each call's output (what the recorder's per-call
sync does), and the recorder itself without and with its sync. Prints, for each run, whether it is bit for
bit the plain run and its largest error against the CPU, output by output: the first layer that differs is
the cause, and the CPU says which of the two is right.
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]


def main(keys: list) -> int:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    import transparency
    import truth_samples
    from dmlprof.backends import resolve_backend
    from dmlprof.record.recorder import Recorder

    warnings.simplefilter("ignore")
    backend = resolve_backend("dml")
    device = backend.device()

    class ReRun(TorchDispatchMode):  # each call re-run from Python, as any dispatch mode does
        def __init__(self, sync=False):
            super().__init__()
            self.sync = sync

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if self.sync:
                backend.synchronize(torch.utils._pytree.tree_flatten(out)[0])
            return out

    def recorded(sync):
        def run(sample):
            recorder = Recorder(backend, sync=sync)
            recorder.rule = recorder.refusals = None
            with recorder:
                return transparency._run(sample, device, torch)
        return run

    def under(mode):
        def run(sample):
            with mode:
                return transparency._run(sample, device, torch)
        return run

    layers = [("plain again", lambda sample: transparency._run(sample, device, torch)),
              ("re-run from Python", under(ReRun())), ("re-run + read back", under(ReRun(sync=True))),
              ("recorder, no sync", recorded(False)), ("recorder, sync", recorded(True))]
    for key in keys:
        sample = truth_samples.sample(key)  # one for every run (OpInfo draws some arguments anew each time)
        cpu = transparency._run(sample, "cpu", torch)
        plain = transparency._run(sample, device, torch)
        print(f"{key}: plain vs CPU {_errors(plain, cpu, torch)}")
        for name, run in layers:
            try:
                got = run(sample)
            except Exception as exc:
                print(f"  {name:20} raises {type(exc).__name__}: {str(exc)[:120]}")
                continue
            same = transparency._both_same(plain, got, torch)
            print(f"  {name:20} {'same as plain' if same else 'DIFFERS from plain'}; vs CPU {_errors(got, cpu, torch)}")
    return 0


def _errors(run, cpu, torch) -> str:
    """The largest absolute error of each output, then each gradient, against the CPU's."""
    parts = []
    for kind, mine, theirs in (("out", run[0], cpu[0]), ("grad", run[1], cpu[1])):
        for index, (a, b) in enumerate(zip(mine, theirs)):
            if a is None or b is None or a.shape != b.shape:
                parts.append(f"{kind}{index}: -")
                continue
            diff = (a.double() - b.double()).abs().nan_to_num(0.0)
            parts.append(f"{kind}{index}: {diff.max().item():.3g}" if diff.numel() else f"{kind}{index}: empty")
    return ", ".join(parts)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
