"""KIND=coo: a GCN layer (sparse adjacency from x.device, torch.sparse.mm); KIND=jagged: a jagged nested tensor of
variable-length rows through a Linear; KIND=csr: to_sparse_csr of a mask."""
import os, torch
from torch import nn
BATCH_SIZE = 8
KIND = os.environ.get("KIND", "coo")
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.l = nn.Linear(16, 16); self.h = nn.Linear(16, 4)
    def forward(self, x):
        n = x.shape[0]
        if KIND == "coo":
            idx = torch.stack([torch.arange(n, device=x.device), (torch.arange(n, device=x.device) + 1) % n])
            adj = torch.sparse_coo_tensor(idx, torch.ones(n, device=x.device), (n, n))
            h = torch.sparse.mm(adj, self.l(x))
        elif KIND == "csr":
            adj = (torch.eye(n, device=x.device) + torch.diag(torch.ones(n - 1, device=x.device), 1)).to_sparse_csr()
            h = adj @ self.l(x)
        else:
            rows = [x[i, : 4 + i % 4 * 3] for i in range(n)]
            nt = torch.nested.as_nested_tensor([r.reshape(-1, 1).expand(-1, 16) for r in rows], layout=torch.jagged)
            h = torch.stack([t.mean(0) for t in self.l(nt).unbind()])
        return self.h(torch.relu(h))
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n):
    g = torch.Generator().manual_seed(1); return torch.randn(n, 16, generator=g), torch.randint(0, 4, (n,), generator=g)
if __name__ == "__main__":
    import dualmain, sys; dualmain.main(sys.modules[__name__])
