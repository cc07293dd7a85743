"""Model code reading its tensors' storage or pointers, one idiom per KIND (ecosystem guards and estimators)."""
import os, sys, torch
from torch import nn
BATCH_SIZE = 4
KIND = os.environ.get("KIND", "print")
def probe(h, m):
    if KIND == "print": print("h", h[0, :2], file=sys.stderr)                      # debug print of a device tensor
    elif KIND == "nbytes": print("nbytes", h.nbytes, h.element_size() * h.nelement(), file=sys.stderr)
    elif KIND == "storage_offset": print("off", h[:, 1:].storage_offset(), h.is_contiguous(), file=sys.stderr)
    elif KIND == "is_shared": print("shared", h.is_shared(), file=sys.stderr)
    elif KIND == "is_set_to": print("set_to", h.is_set_to(h), file=sys.stderr)
    elif KIND == "align": print("aligned", h.data_ptr() % 16 == 0, file=sys.stderr)     # xformers-style alignment guard
    elif KIND == "storage_size": print("ssize", h.storage().size(), file=sys.stderr)
    elif KIND == "safetensors":
        import safetensors.torch as st; b = st.save({"w": m.lin.weight.detach()}); print("st", len(b), file=sys.stderr)
    elif KIND == "safetensors_cpu":
        import safetensors.torch as st; b = st.save({"w": m.lin.weight.detach().cpu()}); print("st", len(b), file=sys.stderr)
    elif KIND == "torch_save":
        import io; buf = io.BytesIO(); torch.save(m.state_dict(), buf); buf.seek(0)
        sd = torch.load(buf, map_location=h.device); print("save", sorted(sd), sd["lin.weight"].device.type, file=sys.stderr)
    elif KIND == "hf_id_storage":
        from transformers.pytorch_utils import id_tensor_storage; print("id", id_tensor_storage(m.lin.weight) == id_tensor_storage(m.lin.weight), file=sys.stderr)
    elif KIND == "p2v":
        v = torch.nn.utils.parameters_to_vector(m.parameters()); print("p2v", v.shape, file=sys.stderr)
    elif KIND == "has_storage_guard":  # a library's own guard before reading a pointer
        print("guard", torch._C._has_storage(h) and h.data_ptr() != 0, file=sys.stderr)
    elif KIND == "dlpack": print("dlp", h.__dlpack_device__(), file=sys.stderr)
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.lin = nn.Linear(8, 8); self.head = nn.Linear(8, 3)
    def forward(self, x):
        h = torch.relu(self.lin(x)); probe(h, self); return self.head(h)
def build_model(): torch.manual_seed(0); return Net()
def make_batch(n): torch.manual_seed(1); return torch.randn(n, 8), torch.randint(0, 3, (n,))
if __name__ == "__main__":
    import dualmain; dualmain.main(sys.modules[__name__])
