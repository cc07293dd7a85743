# The inner script of nested_scan_loses_crash.py: three steps, then a native crash (a ctypes NULL read).
import ctypes
import torch

model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    optimizer.zero_grad()
    model(torch.randn(8, 4)).sum().backward()
    optimizer.step()
ctypes.string_at(0)
