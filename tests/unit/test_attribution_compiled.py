"""A ``torch.compile``'d model under dmlprof's module attribution (record/attribution.py, record/compiled_calls.py)
compiles and runs as it does without it (re-probe 11, cases 21, 22, 41, 49, 57).

torch 2.13 warns at every call of a ``torch.compile(module)`` while global module hooks exist (dmlprof's): a script
whose filters turn UserWarnings into errors died at its compile. And Dynamo, seeing the hooks, traced their bodies:
it recompiled on the module stack's depth and broke the user's graph at ``sys._getframe``.
"""
from __future__ import annotations

import sys
import warnings

import pytest
import torch

from dmlprof.record.attribution import ModuleTracker

pytestmark = pytest.mark.live  # torch-version-sensitive: Dynamo differs between torch 2.4 and 2.13


class Block(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.linear(self.inner(x) if self.inner is not None else x)


def _chain(depth: int) -> torch.nn.Module:
    torch.manual_seed(0)
    model = None
    for _ in range(depth):
        model = Block(model)
    return model


class _CountingBackend:
    """Dynamo's eager backend, counting the graphs it is given and noting the tracker's module when each runs."""

    def __init__(self, tracker=None):
        self.graphs = 0
        self.tracker = tracker
        self.running_in: list = []

    def __call__(self, graph_module, example_inputs):
        self.graphs += 1

        def run(*args):
            if self.tracker is not None:
                self.running_in.append(self.tracker.current())
            return graph_module.forward(*args)
        return run


def _compile_and_train(compile_target, tracker=None, batches=(2, 3, 5, 7)):
    """The graphs and frames Dynamo compiled for a few batch sizes, and the losses; the tracker installed if given."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    backend = _CountingBackend(tracker)
    model = _chain(4)
    compiled = compile_target(model, backend)
    if tracker is not None:
        tracker.install()
    try:
        losses = [round(compiled(torch.ones(batch, 4)).pow(2).mean().item(), 6) for batch in batches]
    finally:
        if tracker is not None:
            tracker.remove()
        frames = dict(torch._dynamo.utils.counters["frames"])
        torch._dynamo.reset()
    return backend, frames, losses


def _compiled_module(model, backend):
    return torch.compile(model, backend=backend, dynamic=True)


def _compiled_function(model, backend):
    return torch.compile(lambda x: model(x), backend=backend, dynamic=True)


@pytest.mark.parametrize("compile_target", [_compiled_module, _compiled_function], ids=["module", "function"])
def test_dynamo_compiles_the_same_graphs_and_frames_with_the_tracker_installed(compile_target):
    plain, plain_frames, plain_losses = _compile_and_train(compile_target)
    tracked, tracked_frames, tracked_losses = _compile_and_train(compile_target, ModuleTracker())
    assert tracked_losses == plain_losses
    # Dynamo traced dmlprof's hooks: a graph break at sys._getframe, a recompile per stack depth
    assert (tracked.graphs, tracked_frames) == (plain.graphs, plain_frames)


def test_a_compiled_module_under_an_error_filter_for_user_warnings_runs_with_the_tracker_installed():
    torch._dynamo.reset()
    tracker = ModuleTracker()
    tracker.install()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("error", category=UserWarning)
            compiled = torch.compile(torch.nn.Linear(4, 2), backend="eager")
            compiled(torch.ones(3, 4)).sum().backward()
    finally:
        tracker.remove()
        torch._dynamo.reset()


def test_a_module_compiled_after_the_tracker_was_installed_without_dynamo_imported_warns_nothing(monkeypatch):
    # a scan installs the tracker before the script runs; torch._dynamo comes with the script's torch.compile
    # (or its optimizer): the compiled module's call is taken over when the first one is built
    tracker = ModuleTracker()
    eval_frame = sys.modules["torch._dynamo.eval_frame"]
    monkeypatch.delitem(sys.modules, "torch._dynamo.eval_frame")
    tracker.install()
    monkeypatch.setitem(sys.modules, "torch._dynamo.eval_frame", eval_frame)
    torch._dynamo.reset()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            compiled = torch.compile(torch.nn.Linear(4, 2), backend="eager")
            compiled(torch.ones(3, 4))
    finally:
        tracker.remove()
        torch._dynamo.reset()
    assert [str(w.message) for w in caught if "global hooks" in str(w.message)] == []


def test_a_compiled_modules_calls_are_its_original_modules_with_the_users_line():
    tracker = ModuleTracker()
    backend, _, _ = _compile_and_train(_compiled_module, tracker, batches=(2,))
    assert backend.running_in, "the compiled graph ran"
    names = {name for name, _ in backend.running_in}
    sources = {source.rpartition(":")[0] for _, source in backend.running_in}
    assert names == {"Block"}  # the model the script compiled, not torch's OptimizedModule wrapper
    assert [source for source in sources if not source.endswith("test_attribution_compiled.py")] == []


def test_backward_of_a_compiled_module_is_its_modules_and_the_hooks_are_back_after_it():
    torch._dynamo.reset()
    tracker = ModuleTracker()
    compiled = torch.compile(torch.nn.Sequential(torch.nn.Linear(4, 2)), backend="eager")
    eager = torch.nn.Linear(2, 2)
    tracker.install()
    try:
        out = eager(compiled(torch.ones(3, 4)))
        owners = {tracker.owner_of_node(node)[0] for node in _nodes(out.grad_fn)}
    finally:
        tracker.remove()
        torch._dynamo.reset()
    # the compiled model's nodes are the model's; the eager module after it is seen by the hooks again
    assert {"Sequential", "Linear"} <= owners
    assert tracker.stack == []


def _nodes(root):
    found, pending, seen = [], [root], set()
    while pending:
        node = pending.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        found.append(node)
        pending.extend(n for n, _ in node.next_functions)
    return found


@pytest.mark.skipif("__call__" not in torch._dynamo.eval_frame.OptimizedModule.__dict__,
                    reason="this torch does not warn at a compiled module's call for global hooks (torch 2.4)")
def test_the_programs_own_global_hooks_warning_is_placed_at_its_line_as_without_dmlprof():
    # with global hooks of the program's own, torch warns at the compiled module's call (stacklevel 2): under dmlprof
    # the frame there is dmlprof's wrapper of that call, which the warning capture must look past to the caller
    import dmlprof

    torch._dynamo.reset()
    handle = torch.nn.modules.module.register_module_forward_hook(lambda module, inputs, output: None)
    try:
        compiled = torch.compile(torch.nn.Linear(4, 2), backend="eager")
        with dmlprof.profile("cpu", profiler=False):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                torch.ones(1).add(1)  # a recorded call: the capture goes back in front of the program's receiver
                compiled(torch.ones(3, 4)); line = sys._getframe().f_lineno
    finally:
        handle.remove()
        torch._dynamo.reset()
    places = {(w.filename, w.lineno) for w in caught if "global hooks" in str(w.message)}
    assert places == {(__file__, line)}
