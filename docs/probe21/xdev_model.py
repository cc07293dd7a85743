"""Device idioms under --target xpu/mps (KIND=...): tie (an HF GPT-2's tied lm_head after the move: printed in the
forward), default_dev (set_default_device(x.device), get_default_device(), a factory, reset), default_str
(set_default_device(x.device.type) string), default_ctx (`with torch.device(x.device.type):` a lazily built layer),
getdef (set_default_device then Module built inside and its device). PROBE lines on stderr."""
import os, sys, torch
from torch import nn
BATCH_SIZE = 2
KIND = os.environ.get("KIND", "tie")
def probe(*a): print("PROBE", *a, file=sys.stderr, flush=True)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel
        self.lm = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2))
        self.extra = None
    def forward(self, ids):
        if KIND == "tie": probe("tied", self.lm.lm_head.weight is self.lm.transformer.wte.weight, self.lm.lm_head.weight.device)
        h = self.lm.transformer.wte(ids)
        if KIND == "default_dev":
            torch.set_default_device(ids.device)
            try: z = torch.zeros(2); probe("default", torch.get_default_device(), z.device)
            finally: torch.set_default_device(None)
            h = h + z.sum()
        if KIND == "default_str":
            torch.set_default_device(ids.device.type)
            try: z = torch.ones(16); probe("default", torch.get_default_device(), z.device)
            finally: torch.set_default_device(None)
            h = h * z
        if KIND == "default_ctx":
            with torch.device(ids.device.type):
                if self.extra is None: self.extra = nn.Linear(16, 16)
            probe("extra", self.extra.weight.device); h = self.extra(h)
        return self.lm(inputs_embeds=h).logits
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): torch.manual_seed(1); return torch.randint(0, 64, (n, 8)), torch.randint(0, 64, (n, 8))
def loss_fn(out, y): return nn.functional.cross_entropy(out.reshape(-1, 64), y.reshape(-1))
if __name__ == "__main__":
    import dualmain; dualmain.main(sys.modules[__name__])
