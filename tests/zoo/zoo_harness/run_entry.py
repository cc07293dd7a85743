"""Run one zoo entry in this process and write what happened as JSON.

    python -m zoo_harness.run_entry bare    FILE --out RESULT.json [--from cuda]
    python -m zoo_harness.run_entry dmlprof FILE --out RESULT.json --sessions DIR [--from cuda]

``bare`` runs the training step on the emulated DirectML device without
dmlprof: a model file through the contract's step (docs/model_contract.md),
a script as ``python FILE`` would, stopped after the step window. ``dmlprof``
runs ``dmlprof scan FILE --device emulated-dml --warmup W --steps S`` through
the real CLI, in this process. Both run under the same observation, which
issues no ATen op of its own:

* ``torch.profiler`` (CPU) over the whole run, cut into one window per
  optimizer step by marker ranges (``zoo::first_forward`` at the first module
  forward, ``zoo::step_end`` after each ``optimizer.step``);
* the emulated device's own fallback counters, reset when the warm-up steps
  end and read when the measured steps end;
* every loss: the tensor ``backward()`` is called on, read after the run.
"""
from __future__ import annotations

import argparse
import json
import random
import runpy
import sys
import traceback
from pathlib import Path

import torch

from zoo_harness.entries import WINDOW, read_entry

MARK_FIRST_FORWARD = "zoo::first_forward"
MARK_STEP_END = "zoo::step_end"
#: dmlprof must stop a script after its step window; past this many optimizer steps the harness stops it.
RUNAWAY_EXTRA_STEPS = 10


class StopRun(BaseException):
    """The step window is over (bare scripts), or the script ran far past it (dmlprof)."""


class Observer:
    """Counts optimizer steps, marks the profiler trace, keeps losses and windowed fallback counts."""

    def __init__(self, testing, warmup: int, steps: int, stop_at: int):
        self.testing = testing
        self.warmup, self.steps, self.stop_at = warmup, steps, stop_at
        self.optimizer_steps = 0
        self.losses: list = []
        self.counts = None
        self._handles: list = []
        self._in_backward = False

    def install(self) -> None:
        from torch.nn.modules.module import register_module_forward_pre_hook
        from torch.optim.optimizer import register_optimizer_step_post_hook

        if self.warmup == 0:
            self.testing.reset_fallback_counts()
        self._handles.append(register_module_forward_pre_hook(self._first_forward))
        self._handles.append(register_optimizer_step_post_hook(self._step_end))
        self._wrap_backward()

    def _first_forward(self, module, args):
        _mark(MARK_FIRST_FORWARD)
        self._handles[0].remove()

    def _step_end(self, optimizer, args, kwargs):
        self.optimizer_steps += 1
        _mark(MARK_STEP_END)
        if self.optimizer_steps == self.warmup:
            self.testing.reset_fallback_counts()
        if self.optimizer_steps == self.warmup + self.steps:
            self.counts = self.testing.fallback_counts()
        if self.optimizer_steps >= self.stop_at:
            raise StopRun(f"stopped after {self.optimizer_steps} optimizer steps")

    def _wrap_backward(self) -> None:
        tensor_backward, autograd_backward = torch.Tensor.backward, torch.autograd.backward
        observer = self

        def backward(self, *args, **kwargs):
            # A TorchFunctionMode (dmlprof's --from cuda) hands the call back to torch.Tensor.backward,
            # which is this wrapper again: one backward() call, kept once.
            outer = not observer._in_backward
            if outer:
                observer._keep_loss(self)
            observer._in_backward = True
            try:
                return tensor_backward(self, *args, **kwargs)
            finally:
                observer._in_backward = not outer

        def autograd_backward_kept(tensors, *args, **kwargs):
            if not observer._in_backward:
                for tensor in (tensors if isinstance(tensors, (list, tuple)) else [tensors]):
                    observer._keep_loss(tensor)
            return autograd_backward(tensors, *args, **kwargs)

        torch.Tensor.backward = backward
        torch.autograd.backward = autograd_backward_kept

    def _keep_loss(self, tensor) -> None:
        # Keep the tensor itself (no op); its value is read after the run.
        if self.counts is None and isinstance(tensor, torch.Tensor) and tensor.numel() == 1:
            self.losses.append(tensor)

    def finish(self) -> None:
        for handle in self._handles:
            handle.remove()
        if self.counts is None:
            self.counts = self.testing.fallback_counts()


def _mark(name: str) -> None:
    from torch._C._profiler import _RecordFunctionFast

    with _RecordFunctionFast(name):
        pass


