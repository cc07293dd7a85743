"""Re-probe 15: a call the device refuses in a thread other than the main one, then os._exit(0), passes `check`.

A worker thread (a prefetcher, a metrics or audio-feature thread) computes torch.fft.rfft on the device and catches
the error; the process then ends with os._exit(0) (in that thread's handler, or in the main thread after join, as
scripts do to skip a hanging teardown). On real DirectML the process dies at the rfft (SIGABRT: complex tensors abort
torch-directml). Plainly on the CPU: "loss 0", "loss 1", exit 0.

    PYTHONPATH=. python -m dmlprof check docs/probe15/refusal_in_thread_then_os_exit.py --target dml --from cuda
    PYTHONPATH=. python -m dmlprof check docs/probe15/refusal_in_thread_then_os_exit.py --target dml --from cuda -- main
    DMLPROF_NO_SUPERVISOR=1 PYTHONPATH=. python -m dmlprof scan docs/probe15/refusal_in_thread_then_os_exit.py \
        --device emulated-dml --from cuda

each: "note: a thread of ... ended its process with os._exit(0)", "check ... passed", exit 0 (unsupervised: exit 0).
The same refusal in the main thread followed by os._exit(0) gives exit 4 leading with the refusal (the re-probe 14
fix), and the thread's refusal with a normal end gives exit 4 too: only the journal misses a refusal raised in another
thread (the emulated device notes it, and the note is read only when the run ends through Python).
"""
import os
import sys
import threading

import torch
import torch.nn as nn

exit_in_main = sys.argv[1:] == ["main"]
dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
m = nn.Linear(8, 2).to(dev)


def spectral(x):
    try:
        return torch.fft.rfft(x).abs()
    except Exception as e:
        print("caught:", type(e).__name__, flush=True)
        if not exit_in_main:
            os._exit(0)


for step in range(2):
    x = torch.randn(4, 8, device=dev)
    print("loss", step, round(m(x).pow(2).mean().item(), 4), flush=True)
worker = threading.Thread(target=spectral, args=(x,))
worker.start()
worker.join()
os._exit(0)
