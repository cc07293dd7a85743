"""``torch.Generator(device=<the device>)`` on dmlprof's own devices (re-probe 22, case 19).

torch-directml registers a generator for its device; measured on realdml (torch 2.4.1, torch-directml 0.2.5): it is
a CPU generator (``g.device`` is ``cpu``) and draws on the device with it equal the CPU's for the same seed. The
prediction's stand-in and the emulated device registered none, and torch refused the call ("register
``PrivateUse1HooksInterface`` ... ``getNewGenerator``")."""
import pytest
import torch

pytestmark = pytest.mark.own_process  # predicts XPU and MPS too: not beside the emulated device

DRAW_FROM_A_DEVICE_GENERATOR = ("g = torch.Generator(device=x.device).manual_seed(1)\n"
                                "return self.fc(x + 0.1 * torch.randn(x.shape, device=x.device, generator=g))")


@pytest.mark.parametrize("target", ["dml", "xpu", "mps"])
def test_a_generator_made_on_the_device_is_predicted_to_run(linear_model_file, target):
    """Real DirectML, XPU and MPS make a generator for their device; the stand-in raised torch's internal message
    (DirectML) or "Cannot get XPU generator without ATen_xpu library" (XPU, MPS)."""
    from dmlprof.predict import predict_scan

    model = linear_model_file(DRAW_FROM_A_DEVICE_GENERATOR)
    assert predict_scan(model, target=target).meta.device_failure is None


@pytest.mark.parametrize("target", ["xpu", "mps"])
def test_a_cpu_generator_of_the_same_state_as_none_made_on_the_device_is_still_foreign(linear_model_file, target):
    """A generator made for the target reads as the target's to its random kernels; a CPU one still does not."""
    from dmlprof.predict import predict_scan
    from dmlprof.runner import ScanStopped

    model = linear_model_file("g = torch.Generator(device=x.device).manual_seed(1)\n"
                              "torch.randn(2, device=x.device, generator=g)\n"
                              "return self.fc(x) + torch.randn(x.shape, device=x.device, generator=self.g)",
                              init="self.fc = nn.Linear(4, 4)\nself.g = torch.Generator().manual_seed(2)")
    with pytest.raises(ScanStopped) as stopped:
        predict_scan(model, target=target)
    assert f"Expected a '{target}' device type for generator but found 'cpu'" in str(stopped.value.cause)


def test_outside_a_run_torch_generator_is_torchs_again():
    from dmlprof.directml.generators import device_generators_made

    with device_generators_made("privateuseone", "xpu"):
        made = torch.Generator(device="xpu")
        assert isinstance(made, torch.Generator) and made.device == torch.device("xpu")
        assert torch.Generator(device="cpu").device == torch.device("cpu")  # other devices' reach torch
    assert torch.Generator is torch._C.Generator


_GENERATOR_AS_PLAINLY = """
class Seeded(torch.Generator):
    def __init__(self, device="cpu"):
        self.tag = "mine"

    def reseed(self):
        return self.manual_seed(5)

g = Seeded(device=x.device).reseed()
copied = pickle.loads(pickle.dumps(g))
print("generator", type(g).__name__, g.tag, g.initial_seed(), type(torch.Generator(device=x.device)) is torch.Generator,
      type(copied) is torch.Generator, torch.equal(copied.get_state(), g.get_state()),
      torch.equal(copy.deepcopy(g).get_state(), g.get_state()), flush=True)
return self.fc(x + 0.1 * torch.randn(x.shape, device=x.device, generator=g))
"""


@pytest.mark.parametrize("target", ["dml", "xpu"])
def test_a_generator_made_in_a_run_is_what_torch_makes_plainly(linear_model_file, capsys, target):
    """Re-probe 23, 5-7: a subclass of ``torch.Generator`` made on the device lost its methods and ``__init__`` (the
    stand-in class returned torch's own), pickling or deep-copying one named a local class, and ``type(g) is
    torch.Generator`` was False; on realdml (and plainly) each is as in this test."""
    from dmlprof.predict import predict_scan

    model = linear_model_file(_GENERATOR_AS_PLAINLY, extra="import copy\nimport pickle\n")
    assert predict_scan(model, target=target).meta.device_failure is None
    seen = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("generator")]
    assert seen and seen[0][1:] == ["Seeded", "mine", "5", "True", "True", "True", "True"]
