# Probe 11, High: a script that turns UserWarnings into errors (as test suites do) and compiles a model.
# plain:   python compile_under_error_filter.py          -> prints "ok", exit 0
# dmlprof: python -m dmlprof scan compile_under_error_filter.py --run-to-end
#          -> exit 3, "raised UserWarning: Using `torch.compile(module)` when there are global hooks on modules"
#          (the global module hooks are dmlprof's, not the script's)
import warnings
import torch

warnings.filterwarnings("error", category=UserWarning)
model = torch.nn.Linear(4, 2)
compiled = torch.compile(model, backend="eager")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    optimizer.zero_grad()
    compiled(torch.randn(8, 4)).sum().backward()
    optimizer.step()
print("ok")
