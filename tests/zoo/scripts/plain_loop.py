"""A plain PyTorch training loop, as in the tutorials: an MLP on synthetic data, a few epochs.

Runs on CUDA when there is one (``cuda if torch.cuda.is_available() else cpu``).
"""
import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"

features = torch.randn(256, 32)
labels = (features[:, :4].sum(dim=1) > 0).long()

model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 2)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
criterion = nn.CrossEntropyLoss()

for epoch in range(3):
    model.train()
    total = 0.0
    for start in range(0, len(features), 32):
        x = features[start:start + 32].to(device)
        y = labels[start:start + 32].to(device)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    model.eval()
    with torch.no_grad():
        accuracy = (model(features.to(device)).argmax(dim=1).cpu() == labels).float().mean().item()
    print(f"epoch {epoch}: loss {total / 8:.4f}, accuracy {accuracy:.3f}")
