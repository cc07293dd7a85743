"""What the journal costs: a recorded training step with and without every call written down as it happens.

A scan's child journals each call twice (before it runs and after it returned: dmlprof/record/journal.py) so a
native crash keeps the recording; the figure is the journal in the folder a scan puts it in (dmlprof.survival).
Target: a recorded step costs at most 3 % more with the journal than without (issue 31). Both variants run in
one process, interleaved step by step in rounds (the order alternating), as ``dmlprof scan`` records its steps
(the dispatcher tap, a sync after each call on an accelerator); the figure is the median over rounds of each round's
ratio (with / without, each a median of its steps), with the quartiles of those ratios (how settled it is).

    python benchmarks/journal_cost.py [--device auto] [--rounds 24] [--steps 3] [--threads N] [--clock wall|thread]
                                      [--breakdown]

``--breakdown`` adds variants that each keep a part of the journal's work, to tell where its cost goes: the
recorder's two calls into a journal that does nothing, the begin record alone, the fixed parts' numbers looked up
and nothing written, the journal over anonymous memory instead of the file's mapping, the journal as it was
before its fixed parts were keyed by their facts' hash, and the end records looked up and packed in batches of 32
(whether sharing the caches between lookups pays: on an H100, 100 rounds, it did not, 1.051x and 1.023x beside the
journal's 1.029x and 1.032x).

On a CPU shared with other work (a 2-core machine several people use), torch's intra-op threads wait on the
others' processes and a LeNet-5 step reads 10 ms or 140 ms by chance: ``--threads 1 --clock thread`` times
the step by this thread's CPU time (all of a one-thread CPU step's work), which another process cannot stretch.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dmlprof import survival  # noqa: E402
from dmlprof.backends import resolve_backend  # noqa: E402
from dmlprof.record import journal  # noqa: E402
from dmlprof.record.journal import Journal  # noqa: E402
from dmlprof.record.recorder import Recorder  # noqa: E402
from dmlprof.runner import TrainingStep  # noqa: E402

MODELS = ("lenet5.py", "resnet18.py")
TARGET = 1.03


CLOCKS = {"wall": time.perf_counter_ns, "thread": time.thread_time_ns}


def recorded_steps(training, backend, journal, steps: int, clock=time.perf_counter_ns) -> list:
    """Step times (ms) of ``steps`` recorded steps, the journal writing each call when one is given."""
    recorder = Recorder(backend, sync=True)
    recorder.journal = journal
    times = []
    with recorder:
        for _ in range(steps):
            start = clock()
            loss = training.run(recorder)
            backend.synchronize([loss])
            times.append((clock() - start) / 1e6)
    return times


class _CallsOnly:
    """A journal that writes nothing: what the recorder pays to call one (its facts gathered, two calls)."""
    written = 0

    def begin(self, op, step, phase, module, inputs):
        return 0

    def end(self, number, outputs, start_ns, elapsed_ns, thread, source, fallen=(), arguments=""):
        pass

    def close(self):
        pass


class _BeginOnly(Journal):
    """The begin record alone (the end's call made, nothing written)."""

    def end(self, number, outputs, start_ns, elapsed_ns, thread, source, fallen=(), arguments=""):
        pass


class _LookupsOnly(Journal):
    """Each record's fixed part looked up (its number), nothing packed: what finding the numbers costs."""

    def begin(self, op, step, phase, module, inputs):
        try:
            return self._begin_tails[hash((id(op), phase, module, inputs))]
        except (KeyError, TypeError):
            return self._begin_tail(op, phase, module, inputs)

    def end(self, number, outputs, start_ns, elapsed_ns, thread, source, fallen=(), arguments=""):
        try:
            self._end_tails[hash((source, outputs, fallen, arguments, thread))]
        except (KeyError, TypeError):
            self._end_tail(source, outputs, fallen, arguments, thread)


class _KeyedByFacts(Journal):
    """The journal as it was before its fixed parts were keyed by their facts' hash: each lookup compares the facts
    with the key stored at the first call, element by element."""

    def begin(self, op, step, phase, module, inputs):
        key = (id(op), phase, module, inputs)
        tail = self._by_facts.get(key)
        if tail is None:
            tail = self._by_facts[key] = self._begin_tail(op, phase, module, inputs)
        offset = next(self._offsets)
        journal._BEGIN.pack_into(self._map, offset, b"B", tail, step)
        return offset

    def end(self, number, outputs, start_ns, elapsed_ns, thread, source, fallen=(), arguments=""):
        key = (source, outputs, fallen, arguments, thread)
        tail = self._by_facts.get(key)
        if tail is None:
            tail = self._by_facts[key] = self._end_tail(source, outputs, fallen, arguments, thread)
        journal._END.pack_into(self._map, next(self._offsets), b"E", tail, number, start_ns, elapsed_ns)

    def __init__(self, path):
        super().__init__(path)
        self._by_facts: dict = {}


class _AnonymousMemory(Journal):
    """Both records, into anonymous memory instead of the file's shared mapping (the file kept, unwritten)."""

    def __init__(self, path):
        super().__init__(path)
        import mmap
        self._map = mmap.mmap(-1, self._size)


class _DeferredEnds(Journal):
    """The begin record at once; each end's fixed part looked up and packed in batches of :data:`_BATCH` (a
    prototype: whether the lookups' cost is their cold caches, which a batch would share)."""

    _BATCH = 32

    def __init__(self, path):
        super().__init__(path)
        self._pending: list = []

    def end(self, number, outputs, start_ns, elapsed_ns, thread, source, fallen=(), arguments=""):
        pending = self._pending
        pending.append((next(self._offsets), number, start_ns, elapsed_ns, (source, outputs, fallen, arguments,
                                                                            thread)))
        if len(pending) >= self._BATCH:
            tails = self._end_tails
            for offset, begun, start, elapsed, facts in pending:
                try:
                    tail = tails[hash(facts)]
                except (KeyError, TypeError):
                    tail = self._end_tail(*facts)
                journal._END.pack_into(self._map, offset, b"E", tail, begun, start, elapsed)
            pending.clear()


def breakdown_variants(folder: Path, stem: str) -> dict:
    return {"calls_only": _CallsOnly(), "begin_only": _BeginOnly(folder / f"{stem}.begin.journal"),
            "lookups_only": _LookupsOnly(folder / f"{stem}.lookups.journal"),
            "keyed_by_facts": _KeyedByFacts(folder / f"{stem}.facts.journal"),
            "anonymous_memory": _AnonymousMemory(folder / f"{stem}.anonymous.journal"),
            "deferred_ends": _DeferredEnds(folder / f"{stem}.deferred.journal")}


def journal_folders(scratch: Path) -> dict:
    """Where the journal is measured: the folder a scan puts it in (dmlprof.survival: /dev/shm on Linux where it has
    the room, a RAM-backed folder, else the temporary folder), the figure; and the temporary folder too where that
    is another (a file system that writes pages back to a disk can stall a write into a page of the mapping the
    flusher is writing out)."""
    scans = survival._journal_folder()
    folders = {"journal": scans}
    if scans.parent != Path(tempfile.gettempdir()):
        folders["journal_in_temporary_folder"] = scratch
    return folders


def measure_model(model: Path, backend, rounds: int, steps: int, folders: dict, clock=time.perf_counter_ns,
                  breakdown: bool = False) -> dict:
    training = TrainingStep.from_file(model, backend, None)
    journals = {name: Journal(folder / f"{model.stem}.journal") for name, folder in folders.items()}
    if breakdown:
        journals.update(breakdown_variants(folders["journal"], model.stem))
    variants = {"without_journal": None, **journals}
    for name, writer in variants.items():  # warm every path (allocator, kernels, the journal's strings)
        recorded_steps(training, backend, writer, 1)
    times: dict = {name: [] for name in variants}  # each round's median step, by variant
    for round_index in range(rounds):
        # the variants take turns step by step (the order alternating by round), so the steps a round compares
        # ran next to each other: a GPU's clock or a neighbour's load drifts over a variant's whole turn, not a step
        order = list(variants) if round_index % 2 == 0 else list(variants)[::-1]
        steps_taken: dict = {name: [] for name in variants}
        for _ in range(steps):
            for name in order:
                steps_taken[name] += recorded_steps(training, backend, variants[name], 1, clock)
        for name in variants:
            times[name].append(statistics.median(steps_taken[name]))
    written = journals["journal"].written
    for journal in journals.values():
        journal.close()
    median = {name: statistics.median(values) for name, values in times.items()}
    recorder = Recorder(backend, sync=False)
    with recorder:
        training.run(recorder)
    # the figure: the median over rounds of each round's ratio (the variants of a round ran back to back, so a
    # stretch where the machine was slow, or the GPU's clock low, divides out)
    round_ratios = {name: [with_ / without for with_, without in zip(times[name], times["without_journal"])]
                    for name in journals}
    ratios = {name: round(statistics.median(values), 4) for name, values in round_ratios.items()}
    journal_quartiles = statistics.quantiles(round_ratios["journal"], n=4) if rounds > 1 else [ratios["journal"]] * 3
    return {"model": model.name, "batch_size": training.batch_size, "op_calls_per_step": len(recorder.rows),
            "median_recorded_step_ms": {name: round(value, 3) for name, value in median.items()},
            "with_vs_without": ratios["journal"], "meets_target": ratios["journal"] <= TARGET,
            "with_vs_without_quartiles": [round(journal_quartiles[0], 4), round(journal_quartiles[2], 4)],
            "by_folder_vs_without": ratios,
            "journal_bytes_per_call": round(written / max(1, rounds * steps + 1)
                                            / max(1, len(recorder.rows)), 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--rounds", type=int, default=24)
    parser.add_argument("--steps", type=int, default=3, help="recorded steps per variant per round")
    parser.add_argument("--threads", type=int, help="torch's intra-op threads (default: torch's own)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall: elapsed time; thread: this thread's CPU time (with --threads 1 on a shared CPU)")
    parser.add_argument("--breakdown", action="store_true", help="also the variants that keep a part of the work")
    parser.add_argument("--out", help="default: benchmarks/results/journal_cost-<device>.json")
    args = parser.parse_args(argv)
    if args.threads is not None:
        if args.threads < 1:
            parser.error("--threads must be at least 1")
        torch.set_num_threads(args.threads)
    backend = resolve_backend(args.device)
    with tempfile.TemporaryDirectory(prefix="dmlprof-journal-cost-") as folder:
        folders = journal_folders(Path(folder))
        try:
            results = [measure_model(REPO / "models" / name, backend, args.rounds, args.steps, folders,
                                     CLOCKS[args.clock], args.breakdown) for name in MODELS]
        finally:
            shutil.rmtree(folders["journal"], ignore_errors=True)
    result = {
        "benchmark": "journal_cost",
        "date": time.strftime("%Y-%m-%d"),
        "device": backend.name,
        "device_name": backend.device_name(),
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "machine": f"{platform.machine()}, {torch.get_num_threads()} torch threads",
        "journal_folder": f"{folders['journal'].parent} (where a scan puts it)",
        "clock": {"wall": "elapsed time (perf_counter)", "thread": "the recording thread's CPU time"}[args.clock],
        "rounds": args.rounds,
        "steps_per_round": args.steps,
        "target": f"a recorded step with the journal <= {TARGET}x one without (median step times, one process)",
        "models": results,
        "meets_target": all(model["meets_target"] for model in results),
    }
    out = Path(args.out or REPO / "benchmarks" / "results" / f"journal_cost-{backend.name}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
