"""Re-probe 14, case 4: a packed sequence makes every call of an XPU/MPS prediction a "guess".

    PYTHONPATH=. python -m dmlprof scan docs/probe14/packed_sequence_all_guess.py --target xpu   (or --target mps)

exit 0, and (xpu; mps: 48 of 48) "GUESS 54 of 54 calls came after a value the prediction made up (aten::copy_: made by torch.empty and
not written (its values are arbitrary)); their branches and shapes may differ on the device", every hotspot marked
[guess]. The lengths are real (the GRU/LSTM of the same model, case 2, runs exactly max(lengths) = 7 cells); the
made-up value seems to be an output that pack_padded_sequence / pad_packed_sequence's CPU kernels fill through a raw
pointer (no op the tracker sees writes it). Every packed-sequence RNN model gets this caveat on all its calls.
"""
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

BATCH_SIZE = 4


class PackPad(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(6, 2)

    def forward(self, x, lengths):
        p = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        o, _ = pad_packed_sequence(p, batch_first=True)
        return self.l(o.sum(1))


def build_model():
    torch.manual_seed(0)
    return PackPad()


def make_batch(batch_size):
    return (torch.randn(batch_size, 7, 6), torch.tensor([7, 3, 5, 1])), torch.randint(0, 2, (batch_size,))
