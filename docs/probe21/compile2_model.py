"""torch.compile idioms, 2 (KIND=...): hook (a compiled nn.Sequential with a forward hook of the model's own),
cfg_disable (torch._dynamo.config.disable = True: Dynamo off, as while debugging), arg_disable (torch.compile(own,
disable=True): a script's --no-compile flag), hf (a tiny HF BERT compiled), seq (a compiled nn.Sequential, control).
`python compile2_model.py dml` trains on realdml."""
import os, sys, torch
from torch import nn
BATCH_SIZE = 4
KIND = os.environ.get("KIND", "hook")
class Own(nn.Module):
    def __init__(self): super().__init__(); self.lin = nn.Linear(8, 8)
    def forward(self, h): return torch.relu(self.lin(h))
def scale_output(module, inputs, output): return output * 0.5  # e.g. a logging/scaling hook
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.head = nn.Linear(8, 3)
        if KIND == "hf":
            from transformers import BertConfig, BertModel
            self.body = BertModel(BertConfig(vocab_size=32, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                             intermediate_size=16, max_position_embeddings=16))
            self.body = torch.compile(self.body)
            return
        if KIND == "cfg_disable":
            import torch._dynamo as dynamo; dynamo.config.disable = True
        if KIND in ("cfg_disable", "arg_disable"): self.body = Own()
        else: self.body = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
        if KIND == "hook": self.body.register_forward_hook(scale_output)
        self.body = torch.compile(self.body, backend="aot_eager", disable=KIND == "arg_disable")
    def forward(self, x):
        if KIND == "hf":
            return self.head(self.body(input_ids=(x.abs() * 10).long().clamp(max=31)).last_hidden_state[:, 0])
        return self.head(self.body(x))
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): torch.manual_seed(1); return torch.randn(n, 8), torch.randint(0, 3, (n,))
if __name__ == "__main__":
    import dualmain; dualmain.main(sys.modules[__name__])
