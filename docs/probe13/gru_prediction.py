"""Re-probe 13: a GRU model predicted for MPS and XPU (docs/probe13.md cases 24 and 25).

`python -m dmlprof check docs/probe13/gru_prediction.py --target mps` fails (exit 4): "The operator
'aten::_thnn_fused_gru_cell' is not implemented for the MPS device". On a real MPS device nn.GRU never reaches that op: ATen's GRUCell takes the fused
cell only for CUDA/XPU/PrivateUse1 inputs (aten/src/ATen/native/RNN.cpp) and runs linear/sigmoid/tanh elsewhere,
MPS included. dmlprof/targets/mps.py maps the LSTM's fused cell to _lstm_mps but not the GRU's.

`python -m dmlprof scan docs/probe13/gru_prediction.py --target xpu` (and `check --target xpu`) ends with exit 3,
"step 1 raised NotImplementedError: aten::_thnn_fused_gru_cell: attempted to run this operator with Meta tensors,
but there was no fake impl or Meta kernel registered": the prediction's own stand-in failing, read as the model's.
Side by side (`--target dml,xpu,mps`) the XPU line says "no call fails". torch-xpu-ops registers
_thnn_fused_gru_cell for XPU (a real XPU runs it).
"""
import torch
import torch.nn as nn

BATCH_SIZE = 4


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 16)
        self.gru = nn.GRU(16, 16, batch_first=True)
        self.head = nn.Linear(16, 5)

    def forward(self, tokens):
        out, _ = self.gru(self.emb(tokens))
        return self.head(out[:, -1])


def build_model():
    return Tagger()


def make_batch(batch_size):
    return torch.randint(0, 100, (batch_size, 9)), torch.randint(0, 5, (batch_size,))


def loss_fn(output, target):
    return nn.functional.cross_entropy(output, target)
