"""realdml only: a CPU checkpoint torch.load-ed with map_location naming torch-directml's device five ways."""
import io, torch, torch_directml
d = torch_directml.device()
for name, ml in [("device", d), ("str", "privateuseone:0"), ("str_noidx", "privateuseone"), ("lambda", lambda s, loc: s), ("dict", {"cpu": "privateuseone:0"})]:
    b = io.BytesIO(); torch.save({"b": torch.ones(3)}, b); b.seek(0)
    try: t = torch.load(b, map_location=ml)["b"]; print(name, "ok", t.device)
    except Exception as e: print(name, "ERR", type(e).__name__, str(e)[:90])
