"""What the replacements are worth on a real GPU: DirectML's fallbacks replayed on CUDA.

The emulated DirectML device runs on the host CPU, where a fallback costs a
memcpy, so it cannot show what a fallback costs next to a GPU. This script
takes, per model, the top-level ops that fell back on the emulated DirectML
device (``fallback_top_level_ops`` in benchmarks/results/replacements.json) and
runs the model's training step on CUDA with exactly those calls sent through
a CPU round trip, as torch-directml's boxed fallback does (copy the tensors to
the host, which waits for the GPU; run the CPU kernel; copy the results back;
write back what the op mutates). Attention takes torch's math path, as it does
on DirectML. Then the same with ``dmlprof.patch`` applied, where nothing is
left to round-trip. Both runs go through the same dispatch mode, so its own
cost is in both.

    python benchmarks/replacements_cuda.py [--batch-size 32] [--steps 10] [--rounds 3]

Writes benchmarks/results/replacements_cuda.json.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "benchmarks" / "results" / "replacements.json"
RESULT = ROOT / "benchmarks" / "results" / "replacements_cuda.json"


def _op_name(func) -> str:
    overload = func._overloadname
    base = f"aten::{func._opname}" if func.namespace == "aten" else f"{func.namespace}::{func._opname}"
    return base if overload == "default" else f"{base}.{overload}"


class CpuRoundTrip(TorchDispatchMode):
    """Runs the named ops the way a boxed CPU fallback does; counts the calls."""

    def __init__(self, ops):
        super().__init__()
        self.ops = set(ops)
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _op_name(func) not in self.ops:
            return func(*args, **kwargs)
        self.calls += 1
        originals: dict = {}

        def to_cpu(value):
            if isinstance(value, torch.Tensor) and value.device.type != "cpu":
                copy = value.cpu()  # waits for the GPU, as the fallback's copy does
                originals[id(copy)] = (copy, value)
                return copy
            return value

        cpu_args, cpu_kwargs = tree_map(to_cpu, args), tree_map(to_cpu, kwargs)
        out = func(*cpu_args, **cpu_kwargs)
        for argument in func._schema.arguments:  # write back what the op mutated
            if argument.alias_info is not None and argument.alias_info.is_write:
                value = cpu_kwargs.get(argument.name) if argument.name in cpu_kwargs else None
                if value is None:
                    index = [a.name for a in func._schema.arguments].index(argument.name)
                    value = cpu_args[index] if index < len(cpu_args) else None
                for tensor in value if isinstance(value, (list, tuple)) else [value]:
                    if isinstance(tensor, torch.Tensor) and id(tensor) in originals:
                        originals[id(tensor)][1].copy_(tensor)

        def back(value):
            if isinstance(value, torch.Tensor):
                if id(value) in originals:  # an in-place op returns its (now written back) input
                    return originals[id(value)][1]
                device = next(iter(originals.values()))[1].device if originals else value.device
                return value.to(device)
            return value

        return tree_map(back, out)


def bench(path: Path, top_ops, backend, batch_size: int, steps: int, rounds: int) -> dict:
    from dmlprof.replaced_scan import apply_to_training_step
    from dmlprof.runner import TrainingStep

    math_attention = nullcontext
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        math_attention = lambda: sdpa_kernel(SDPBackend.MATH)  # noqa: E731  (DirectML takes the math path)
    except ImportError:
        pass
    training = TrainingStep.from_file(path, backend, batch_size)
    loss_fn = training.loss_fn
    times = {"plain": [], "patched": []}
    calls = {"plain": 0, "patched": 0}
    error = None

    # DirectML has no cuDNN: its LSTM/GRU go through the fused cells (which fall back), not _cudnn_rnn.
    rnn_cells = any("_thnn_fused" in op for op in top_ops)
    no_cudnn = (lambda: torch.backends.cudnn.flags(enabled=False)) if rnn_cells else nullcontext

    def timed(label):
        mode = CpuRoundTrip(top_ops)
        with math_attention(), no_cudnn(), mode:
            training.run().item()  # warm-up
            for _ in range(steps):
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
                started = time.perf_counter()
                training.run().item()
                times[label].append((time.perf_counter() - started) * 1e3)
        calls[label] += mode.calls

    for _ in range(rounds):
        if error is None:
            try:
                timed("plain")
            except Exception as exc:  # e.g. the fused LSTM cell: no CPU kernel to fall back to
                error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        handle = apply_to_training_step(training)
        timed("patched")
        handle.undo()
        training.loss_fn = loss_fn
    row = {"model": path.name, "batch_size": training.batch_size, "round_tripped_ops": sorted(top_ops)}
    for label in ("plain", "patched"):
        if times[label]:
            row[label] = {"step_time_ms_median": round(statistics.median(times[label]), 3),
                          "step_time_ms_min": round(min(times[label]), 3),
                          "round_trips_per_step": calls[label] / (len(times[label]) // steps * (steps + 1))}
    if error:
        row["plain_error"] = error
    if "plain" in row and not error:
        row["speedup"] = round(row["plain"]["step_time_ms_median"] / row["patched"]["step_time_ms_median"], 3)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--source", default=str(SOURCE))
    parser.add_argument("--out", default=str(RESULT))
    parser.add_argument("--models", nargs="*", help="model file names to run (default: all in the source)")
    parser.add_argument("--merge", action="store_true", help="replace only these models' rows in --out")
    args = parser.parse_args(argv)

    from dmlprof.backends import resolve_backend

    source = json.loads(Path(args.source).read_text(encoding="utf-8"))
    backend = resolve_backend(args.device)
    rows = []
    for model in source["models"]:
        if args.models and model["model"] not in args.models:
            continue
        top_ops = model["before"].get("fallback_top_level_ops") or []
        if model["before"].get("error"):
            top_ops = ["aten::_thnn_fused_lstm_cell", "aten::_thnn_fused_gru_cell"]
        print(f"{model['model']} ...", file=sys.stderr, flush=True)
        row = bench(ROOT / "models" / model["model"], top_ops, backend, args.batch_size, args.steps, args.rounds)
        rows.append(row)
        print("  " + json.dumps({k: v for k, v in row.items() if k != "round_tripped_ops"}), file=sys.stderr, flush=True)
    document = {
        "benchmark": "replacements_cuda",
        "what": "DirectML's fallbacks (top-level ops that fell back on the emulated device) replayed as CPU round "
                "trips on a real GPU, before and after dmlprof.patch",
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else args.device,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "batch_size": args.batch_size,
        "steps": args.steps,
        "rounds": args.rounds,
        "source": str(Path(args.source).relative_to(ROOT)) if Path(args.source).is_relative_to(ROOT) else args.source,
        "models": rows,
    }
    out = Path(args.out)
    if args.merge and out.exists():
        previous = json.loads(out.read_text(encoding="utf-8"))
        done = {row["model"] for row in rows}
        document["models"] = [r for r in previous["models"] if r["model"] not in done] + rows
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
