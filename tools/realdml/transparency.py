"""Does dmlprof's recorder change what real torch-directml computes? Every truth-table sample, run twice.

    python tools/realdml/transparency.py [--device dml|emulated-dml] [--only SUBSTRING ...] [--limit N] [--json OUT]
        [--per-label N] [--log LOG [--resume]] [--shard I/N]
    (--device dml, the default, under realdml's env.sh; --shard splits a long run over processes)

Each sample (tools/realdml/truth_samples.py: OpInfo's samples and the probes) runs on the DirectML device
plainly, then again under dmlprof's live recorder as ``dmlprof scan --device dml`` makes it (the dispatcher
tap, a per-call sync, torch-directml's refusals off: the real call runs). Its outputs and the gradients of
its inputs are compared bit for bit (NaN equal to NaN). Left out: ops that draw random numbers (the device's
generator moves on between the two runs), the empty factories (uninitialized memory), and a sample whose
recorded run differs while its runs, taken again, differ among themselves (a kernel that sums in no fixed
order: not deterministic on the device). Samples run in a worker process that is started anew
after any sample that ends it (torch-directml aborts on some calls); such a sample is counted, not judged,
unless its plain run had returned and the recorded one ended the process (that differs). Where it can
(POSIX), a worker is forked from this process once torch and OpInfo's database are loaded, so a restart
costs a DirectML device, not an interpreter: about one sample in eight ends its worker, and a fresh
interpreter spent ~60 s loading OpInfo each time, most of a run's time.

Prints one line per differing sample and a summary; ``--json`` writes every sample's outcome.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SAME, DIFFERS, RAISES, UNJUDGED = "same", "differs", "raises", "unjudged"
#: where the recorded run differs, both runs are taken again this many times: a sample whose runs differ among
#: themselves is not deterministic on this device, and its recorded run cannot be held to one of them
RETAKES = 3


# -- the worker: runs the keys in a file, one JSON line per sample on stdout ----------------------------------
def _worker(device_name: str, keys_file: str) -> None:
    import warnings

    events = os.fdopen(os.dup(1), "w", buffering=1)  # events alone on stdout: anything else printed goes to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if str(HERE) not in sys.path:
        sys.path[:0] = [str(HERE), str(REPO)]

    import torch

    import truth_samples
    from dmlprof.backends import resolve_backend
    from dmlprof.record.recorder import Recorder

    warnings.simplefilter("ignore")
    backend = resolve_backend(device_name)
    device = backend.device()
    for line in Path(keys_file).read_text(encoding="utf-8").splitlines():
        key = line.strip()
        if not key:
            continue
        events.write(json.dumps({"start": key}) + "\n")
        outcome = _judge(key, device, backend, torch, truth_samples, Recorder,
                         lambda key: events.write(json.dumps({"plain": key}) + "\n"))
        events.write(json.dumps({"key": key, **outcome}) + "\n")


def _run(sample, device, torch):
    """(outputs, gradients) of one run of a sample on ``device``, on the CPU."""
    grads: list = []
    real_grad = torch.autograd.grad

    def grad(*args, **kwargs):  # the sample asks for its inputs' gradients: keep them
        found = real_grad(*args, **kwargs)
        grads.extend(found)
        return found

    torch.autograd.grad = grad
    try:
        output = sample.run(device)
    finally:
        torch.autograd.grad = real_grad
    flat = torch.utils._pytree.tree_flatten(output)[0]
    return ([t.detach().to("cpu") for t in flat if isinstance(t, torch.Tensor)],
            [g.detach().to("cpu") if isinstance(g, torch.Tensor) else None for g in grads])


def _same(a, b, torch) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x is None or y is None:
            if x is not y:
                return False
            continue
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.is_floating_point() or x.is_complex():
            if not torch.equal(torch.nan_to_num(x, nan=0.0), torch.nan_to_num(y, nan=0.0)) or \
                    not torch.equal(x.isnan(), y.isnan()):
                return False
        elif not torch.equal(x, y):
            return False
    return True


def _judge(key, device, backend, torch, truth_samples, Recorder, plain_returned=lambda key: None) -> dict:
    # one sample for every run: rebuilt, a sample whose arguments OpInfo draws from Python's own generator
    # (huber_loss's delta, cosine_embedding_loss's margin) would be another sample
    sample = truth_samples.sample(key)
    why_not = _not_comparable(key, truth_samples)
    if why_not:
        return {"outcome": UNJUDGED, "why": why_not}
    try:
        plain = _run(sample, device, torch)
    except Exception as exc:
        return {"outcome": RAISES, "why": f"{type(exc).__name__} plainly"}
    plain_returned(key)

    def recorded_run():
        recorder = Recorder(backend, sync=True)
        recorder.rule = recorder.refusals = None  # the real call runs: what the recorder alone does to it
        with recorder:
            return _run(sample, device, torch), len(recorder.rows)

    try:
        recorded, calls = recorded_run()
    except Exception as exc:
        return {"outcome": DIFFERS, "why": f"raises only under the recorder: {type(exc).__name__}: {str(exc)[:200]}"}
    if _both_same(plain, recorded, torch):
        return {"outcome": SAME, "calls": calls}
    # A kernel that sums in no fixed order (atomics) differs from itself: the recorder is held to a difference
    # only where the plain runs agree with each other and every recorded run keeps differing from them.
    for _ in range(RETAKES):
        if not _both_same(plain, _run(sample, device, torch), torch) or \
                _both_same(plain, recorded_run()[0], torch):
            return {"outcome": UNJUDGED, "why": "not deterministic here (runs of it differ, recorded or not)",
                    "calls": calls}
    return {"outcome": DIFFERS, "why": "outputs or gradients differ bitwise", "calls": calls}


def _both_same(one, other, torch) -> bool:
    """Whether two runs' outputs and gradients are the same bit for bit."""
    return _same(one[0], other[0], torch) and _same(one[1], other[1], torch)


