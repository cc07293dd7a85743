"""Re-probe 17: `check --target dml` passes an ALiBi-style position bias, float scores minus an int64 `arange` of lower
rank, which real torch-directml computes wrong.

    PYTHONPATH=. python -m dmlprof check docs/probe17/check_float_minus_int64_lower_rank.py --target dml --from cuda

"check ... passed", exit 0; plainly (CPU) "loss 0.04587 / 0.04855 / 0.05019". Under realdml (torch 2.4.1 +
torch-directml 0.2.5, `source ~/.cache/realdml/env.sh`; `-- dml` runs it on `torch_directml.device()`):
"loss 0.04153 / 0.03056 / 0.03152"; with `pos.float()` in place of `pos` (`-- dml float`) the CPU's numbers again.
Measured directly on realdml (a float32 or float16 (4, 12) with an int64 or int32 (12,), either order): add, sub,
rsub, mul, div, maximum 44 of 48 elements wrong (pow 47); lt 1, eq and fmod 0; the same with int64 (4, 1) or (1, 12)
(equal ranks) 0; int64 with int64 and any 0-dim integer operand right. The integer-broadcast classes (keyed on
differing ranks since re-probe 16) cover div, remainder, floor_divide, atan2, pow, and mul with int64 only: add, sub,
rsub, maximum, and mul by int32, are not flagged (`a * i32`, `torch.maximum(a, i64)`, `a + i64`, `i64 - a`: `check`
passes them too).
"""
import sys

import torch
import torch.nn as nn

if "dml" in sys.argv[1:]:
    import torch_directml
    dev = torch_directml.device()
else:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
q = nn.Linear(16, 16).to(dev)
opt = torch.optim.SGD(q.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(4, 12, 16).to(dev)
    scores = q(x) @ x.transpose(1, 2)                      # float32 (4, 12, 12)
    pos = torch.arange(12).to(dev)                         # int64 (12,)
    biased = scores - (pos.float() if "float" in sys.argv[1:] else pos)   # ranks differ: 3 and 1
    loss = biased.softmax(-1).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("loss", round(loss.item(), 5))