# -- the bare run ----------------------------------------------------------------------------------
def _import_file(path: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"zoo_entry_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def _to(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    return type(value)(_to(v, device) for v in value)


def _default_loss(output, target):
    if isinstance(output, (tuple, list)):
        output = output[0]
    if not target.is_floating_point() and not target.is_complex():
        return torch.nn.functional.cross_entropy(output, target)
    return torch.nn.functional.mse_loss(output, target)


def run_contract_bare(path: Path, device, steps: int) -> None:
    """The model contract's step, exactly as docs/model_contract.md defines it."""
    module = _import_file(path)
    model = module.build_model()
    inputs, target = module.make_batch(int(getattr(module, "BATCH_SIZE", 16)))
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    model = model.to(device)
    model.train()
    make_optimizer = getattr(module, "make_optimizer", None) or (
        lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9))
    optimizer = make_optimizer(model.parameters())
    loss_fn = getattr(module, "loss_fn", None) or _default_loss
    for _ in range(steps):
        batch, labels = _to(inputs, device), target.to(device)
        loss = loss_fn(model(*batch), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def run_script(path: Path) -> None:
    """As ``python FILE`` would: ``__main__``, its argv, its folder first on sys.path."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(path)]
    sys.path.insert(0, str(path.parent))
    try:
        runpy.run_path(str(path), run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise RuntimeError(f"the script exited with status {exc.code}") from None
    finally:
        sys.argv[:], sys.path[:] = saved_argv, saved_path


def run_bare(entry, from_device) -> None:
    from dmlprof import testing
    from zoo_harness import provision

    device = testing.device()
    if entry.kind == "contract":
        run_contract_bare(entry.path, device, sum(WINDOW))
        return
    provision.install_directml()
    if from_device == "cuda":
        provision.install_cuda_mapping()
    run_script(entry.path)


# -- the dmlprof run -------------------------------------------------------------------------------
def dmlprof_argv(entry, from_device, sessions: Path) -> list:
    warmup, steps = WINDOW
    argv = ["scan", str(entry.path), "--device", "emulated-dml", "--warmup", str(warmup), "--steps", str(steps),
            # the harness runs its own torch.profiler around the scan (one profiler per process)
            "--no-profiler", "--out", str(sessions), "--quiet"]
    if from_device:
        argv += ["--from", from_device]
    return argv


def run_dmlprof(entry, from_device, sessions: Path) -> int:
    from dmlprof.cli import main

    return main(dmlprof_argv(entry, from_device, sessions))


# -- the trace -------------------------------------------------------------------------------------
def trace_windows(prof) -> dict:
    """Host events cut into optimizer-step windows: ``{"windows": [[[name, parent], ...], ...], "tail": [...]}``.

    Window 0 runs from the first module forward to the first step's end;
    window k from step k's end to step k+1's. ``parent`` is the enclosing
    event on the same thread (through a ``PythonDispatchMode`` range, which is
    reported as ``"<mode>/name"``), so nested re-dispatches can be told apart.
    """
    from torch.autograd import DeviceType

    events = []
    for event in prof.profiler.kineto_results.events():
        if event.device_type() != DeviceType.CPU:
            continue
        start = int(event.start_ns()) if hasattr(event, "start_ns") else int(event.start_us() * 1000)
        events.append((event.name(), start, int(event.duration_ns()), int(event.start_thread_id())))
    events.sort(key=lambda e: (e[1], -e[2]))
    parents = _parents(events)
    first = next((e[1] for e in events if e[0] == MARK_FIRST_FORWARD), None)
    ends = [e[1] for e in events if e[0] == MARK_STEP_END]
    windows: list = [[] for _ in ends]
    tail: list = []
    for (name, start, _, _), parent in zip(events, parents):
        if name.startswith("zoo::") or first is None or start < first:
            continue
        index = next((i for i, end in enumerate(ends) if start < end), None)
        (windows[index] if index is not None else tail).append([name, parent])
    return {"windows": windows, "tail": tail}


def _parents(events) -> list:
    """The enclosing event's name per event (per thread, by time containment)."""
    stacks: dict = {}
    parents = []
    for name, start, duration, thread in events:
        stack = stacks.setdefault(thread, [])
        while stack and stack[-1][1] + stack[-1][2] < start + duration:
            stack.pop()
        parent = ""
        if stack:
            parent = stack[-1][0]
            if parent == "PythonDispatchMode" and len(stack) > 1:
                parent = f"<mode>/{stack[-2][0]}"
        parents.append(parent)
        stack.append((name, start, duration))
    return parents


# -- main ------------------------------------------------------------------------------------------
def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["bare", "dmlprof"])
    parser.add_argument("file")
    parser.add_argument("--out", required=True)
    parser.add_argument("--sessions")
    args = parser.parse_args(argv)
    entry = read_entry(Path(args.file))
    from_device = entry.from_device
    result = {"mode": args.mode, "entry": str(entry.path), "kind": entry.kind, "from_device": from_device,
              "torch": torch.__version__, "window": list(WINDOW), "error": None, "exit_code": None}

    from dmlprof import testing

    testing.load()
    torch.manual_seed(0)
    random.seed(0)
    try:
        import numpy

        numpy.random.seed(0)
    except ImportError:
        pass
    warmup, steps = WINDOW
    stop_at = warmup + steps if args.mode == "bare" else warmup + steps + RUNAWAY_EXTRA_STEPS
    observer = Observer(testing, warmup, steps, stop_at)
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    observer.install()
    with profiler:
        try:
            if args.mode == "bare":
                run_bare(entry, from_device)
            else:
                result["exit_code"] = run_dmlprof(entry, from_device, Path(args.sessions))
        except StopRun:
            if args.mode == "dmlprof":
                result["error"] = (f"dmlprof did not stop the script after --warmup {warmup} --steps {steps}: "
                                   f"the harness stopped it after {observer.optimizer_steps} optimizer steps")
        except BaseException as exc:  # the result says what failed; the test decides
            result["error"] = f"{type(exc).__name__}: {exc}".strip()[:2000]
            result["traceback"] = traceback.format_exc()[-6000:]
        finally:
            observer.finish()
    result["optimizer_steps"] = observer.optimizer_steps
    result["fallback_counts"] = observer.counts
    result["losses"] = [float(t.detach().to("cpu").double()) for t in observer.losses]
    result.update(trace_windows(profiler))
    if args.sessions:
        result["sessions"] = sorted(str(p) for p in Path(args.sessions).glob("*.session.json"))
    out = Path(args.out)
    out.write_text(json.dumps(result), encoding="utf-8")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
