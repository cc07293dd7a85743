"""A model file that replays the real-DirectML truth table's samples (tools/realdml/truth_samples.py).

Each sample runs inside a child module of its own (``Replay.samples.<name>``), so a scan attributes
every call to the sample that made it, and a sample that raises is caught and noted: one sample
never stops the others. The same inputs as on real DirectML (each sample rebuilt from its key).

Environment (read when the model is built):
  DMLPROF_TRUTH_KEYS    a file with one sample per line (this shard's): its key, then how its incoming
                        gradients were made on real DirectML ("random" or "ones"; "ones" when absent)
  DMLPROF_TRUTH_STATUS  where forward writes {module name: "ok" | the error} as JSON
"""
import json
import os
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "realdml"))
import truth_samples  # noqa: E402

BATCH_SIZE = 1


def module_name(key: str) -> str:
    """A sample key as a module name (``add|float32|0`` -> ``add__float32__0``, dots kept out)."""
    return key.replace("|", "__").replace(".", "_")


class SampleRun(nn.Module):
    def __init__(self, key: str, incoming: str):
        super().__init__()
        self.key = key
        self.incoming = incoming

    def forward(self, device):
        truth_samples.sample(self.key, self.incoming).run(device)


class Replay(nn.Module):
    def __init__(self, lines):
        super().__init__()
        self.anchor = nn.Parameter(torch.zeros(1))
        samples = [(line.split() + ["ones"])[:2] for line in lines]
        self.samples = nn.ModuleDict({module_name(key): SampleRun(key, incoming) for key, incoming in samples})

    def forward(self, x):
        status = {}
        for name, sample in self.samples.items():
            try:
                sample(x.device)
                status[name] = "ok"
            except Exception as exc:
                text = str(exc).strip().splitlines()
                status[name] = f"{type(exc).__name__}: {text[0][:300] if text else ''}"
        path = os.environ.get("DMLPROF_TRUTH_STATUS")
        if path:
            Path(path).write_text(json.dumps(status), encoding="utf-8")
        return self.anchor * x.sum()


def build_model():
    lines = Path(os.environ["DMLPROF_TRUTH_KEYS"]).read_text(encoding="utf-8").splitlines()
    return Replay([line for line in lines if line.strip()])


def make_batch(batch_size):
    return torch.zeros(batch_size), torch.zeros(batch_size)


def loss_fn(output, target):
    return output.sum()
