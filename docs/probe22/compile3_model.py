"""torch.compile, round 3 (KIND=...): what hooks a compiled torch.nn-only module carries, and Dynamo's switches.
hook_after (forward hook registered after compiling), hook_removed (registered, then removed), weight_norm
(torch.nn.utils.weight_norm: torch's own forward pre-hook), spectral_norm, prune (l1_unstructured: torch's pre-hook),
param_orth (parametrizations.orthogonal), param_own (a parametrization class of the model's), hook_disabled (the
model's hook wrapped in torch.compiler.disable), cfg_after (torch._dynamo.config.disable = True set after compiling),
suppress (suppress_errors with an own-class module), eager_backend (backend="eager", own class), opt_step (the
optimizer's step compiled, torch.nn-only model), opt_fn (@torch.compile def step(): opt.step()), om_hook (forward hook
on the OptimizedModule), fwd_disabled (an own module whose forward is @torch.compiler.disable'd), param_wn
(parametrizations.weight_norm), seq_fwd (torch.compile(seq.forward)), seq (control). `python compile3_model.py dml` trains on realdml."""
import os, sys, torch, torch.nn.utils.prune
from torch import nn
BATCH_SIZE = 4
KIND = os.environ.get("KIND", "seq")
def scale_output(module, inputs, output): return output * 0.5
class Own(nn.Module):
    def __init__(self): super().__init__(); self.lin = nn.Linear(8, 8)
    def forward(self, h): return torch.relu(self.lin(h))
class OwnDisabled(Own):  # the whole forward kept from Dynamo (a debugging switch)
    @torch.compiler.disable
    def forward(self, h): return torch.relu(self.lin(h))
class Sym(nn.Module):  # a parametrization of the model's own
    def forward(self, w): return (w + w.t()) / 2
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.head = nn.Linear(8, 3)
        lin = nn.Linear(8, 8)
        if KIND == "weight_norm": lin = nn.utils.weight_norm(lin)
        if KIND == "spectral_norm": lin = nn.utils.spectral_norm(lin)
        if KIND == "prune": nn.utils.prune.l1_unstructured(lin, "weight", amount=0.3)
        if KIND == "param_orth": nn.utils.parametrizations.orthogonal(lin)
        if KIND == "param_own": nn.utils.parametrize.register_parametrization(lin, "weight", Sym())
        if KIND == "param_wn": nn.utils.parametrizations.weight_norm(lin)
        body = Own() if KIND in ("suppress", "eager_backend") else nn.Sequential(lin, nn.ReLU())
        if KIND == "fwd_disabled": body = OwnDisabled()
        if KIND == "hook_removed": body.register_forward_hook(scale_output).remove()
        if KIND == "hook_disabled": body.register_forward_hook(torch.compiler.disable(scale_output))
        if KIND == "suppress":
            import torch._dynamo as dynamo; dynamo.config.suppress_errors = True
        backend = "eager" if KIND == "eager_backend" else "aot_eager"
        self.body = body if KIND.startswith("opt") else torch.compile(body, backend=backend)
        if KIND == "seq_fwd": self.body = body; body.forward = torch.compile(body.forward, backend=backend)
        if KIND == "hook_after": body.register_forward_hook(scale_output)
        if KIND == "om_hook": self.body.register_forward_hook(scale_output)
        if KIND == "cfg_after":
            import torch._dynamo as dynamo; dynamo.config.disable = True
    def forward(self, x): return self.head(self.body(x))
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): torch.manual_seed(1); return torch.randn(n, 8), torch.randint(0, 3, (n,))
def make_optimizer(params):
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    if KIND == "opt_step": opt.step = torch.compile(opt.step, backend="aot_eager")
    if KIND == "opt_fn":
        step = opt.step
        @torch.compile(backend="aot_eager")
        def compiled_step(): step()
        opt.step = compiled_step
    return opt
if __name__ == "__main__":
    import dualmain; dualmain.main(sys.modules[__name__])
