"""Model code that reads its tensors' storage: a tied-weights check by data_ptr (as HF's tie_weights/safetensors code
does), and untyped_storage().nbytes() for a memory log."""
import sys, torch
from torch import nn
BATCH_SIZE = 4
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.emb = nn.Embedding(10, 8); self.out = nn.Linear(8, 10, bias=False); self.out.weight = self.emb.weight
    def forward(self, x):
        tied = self.out.weight.data_ptr() == self.emb.weight.data_ptr()
        nbytes = self.emb.weight.untyped_storage().nbytes()
        print("tied", tied, "nbytes", nbytes, file=sys.stderr)
        return self.out(self.emb(x).mean(1))
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): return torch.randint(0, 10, (n, 5)), torch.randint(0, 10, (n,))
if __name__ == "__main__":
    import dualmain, sys; dualmain.main(sys.modules[__name__])
