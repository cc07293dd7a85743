"""An LSTM time-series forecaster: 48 steps of 8 features in, the next 12 values of the first feature out.

A two-layer ``nn.LSTM`` (hidden 64, batch_first) reads the history; a linear
head on its last hidden state predicts the 12-step horizon. Targets are floats,
so the default loss is mean squared error. The synthetic series are noisy sums
of sines with a random phase per sample, so the target really follows from the
history. Trained with Adam.
"""
import math

import torch
from torch import nn

BATCH_SIZE = 32
HISTORY_STEPS = 48
HORIZON_STEPS = 12
FEATURES = 8


class LSTMForecaster(nn.Module):
    def __init__(self, features: int = FEATURES, hidden: int = 64, layers: int = 2, horizon: int = HORIZON_STEPS):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, horizon)

    def forward(self, history):
        output, _ = self.lstm(history)  # (batch, steps, hidden)
        return self.head(output[:, -1])


def build_model():
    torch.manual_seed(0)
    return LSTMForecaster()


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    steps = HISTORY_STEPS + HORIZON_STEPS
    time_axis = torch.arange(steps, dtype=torch.float32)
    phase = torch.rand(batch_size, 1, FEATURES, generator=generator) * 2 * math.pi
    period = torch.linspace(12.0, 48.0, FEATURES)
    series = torch.sin(2 * math.pi * time_axis[None, :, None] / period + phase)
    series = series + 0.05 * torch.randn(batch_size, steps, FEATURES, generator=generator)
    history = series[:, :HISTORY_STEPS].contiguous()
    target = series[:, HISTORY_STEPS:, 0].contiguous()  # (batch, horizon), float: MSE by default
    return history, target


def make_optimizer(params):
    return torch.optim.Adam(params, lr=1e-3)
