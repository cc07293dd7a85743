# Probe 11, Medium: an exit handler that raises KeyboardInterrupt (nobody pressed Ctrl-C) after a finished run.
# plain:   python atexit_keyboard_interrupt.py     -> "main done", "Exception ignored in atexit callback ...", exit 0
# dmlprof: python -m dmlprof scan atexit_keyboard_interrupt.py --run-to-end
#          -> "dmlprof: error: interrupted [partial session saved to ...]", exit 130 (the run had finished)
import atexit
import torch


def handler():
    raise KeyboardInterrupt


atexit.register(handler)
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    optimizer.zero_grad()
    model(torch.randn(8, 4)).sum().backward()
    optimizer.step()
print("main done")
