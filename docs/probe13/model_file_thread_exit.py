"""Re-probe 13 (docs/probe13.md case 22): a model file whose build_model starts a watchdog thread that ends the
process with os._exit(0) while the steps run.

docs/exit_codes.md: a contract function calling os._exit() at all is exit 3 ("exit 0 would look like success to CI").
`python -m dmlprof scan docs/probe13/model_file_thread_exit.py --steps 20` exits 0, "1 warm-up + 0 measured steps",
"PARTIAL SESSION ... ended abruptly"; `sweep --batch-sizes 2,4 --steps 20` exits 3 ("the child process exited with
status 0 without a result").
"""
import os
import threading
import time

import torch

BATCH_SIZE = 4


def build_model():
    threading.Thread(target=lambda: (time.sleep(3), os._exit(0)), daemon=True).start()
    return torch.nn.Linear(4, 2)


def make_batch(batch_size):
    return torch.randn(batch_size, 4), torch.randn(batch_size, 2)


def loss_fn(output, target):
    time.sleep(0.25)
    return (output - target).pow(2).mean()
