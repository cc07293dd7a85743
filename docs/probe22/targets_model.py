"""--target xpu/mps/dml with realistic forwards (KIND=...): amp (torch.autocast(device_type=x.device.type,
dtype=float16) around the body, as a device-agnostic AMP script does; prints the dtype the linear gave), amp_bf16
(the same, bfloat16), gpt2 (tiny HF GPT-2, tied head, labels), llama (tiny HF Llama). `python targets_model.py dml`
trains on realdml."""
import os, sys, torch
from torch import nn
BATCH_SIZE = 4
KIND = os.environ.get("KIND", "amp")
class Amp(nn.Module):
    def __init__(self): super().__init__(); self.body = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 3))
    def forward(self, x):
        dt = torch.bfloat16 if KIND == "amp_bf16" else torch.float16
        with torch.autocast(device_type=x.device.type, dtype=dt):
            h = self.body(x)
        print("PROBE autocast", x.device.type, "out dtype", h.dtype, flush=True)
        return h.float()
class HF(nn.Module):
    def __init__(self):
        super().__init__()
        if KIND == "gpt2":
            from transformers import GPT2Config, GPT2LMHeadModel
            self.m = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2))
        else:
            from transformers import LlamaConfig, LlamaForCausalLM
            self.m = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                                  num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16))
    def forward(self, ids): return self.m(input_ids=ids, labels=ids).loss
def build_model(): torch.manual_seed(0); return Amp() if KIND.startswith("amp") else HF()
def make_batch(n):
    torch.manual_seed(1)
    if KIND.startswith("amp"): return torch.randn(n, 8), torch.randint(0, 3, (n,))
    return torch.randint(0, 64, (n, 8)), torch.zeros(())
def loss_fn(out, y): return out if out.dim() == 0 else nn.functional.cross_entropy(out, y)
if __name__ == "__main__":
    import dualmain; dualmain.main(sys.modules[__name__])