#: words in an op's name that say what its output holds cannot be compared between two runs
_RANDOM_WORDS = ("rand", "rrelu", "dropout", "bernoulli", "normal", "multinomial", "uniform", "exponential", "geometric",
                 "cauchy", "log_normal", "poisson")
_UNINITIALIZED = ("empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided")


def _not_comparable(key: str, truth_samples) -> str:
    """Why two runs of this sample cannot be held to the same output ("" where they can): the generator moves
    on between them, or the op returns memory it never wrote (whatever the allocator hands it that time)."""
    if key.startswith("probe."):
        return ""
    name = truth_samples.ops()[key.split("|")[0]].name.lower()
    if name in _UNINITIALIZED:
        return "returns uninitialized memory"
    return "draws random numbers" if any(word in name for word in _RANDOM_WORDS) else ""


# -- the parent: hands keys to a worker, starts another after a sample that ended one -------------------------
def _keys(only: list, limit, labels: str = "", shard: str = "", logged=None, per_label: int = 0) -> list:
    import truth_samples

    keys = list(truth_samples.keys()) + truth_samples.probe_keys()
    exact = frozenset(filter(None, labels.split(",")))
    if exact:
        keys = [key for key in keys if key.split("|")[0] in exact]
    if per_label:  # the first N of each op (float32's, with gradients, come first): every op, in a short run
        seen: dict = {}
        chosen = []
        for key in keys:
            label = key.split("|")[0]
            seen[label] = seen.get(label, 0) + 1
            if seen[label] <= per_label:
                chosen.append(key)
        keys = chosen
    if only:
        keys = [key for key in keys if any(part in key for part in only)]
    if shard:  # "I/N": every N-th key from the I-th, so N processes share a long run (a machine of many cores)
        index, count = (int(part) for part in shard.split("/"))
        keys = keys[index::count]
    if logged:  # a run resumed: the keys its log already judged are not run again
        keys = [key for key in keys if key not in logged]
    return keys[:limit] if limit else keys


def _logged(path) -> dict:
    """The outcomes an earlier run appended to ``path`` (a JSON-lines log), by key; {} where there is none."""
    found: dict = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return found
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:  # the line a killed run was writing
            continue
        found[event.pop("key")] = event
    return found


def judge(keys: list, device: str = "dml", timeout_s: float = 300, log=None) -> dict:
    """Every key's outcome: runs workers until each key is judged or has ended a worker (each also appended to
    ``log``, a JSON-lines file, as it comes: a long run's outcomes survive its interruption)."""
    outcomes: dict = {}
    record = (lambda key, outcome: log.write(json.dumps({"key": key, **outcome}) + "\n")) if log else (lambda *a: None)
    pending = list(keys)
    while pending:
        keys_file = Path(tempfile.mkdtemp(prefix="dmlprof-transparency-")) / "keys.txt"
        keys_file.write_text("\n".join(pending) + "\n", encoding="utf-8")  # a pipe would break when a worker dies
        worker = _start_worker(device, keys_file)
        current, plain_returned = None, False
        started = time.monotonic()
        for line in worker.stdout:
            event = json.loads(line)
            if "start" in event:
                current, plain_returned = event["start"], False
                continue
            if "plain" in event:
                plain_returned = True
                continue
            outcomes[event["key"]] = {k: v for k, v in event.items() if k != "key"}
            record(event["key"], outcomes[event["key"]])
            current = None
            if time.monotonic() - started > timeout_s * len(keys):
                break
        worker.wait()
        shutil.rmtree(keys_file.parent, ignore_errors=True)
        if current is not None and plain_returned:  # its plain run returned, then the recorded one ended the worker
            outcomes[current] = {"outcome": DIFFERS, "why": f"ended the process under the recorder only "
                                                            f"(exit {worker.returncode}; the plain run returned)"}
            record(current, outcomes[current])
        elif current is not None:  # the sample that ended the worker in its plain run: not the recorder's doing
            outcomes[current] = {"outcome": UNJUDGED, "why": f"ended the process (exit {worker.returncode})"}
            record(current, outcomes[current])
        pending = [key for key in pending if key not in outcomes]
    return outcomes


