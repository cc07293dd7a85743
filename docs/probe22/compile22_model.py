"""After the probe (worktree compile22): edge cases of 22's Highs 2, 3, 6 (KIND=...). hook_partial (the model's hook as
functools.partial), hook_obj (a callable object of the model's class), wn_and_hook (weight_norm plus a hook of the
model's), nested_disabled (nn.Sequential holding an own module whose forward is @torch.compiler.disable'd),
disabled_inner_hook (that module, a hook of the model's on its inner Linear), dynamo_disable_hook (hook wrapped in
torch._dynamo.disable), opt_global (@torch.compile def f(): type(OPT).step(OPT), OPT a global), opt_arg (@torch.compile def
f(o): type(o).step(o), the optimizer its argument), opt_lambda (torch.compile(lambda: opt.step())).
`python compile22_model.py dml` trains on realdml."""
import functools, os, sys, torch
import torch._dynamo
from torch import nn
BATCH_SIZE = 4
KIND = os.environ.get("KIND", "hook_partial")
def scale_output(module, inputs, output, factor=0.5): return output * factor
class Scaler:
    def __call__(self, module, inputs, output): return output * 0.5
class OwnDisabled(nn.Module):
    def __init__(self): super().__init__(); self.lin = nn.Linear(8, 8)
    @torch.compiler.disable
    def forward(self, h): return torch.relu(self.lin(h))
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.head = nn.Linear(8, 3)
        lin = nn.Linear(8, 8)
        if KIND == "wn_and_hook": lin = nn.utils.weight_norm(lin); lin.register_forward_hook(scale_output)
        body = nn.Sequential(lin, nn.ReLU())
        if KIND == "hook_partial": body.register_forward_hook(functools.partial(scale_output, factor=0.25))
        if KIND == "hook_obj": body.register_forward_hook(Scaler())
        if KIND == "dynamo_disable_hook": body.register_forward_hook(torch._dynamo.disable(scale_output))
        if KIND in ("nested_disabled", "disabled_inner_hook"): body = nn.Sequential(OwnDisabled(), nn.Linear(8, 8))
        if KIND == "disabled_inner_hook": body[0].lin.register_forward_hook(scale_output)
        self.body = body if KIND.startswith("opt") else torch.compile(body, backend="aot_eager")
    def forward(self, x): return self.head(self.body(x))
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): torch.manual_seed(1); return torch.randn(n, 8), torch.randint(0, 3, (n,))
OPT = None
@torch.compile(backend="aot_eager")
def global_step(): type(OPT).step(OPT)  # the class's step: the instance's calls this
@torch.compile(backend="aot_eager")
def arg_step(o): type(o).step(o)  # the class's step: the instance's is this call
def make_optimizer(params):
    global OPT
    opt = OPT = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    if KIND == "opt_global": opt.step = lambda: global_step()
    if KIND == "opt_arg": opt.step = lambda: arg_step(opt)
    if KIND == "opt_lambda":
        step = opt.step; opt.step = torch.compile(lambda: step(), backend="aot_eager")
    return opt
if __name__ == "__main__":
    import dualmain; dualmain.main(sys.modules[__name__])
