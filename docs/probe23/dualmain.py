import sys, torch
def main(mod, steps=3):
    dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    if dev == "dml":
        import torch_directml; dev = torch_directml.device()
    m = mod.build_model().to(dev); m.train()
    opt = mod.make_optimizer(m.parameters()) if hasattr(mod, "make_optimizer") else torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    x, y = mod.make_batch(mod.BATCH_SIZE)
    xs = tuple(t.to(dev) for t in (x if isinstance(x, (tuple, list)) else (x,)))
    y = y.to(dev)
    lf = getattr(mod, "loss_fn", None)
    for i in range(steps):
        out = m(*xs)
        if lf: loss = lf(out, y)
        elif y.dtype.is_floating_point: loss = torch.nn.functional.mse_loss(out, y)
        else: loss = torch.nn.functional.cross_entropy(out, y)
        opt.zero_grad(); loss.backward(); opt.step()
        print(i, f"{loss.item():.6f}")
