"""Re-probe 12: scatter_add with repeated target indices (message passing, histograms), a model file.
Real torch-directml 0.2.5 (realdml) runs scatter_add on the device but keeps one write per target: the model's
output differs from the CPU's by up to 0.46 (a bare scatter_add of 4x8 with repeated indices: max error 4.15;
index_add and index_put(accumulate=True) of the same are exact). `dmlprof scan this.py --target dml` lists
scatter_add "device" with no known-wrong flag (known_wrong_results: []), `check --target dml` passes;
`--target dml --confirm` reads "contradicted scatter_add ... real device, wrong (max error 1.43)"."""
import torch, torch.nn as nn
BATCH_SIZE = 8
class GNNish(nn.Module):
    """Message passing: sum neighbour features into each node (what torch_geometric's scatter does)."""
    def __init__(s): super().__init__(); s.lin = nn.Linear(4, 4); s.out = nn.Linear(4, 3)
    def forward(s, x, edges):
        msg = s.lin(x)[edges[0]]                                   # (E, 4)
        agg = torch.zeros_like(x).scatter_add(0, edges[1].unsqueeze(1).expand(-1, 4), msg)   # repeated targets
        return s.out(agg)
def build_model():
    torch.manual_seed(0); return GNNish()
def make_batch(n):
    g = torch.Generator().manual_seed(1)
    return (torch.randn(n, 4, generator=g), torch.randint(0, n, (2, n), generator=g)), torch.randint(0, 3, (n,), generator=g)
