# Probe 11, High (same cause as os_exit_runs_finally.py): os._exit from a __del__ (or any callback whose errors
# Python ignores) does not end the process under dmlprof: the HardExit is "ignored" with a traceback from
# dmlprof/runner/user_code.py, and the script runs on.
# plain:   python os_exit_in_del.py            -> prints nothing, exit 0
# dmlprof: python -m dmlprof scan os_exit_in_del.py --run-to-end
#          -> "Exception ignored in: <function Guard.__del__ ...> ... HardExit: os._exit(0)" on stderr, then
#             "AFTER os._exit in __del__" on stdout
import os
import torch


class Guard:
    def __del__(self):
        os._exit(0)  # a watchdog object: when released, end the process


model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    optimizer.zero_grad()
    model(torch.randn(8, 4)).sum().backward()
    optimizer.step()
guard = Guard()
del guard
print("AFTER os._exit in __del__")
