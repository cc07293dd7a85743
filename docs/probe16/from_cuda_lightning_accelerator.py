"""Re-probe 16: a Lightning script (accelerator "auto", Lightning's default, or "gpu") fails under --from cuda.

    python -m dmlprof scan docs/probe16/from_cuda_lightning_accelerator.py --device emulated-dml --from cuda --run-to-end
    python -m dmlprof scan docs/probe16/from_cuda_lightning_accelerator.py --device cpu --from cuda --run-to-end

Plainly (no GPU) it trains on the CPU and prints "final 1.541". Under --from cuda, `torch.cuda.is_available()`
answers True, Lightning picks its CUDAAccelerator, and that accelerator's own check of the device it was given
(`torch.device("cuda")`, answered as privateuseone:0 or cpu) raises: exit 3 "f... raised
MisconfigurationException: Device should be GPU, got privateuseone:0 instead", read as the script's own error,
with no word that --from cuda does not carry Lightning's accelerator. Without --from cuda the script runs on the
CPU and nothing is tested on the device. (lightning 2.6.6, torch 2.13.)
"""
import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def training_step(self, batch, index):
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), 1e-2)


if __name__ == "__main__":
    L.seed_everything(0)
    g = torch.Generator().manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(64, 16, generator=g), torch.randint(0, 4, (64,), generator=g)),
                      batch_size=8)
    trainer = L.Trainer(accelerator="auto", devices=1, max_epochs=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Lit(), data)
    print("final", round(trainer.callback_metrics["loss"].item(), 4))