def _start_worker(device: str, keys_file: Path):
    """A worker judging the keys in ``keys_file``: forked where it can be (the parent has torch and OpInfo loaded,
    see :func:`_prepare_forking`), else a fresh interpreter. Either has ``stdout`` (its events), ``wait()`` and
    ``returncode`` (negative: the signal that ended it), as :class:`subprocess.Popen` has."""
    if _FORKING:
        return _ForkedWorker(device, keys_file)
    return subprocess.Popen([sys.executable, __file__, "--worker", "--device", device, "--keys", str(keys_file)],
                            stdout=subprocess.PIPE, text=True, bufsize=1)


class _ForkedWorker:
    def __init__(self, device: str, keys_file: Path):
        read_fd, write_fd = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the worker: its events go to the pipe; it never returns into the parent's code
            code = 1
            try:
                os.close(read_fd)
                os.dup2(write_fd, 1)
                os.close(write_fd)
                _worker(device, str(keys_file))
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        self.stdout = os.fdopen(read_fd, "r", encoding="utf-8")
        self.returncode = None

    def wait(self) -> int:
        _, status = os.waitpid(self.pid, 0)
        self.stdout.close()
        self.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        return self.returncode


_FORKING = False


def _prepare_forking(device: str) -> None:
    """Load what every worker needs once, here, so forked workers start from it (POSIX only)."""
    global _FORKING
    if not hasattr(os, "fork"):
        return
    import torch

    import truth_samples  # noqa: F401  (OpInfo's database: the ~60 s a fresh interpreter spends)

    # One thread, here and so in every worker: an OpenMP pool started before fork() deadlocks the child's
    # first parallel op. Both runs of a sample are in one worker, so the comparison is unchanged.
    torch.set_num_threads(1)
    if device == "dml":  # dmlprof asks for the adapters in a child process once per process: once, here
        from dmlprof.backends.dml import probe_adapters

        probe_adapters()
    _FORKING = True


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--keys", help=argparse.SUPPRESS)
    parser.add_argument("--device", default="dml", choices=["dml", "emulated-dml"],
                        help="real torch-directml (under realdml's env.sh), or dmlprof's emulated device")
    parser.add_argument("--only", nargs="*", default=[], help="keys containing any of these")
    parser.add_argument("--labels", default="", help="comma-separated OpInfo labels, exactly (measure_truth.py's --only)")
    parser.add_argument("--limit", type=int, help="at most this many samples")
    parser.add_argument("--per-label", type=int, default=0, metavar="N",
                        help="at most the first N samples of each OpInfo label (every op, a shorter run)")
    parser.add_argument("--json", help="write every sample's outcome here")
    parser.add_argument("--log", help="append each sample's outcome to this JSON-lines file as it comes")
    parser.add_argument("--shard", default="", help="I/N: this process's share of the keys (every N-th from the I-th)")
    parser.add_argument("--resume", action="store_true", help="skip the keys --log already judged; report them too")
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.device, args.keys)
        return 0
    started = time.monotonic()
    sys.path[:0] = [str(HERE), str(REPO)]
    _prepare_forking(args.device)
    logged = _logged(args.log) if args.resume and args.log else {}
    with open(args.log, "a", encoding="utf-8", buffering=1) if args.log else _nothing() as log:
        outcomes = judge(_keys(args.only, args.limit, args.labels, args.shard, logged, args.per_label),
                         args.device, log=log)
    wanted = set(_keys(args.only, None, args.labels, args.shard, per_label=args.per_label))
    outcomes = {**{key: value for key, value in logged.items() if key in wanted}, **outcomes}
    counts: dict = {}
    for key, outcome in sorted(outcomes.items()):
        counts[outcome["outcome"]] = counts.get(outcome["outcome"], 0) + 1
        if outcome["outcome"] == DIFFERS:
            print(f"differs: {key}: {outcome['why']}")
    summary = {"samples": len(outcomes), **counts, "seconds": round(time.monotonic() - started, 1)}
    print(json.dumps(summary))
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "samples": outcomes}, indent=1), encoding="utf-8")
    return 1 if counts.get(DIFFERS) else 0


if __name__ == "__main__":
    sys.exit(main())
