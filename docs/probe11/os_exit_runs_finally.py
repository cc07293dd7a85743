# Probe 11, High: os._exit in the main thread raises an exception under dmlprof, so the script's `finally`
# blocks and `except BaseException` handlers run, and a handler that swallows it lets the script go on.
# plain:   python os_exit_runs_finally.py            -> prints "ending" only, exit 0
# dmlprof: python -m dmlprof scan os_exit_runs_finally.py --run-to-end
#          -> prints "ending", "FINALLY RAN", "CAUGHT HardExit", "CONTINUED AFTER os._exit", exit 0
import os
import torch

model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    optimizer.zero_grad()
    model(torch.randn(8, 4)).sum().backward()
    optimizer.step()
try:
    try:
        print("ending", flush=True)
        os._exit(0)
    finally:
        print("FINALLY RAN", flush=True)
except BaseException as error:  # a catch-all of the kind a training loop's crash logger has
    print("CAUGHT", type(error).__name__, flush=True)
print("CONTINUED AFTER os._exit", flush=True)
