"""Tiny HF Llama (GQA, RoPE, sdpa) and GPT-2 (ARCH env), random weights, a padding mask; HF's code branches on device types."""
import os, torch
from torch import nn
BATCH_SIZE = 4
ARCH = os.environ.get("ARCH", "llama")
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        import transformers as T
        if ARCH == "llama":
            cfg = T.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32, attn_implementation="sdpa")
            self.m = T.LlamaForCausalLM(cfg)
        else:
            cfg = T.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=32, attn_implementation="sdpa")
            self.m = T.GPT2LMHeadModel(cfg)
    def forward(self, ids):
        mask = torch.ones_like(ids); mask[:, :2] = 0
        return self.m(input_ids=ids, attention_mask=mask, labels=ids).loss
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n):
    g = torch.Generator().manual_seed(1); return torch.randint(0, 64, (n, 12), generator=g), torch.zeros(n)
def loss_fn(out, y): return out
if __name__ == "__main__":
    import dualmain, sys; dualmain.main(sys.modules[__name__])
