"""Re-probe 12: an in-place write into a slice of an activation (`h[:, 4:] = 0`: masking padding features,
writing a cache), a model file. On real torch-directml 0.2.5 (realdml) every view reports storage_offset() 0
(`torch.arange(16.).view(2, 8).to(dml)[:, 4:].storage_offset()` is 0; CPU 4), so autograd's CopySlices puts the
gradient of the written slice at the wrong place: for `z = x * 1; z[1] = 0; z.sum().backward()` x.grad is
[0, 1] on DirectML, [1, 0] on the CPU; `z[:, 4:] *= 3` gives [3,3,3,3,1,1,1,1] instead of [1,1,1,1,3,3,3,3].
The forward is right; this model's fc.weight gradient differs from the CPU's by 0.28 (hidden[:, 0] = 0, offset 0, is right).
`dmlprof scan this.py --target dml`: every call on the device, no flag; `check --target dml` passes;
`--target dml --confirm`: "all N call signatures ... confirmed" (each call is replayed with the CPU's strides and
offsets, and views are not compared); `--device emulated-dml --verify` computes with the CPU's kernels.
Check on realdml: python docs/probe12/slice_assignment_wrong_gradient.py (prints both gradients)."""
import torch
from torch import nn

BATCH_SIZE = 4


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.out = nn.Linear(8, 3)

    def forward(self, x):
        hidden = self.fc(x).clone()
        hidden[:, 4:] = 0.0                # in-place write into a slice of an activation
        return self.out(hidden)


def build_model():
    torch.manual_seed(0)
    return Net()


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    return torch.randn(batch_size, 8, generator=generator), torch.randint(0, 3, (batch_size,), generator=generator)


if __name__ == "__main__":
    import copy

    import torch_directml

    device = torch_directml.device()
    model = build_model()
    inputs, target = make_batch(BATCH_SIZE)
    on_device = copy.deepcopy(model).to(device)
    nn.functional.cross_entropy(model(inputs), target).backward()
    nn.functional.cross_entropy(on_device(inputs.to(device)), target.to(device)).backward()
    print("fc.weight.grad max difference, DirectML vs CPU:",
          (model.fc.weight.grad - on_device.fc.weight.grad.cpu()).abs().max().item())
