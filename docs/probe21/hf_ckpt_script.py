"""A CUDA script: tiny GPT-2 (tied lm_head) trained 2 steps, save_pretrained (safetensors) and from_pretrained back
onto the device, 1 more step (KIND=hf); KIND=st: safetensors.torch.save_model/load_model of the device model;
KIND=sd: torch.save(model.state_dict()) / load_state_dict(torch.load(map_location=dev)). `dml` arg: realdml."""
import os, sys, tempfile, torch
from transformers import GPT2Config, GPT2LMHeadModel
KIND = os.environ.get("KIND", "hf")
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if len(sys.argv) > 1 and sys.argv[1] == "dml":
    import torch_directml; dev = torch_directml.device()
torch.manual_seed(0)
cfg = GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2)
model = GPT2LMHeadModel(cfg).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1)).to(dev)
def step(m, o, i):
    loss = m(input_ids=ids, labels=ids).loss; o.zero_grad(); loss.backward(); o.step()
    print(i, f"{loss.item():.6f}", "tied", m.lm_head.weight is m.transformer.wte.weight, flush=True)
for i in range(2): step(model, opt, i)
d = tempfile.mkdtemp()
if KIND == "hf":
    model.save_pretrained(d); print("files", sorted(os.listdir(d)))
    model = GPT2LMHeadModel.from_pretrained(d).to(dev)
elif KIND == "st":
    from safetensors.torch import save_model, load_model
    save_model(model, d + "/m.safetensors"); print("saved")
    fresh = GPT2LMHeadModel(cfg).to(dev); print("load", load_model(fresh, d + "/m.safetensors")); model = fresh
else:
    torch.save(model.state_dict(), d + "/m.pt")
    fresh = GPT2LMHeadModel(cfg).to(dev); fresh.load_state_dict(torch.load(d + "/m.pt", map_location=dev)); model = fresh
opt = torch.optim.SGD(model.parameters(), lr=0.1)
step(model, opt, 2)
