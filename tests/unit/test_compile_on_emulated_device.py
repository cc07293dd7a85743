"""``torch.compile`` on the emulated DirectML device does what it does on the real torch-directml (re-probe 13, case 11).

Measured on realdml (torch 2.4.1 + torch-directml 0.2.5, docs/realdml.md): Dynamo cannot make a fake tensor of a
torch-directml tensor (an OpaqueTensorImpl: "NotImplementedError: Cannot access storage of OpaqueTensorImpl"), so no
backend compiles anything for DirectML. A compiled module whose only device tensors are its inputs and parameters
graph-breaks at the module call and runs eagerly (a compiled Linear's forward prints its result); one that makes a
device tensor inside raises InternalTorchDynamoError with those words, whatever the backend (inductor, aot_eager,
eager), in inference and in training; with ``torch._dynamo.config.suppress_errors = True`` it runs eagerly. The
emulated device, whose tensors have storage, let Inductor try and fail on ``privateuseone`` instead (exit 3).
"""
import pytest
import torch

from dmlprof.backends.errors import explain_device_error
from dmlprof.testing import torch_version_tuple

pytestmark = pytest.mark.live  # a torch-version-sensitive path (Dynamo): its torch 2.4.1 lane runs it too


class _MakesADeviceTensor(torch.nn.Module):
    """A Linear whose output is scattered into a tensor made inside the compiled forward (realdml: Dynamo raises)."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)

    def forward(self, x):
        y = self.linear(x)
        return torch.zeros(5, 2, device=y.device).index_add(0, torch.tensor([0, 2, 4], device=y.device), y)


@pytest.fixture
def dynamo_skips_as_before():
    """Dynamo's list of files it leaves alone, restored after: dmlprof's own joins it once Dynamo meets a device
    tensor (for the rest of the process, a scan's own), and other tests compile dmlprof's code with Dynamo."""
    from torch._dynamo import trace_rules

    before = list(trace_rules.SKIP_DIRS)
    yield
    trace_rules.SKIP_DIRS[:] = before
    trace_rules._recompile_re()


def test_dynamo_cannot_fake_a_device_tensor_as_on_directml(emulated_dml_backend, dynamo_skips_as_before):
    from torch._subclasses.fake_tensor import FakeTensorMode

    on_device = torch.ones(3, 4, device=emulated_dml_backend.device())
    with pytest.raises(NotImplementedError, match="Cannot access storage of OpaqueTensorImpl"):
        FakeTensorMode().from_tensor(on_device)
    FakeTensorMode().from_tensor(torch.ones(3, 4))  # a CPU tensor still has its fake


def test_a_compiled_forward_runs_eagerly_and_one_making_a_device_tensor_fails_in_words_that_say_compile(
        emulated_dml_backend, dynamo_skips_as_before):
    import torch._dynamo

    device = emulated_dml_backend.device()
    torch._dynamo.reset()
    linear = torch.nn.Linear(4, 2).to(device)
    x = torch.randn(3, 4).to(device)
    failing = [_MakesADeviceTensor().to(device)]
    if torch_version_tuple() < (2, 5):  # torch-directml's torch: the Linear runs eagerly, as measured on realdml
        assert torch.equal(torch.compile(linear)(x).cpu(), linear(x).cpu())
    else:  # later Dynamo raises at a frame input it cannot fake, where 2.4.1's graph-breaks
        failing.append(linear)
    for module in failing:
        torch._dynamo.reset()
        with pytest.raises(Exception, match="Cannot access storage of OpaqueTensorImpl") as raised:
            torch.compile(module, backend="aot_eager")(x)
        assert type(raised.value).__name__ == "InternalTorchDynamoError"  # realdml's error, not Inductor's
        known = explain_device_error(raised.value)
        assert known is not None and "torch.compile" in known.explanation and "suppress_errors" in known.remedy
    torch._dynamo.reset()


_COMPILED_SCRIPT = """\
import torch
from torch import nn
torch.manual_seed(0)
device = torch.device("privateuseone", 0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).to(device)
{hook}
compiled = torch.compile(model{options})
x = torch.randn(4, 8).to(device)
out = compiled(x)
out.sum().backward()
print("ran", out.device.type, torch.equal(out.detach().cpu(), model(x).detach().cpu()))
"""


def _scan_compiled(tmp_path, backend, hook: str = "", options: str = ""):
    from dmlprof import runner

    script = tmp_path / "compiled.py"
    script.write_text(_COMPILED_SCRIPT.format(hook=hook, options=options), encoding="utf-8")
    return runner.scan(script, backend=backend, profiler=False)


@pytest.mark.parametrize("hook", [
    "",
    "nn.utils.weight_norm(model[0])",  # re-probe 22, case 2: torch's own pre-hook
    "model.register_forward_hook(torch.compiler.disable(lambda module, args, out: out * 2))",  # case 3
])
def test_a_compiled_sequential_of_torch_nn_layers_runs_eagerly_in_a_run_as_on_directml(
        tmp_path, emulated_dml_backend, dynamo_skips_as_before, capfd, hook):
    """Measured on realdml (re-probe 21, case 8): torch 2.4.1's Dynamo skips torch.nn's frames, so the compiled
    Sequential runs eagerly; torch 2.5+'s inlines them and failed on the emulated device's refused storage reads.
    Re-probe 22: so with torch's own hook, or a hook the model kept from Dynamo, which failed here before."""
    import torch._dynamo

    torch._dynamo.reset()
    _scan_compiled(tmp_path, emulated_dml_backend, hook=hook)
    assert "ran privateuseone True" in capfd.readouterr().out
    torch._dynamo.reset()


@pytest.mark.parametrize("hook, options, exit_code, raised", [
    ("model[0].register_forward_hook(lambda module, args, out: out * 2)", "", 4, "torch.compile cannot trace"),
    ("", ", fullgraph=True", 4, "no storage"),  # the prediction's words; torch 2.4.1's emulated Dynamo: dml_no_storage
])
def test_a_hooked_or_whole_graph_compiled_sequential_still_fails_in_a_run_as_on_directml(
        tmp_path, emulated_dml_backend, dynamo_skips_as_before, hook, options, exit_code, raised):
    """Measured on realdml: a forward hook of the model's is traced (InternalTorchDynamoError), and
    ``fullgraph=True`` makes the graph break at a torch.nn module's device argument an error (Unsupported: its
    words name the storage, so a known error says it)."""
    import torch._dynamo
    from dmlprof.runner import ScanStopped

    torch._dynamo.reset()
    with pytest.raises(ScanStopped) as stopped:
        _scan_compiled(tmp_path, emulated_dml_backend, hook, options)
    assert stopped.value.exit_code == exit_code and raised in str(stopped.value.cause), str(stopped.value.cause)
    torch._dynamo.reset()
