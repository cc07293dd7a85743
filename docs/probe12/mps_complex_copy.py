"""Re-probe 12: a complex64 tensor moved to the device (`.to(x.device)`), --target mps.
`dmlprof scan this.py --target mps`: exit 4, "Fails on DirectML: aten::_to_copy (complex64) ...: aten::_copy_from on
complex64 is not supported on the MPS device (... does not list it among the complex-capable ops)". The copy is data
movement, which docs/targets.md says is exempt (dmlprof/targets/mps.py's _STRUCTURAL has _to_copy and copy_ but
not _copy_from, the device copy they reach); MPS on macOS 14+ holds complex64 tensors. The headline also names
DirectML for an MPS prediction. --target xpu: runs."""
import torch, torch.nn as nn
BATCH_SIZE = 4
class SpecNet(nn.Module):
    def __init__(s): super().__init__(); s.fc = nn.Linear(9 * 2, 3)
    def forward(s, x):
        z = torch.fft.rfft(x)                                    # complex64
        z = z * torch.polar(torch.ones(9), torch.linspace(0, 1, 9)).to(x.device)   # polar -> complex
        z = torch.view_as_real(z.conj_physical()).flatten(1)
        return s.fc(z)
def build_model():
    torch.manual_seed(0); return SpecNet()
def make_batch(n):
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 16, generator=g), torch.randint(0, 3, (n,), generator=g)
