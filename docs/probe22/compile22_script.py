"""After the probe (worktree compile22): 22's Highs 2, 3, 6 as a CUDA script (`check --target dml --from cuda`, the
emulated device's path; `python compile22_script.py dml` on realdml). KIND: weight_norm, prune, hook_disabled,
fwd_disabled, nested_disabled, hook (control: a hook of the model's), opt_step, opt_fn, seq (control)."""
import os, sys, torch, torch.nn.utils.prune
from torch import nn
KIND = os.environ.get("KIND", "seq")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
else:
    dev = torch.device("cuda")
def scale_output(module, inputs, output): return output * 0.5
class OwnDisabled(nn.Module):
    def __init__(self): super().__init__(); self.lin = nn.Linear(8, 8)
    @torch.compiler.disable
    def forward(self, h): return torch.relu(self.lin(h))
torch.manual_seed(0)
lin = nn.Linear(8, 8)
if KIND == "weight_norm": lin = nn.utils.weight_norm(lin)
if KIND == "prune": nn.utils.prune.l1_unstructured(lin, "weight", amount=0.3)
body = nn.Sequential(lin, nn.ReLU())
if KIND == "hook_disabled": body.register_forward_hook(torch.compiler.disable(scale_output))
if KIND == "hook": body.register_forward_hook(scale_output)
if KIND == "fwd_disabled": body = OwnDisabled()
if KIND == "nested_disabled": body = nn.Sequential(OwnDisabled(), nn.ReLU())
model = nn.Sequential(body.to(dev) if KIND.startswith("opt") else torch.compile(body.to(dev), backend="aot_eager"),
                      nn.Linear(8, 3).to(dev))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
if KIND == "opt_step": opt.step = torch.compile(opt.step, backend="aot_eager")
if KIND == "opt_fn":
    step = opt.step
    @torch.compile(backend="aot_eager")
    def compiled_step(): step()
    opt.step = compiled_step
torch.manual_seed(1)
x, y = torch.randn(4, 8).to(dev), torch.randint(0, 3, (4,)).to(dev)
for i in range(3):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    print(i, f"{loss.item():.6f}")
