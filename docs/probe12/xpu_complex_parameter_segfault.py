"""Re-probe 12: a complex64 nn.Parameter (Fourier neural operators' spectral weights), `--target xpu`.
plain python trains it. `dmlprof scan this.py --target xpu`: exit 7, "the scanned process died of SIGSEGV in
aten::clone (complex64 [4, 3]), before the recording began [nothing was recorded]": the prediction's own stand-in
device crashed (XPU holds complex64; no real device ran), read as the model's crash. The same with SGD or Adam.
Without the complex parameter (fft, torch.complex, .to(complex64) of activations) --target xpu runs."""
import torch, torch.nn as nn
BATCH_SIZE = 4
class Net(nn.Module):
    def __init__(s):
        super().__init__(); s.fc = nn.Linear(6, 3); s.spec = nn.Parameter(torch.randn(3, dtype=torch.complex64))
    def forward(s, x):
        y = s.fc(x)
        return y + (y.to(torch.complex64) * s.spec).real
def build_model():
    torch.manual_seed(0); return Net()
def make_batch(n):
    return torch.randn(n, 6), torch.randint(0, 3, (n,))
