"""Re-probe 15: a call the device refuses in a forked DataLoader worker, then os._exit(0), passes `check`.

    PYTHONPATH=. python -m dmlprof check docs/probe15/refusal_in_worker_then_os_exit.py --target dml --from cuda \
        --run-to-end -- exit

"check ... passed", exit 0. Without `-- exit` (a normal end) exit 4, "the emulated device raised its error in its
place in forked process N": the worker's refusal reaches the run only through the device's note, read when the run
ends through Python; the same gap as refusal_in_thread_then_os_exit.py. On real DirectML the worker dies at the rfft
(SIGABRT) and the DataLoader raises in the main process.
"""
import sys, os
import torch, torch.nn as nn
from torch.utils.data import DataLoader, Dataset
dev = "cuda" if torch.cuda.is_available() else "cpu"
class Spectral(Dataset):
    def __len__(self): return 8
    def __getitem__(self, i):
        x = torch.randn(8)
        try:
            return torch.fft.rfft(x.to(dev)).abs().repeat(2)[:8].cpu()
        except RuntimeError:
            return x
m = nn.Linear(8, 2).to(dev)
for step, b in enumerate(DataLoader(Spectral(), batch_size=4, num_workers=1, multiprocessing_context="fork")):
    print("loss", step, round(m(b.to(dev)).pow(2).mean().item(), 4), flush=True)
if "exit" in sys.argv:
    os._exit(0)
