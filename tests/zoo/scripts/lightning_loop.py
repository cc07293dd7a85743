"""A Lightning training run: a LightningModule, a DataLoader, ``Trainer(accelerator="auto")``.

As written it uses whatever accelerator Lightning finds, like most Lightning scripts.
"""
import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.mse_loss(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)


def main():
    L.seed_everything(0, verbose=False)
    x = torch.randn(96, 8)
    y = x.sum(dim=1, keepdim=True) + 0.1 * torch.randn(96, 1)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    trainer = L.Trainer(max_epochs=2, accelerator="auto", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Regressor(), loader)


if __name__ == "__main__":
    main()
