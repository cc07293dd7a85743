# Probe 11, Medium: Dynamo traces dmlprof's module hooks (dmlprof/record/attribution.py _enter/_leave), whose
# guards on len(self.stack) recompile per nesting depth: stderr gets torch._dynamo's "hit config.recompile_limit (8)
# function: '_enter' (.../dmlprof/record/attribution.py)" block, and the report lists warnings the script never
# raised plainly ("The .grad attribute of a Tensor that is not a leaf" x92, "torch.jit.script_method is deprecated"
# x14). Losses identical. torch 2.13.
# plain:   python compile_traces_dmlprof_hooks.py                         -> losses, empty stderr
# dmlprof: python -m dmlprof scan compile_traces_dmlprof_hooks.py --run-to-end
import torch

torch.manual_seed(0)


class Block(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.linear(self.inner(x) if self.inner is not None else x)


model = None
for _ in range(12):  # 12 modules deep
    model = Block(model)
compiled = torch.compile(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
losses = []
for _ in range(6):
    optimizer.zero_grad()
    loss = compiled(torch.randn(4, 8)).pow(2).mean()
    loss.backward()
    optimizer.step()
    losses.append(round(loss.item(), 6))
print("losses", losses)
