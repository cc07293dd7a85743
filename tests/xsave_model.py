import io, torch, torch.nn as nn
class M(nn.Module):
    def __init__(self):
        super().__init__(); self.fc = nn.Linear(4, 2)
    def forward(self, x):
        buf = io.BytesIO(); torch.save(self.fc.state_dict(), buf); buf.seek(0)
        sd = torch.load(buf, map_location=x.device)
        print("loaded", sd["weight"].device, flush=True)
        return self.fc(x)
def build_model(): return M()
def make_batch(bs=4): return torch.randn(bs, 4), torch.randint(0, 2, (bs,))
