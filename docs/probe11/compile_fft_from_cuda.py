# Probe 11, Medium: a compiled model with an FFT, in a CUDA script scanned with --from cuda.
# dmlprof: python -m dmlprof scan compile_fft_from_cuda.py --target dml --from cuda --run-to-end
#          (also --device emulated-dml --from cuda; any backend: eager, aot_eager, inductor)
#          -> exit 4 "the script asks for CUDA, which does not work on this machine (scan it with --from cuda ...)"
#             although --from cuda was given; the real finding (torch.fft aborts torch-directml) is not named.
# Without torch.compile, or with dev = torch_directml.device(), the same scan names the FFT (exit 4, aten::_fft_r2c).
import torch

torch.manual_seed(0)
device = "cuda"


class Spectral(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)

    def forward(self, x):
        return torch.fft.rfft(self.linear(x)).abs().sum()


model = Spectral().to(device)
compiled = torch.compile(model, backend="eager")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    optimizer.zero_grad()
    loss = compiled(torch.randn(4, 16).to(device))
    loss.backward()
    optimizer.step()
print("done", round(loss.item(), 4))
