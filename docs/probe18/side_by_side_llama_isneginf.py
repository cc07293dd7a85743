"""tiny Llama (HF transformers, config only), LM loss as a classifier over the last token."""
import os, torch
from torch import nn
BATCH_SIZE = 2
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        from transformers import LlamaConfig, LlamaForCausalLM
        self.m = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32, attn_implementation=os.environ.get("ATTN", "sdpa")))
    def forward(self, ids):
        return self.m(input_ids=ids).logits[:, -1]
def build_model():
    torch.manual_seed(0); return Net()
def make_batch(batch_size):
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 64, (batch_size, 12), generator=g), torch.randint(0, 64, (batch_size,), generator=g)
if __name__ == "__main__":
    import dualmain, sys; dualmain.main(sys.modules[__name__])
