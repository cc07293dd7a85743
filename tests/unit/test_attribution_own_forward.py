"""The backward of a functional op called in a module's own ``forward`` belongs to that module, not to the
submodule whose output reached it, nor to the one that ran after it (record/attribution.py)."""
import torch

from dmlprof.record.attribution import ModuleTracker


class TextCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 8)
        self.conv0 = torch.nn.Conv1d(8, 16, 3)
        self.fc = torch.nn.Linear(16, 4)

    def forward(self, tokens):
        h = self.conv0(self.embed(tokens).transpose(1, 2))
        pooled = h.amax(dim=-1)  # a functional op in TextCNN's own forward
        return self.fc(pooled)


def _owners(model, tokens):
    tracker = ModuleTracker()
    tracker.name_tree(model)
    tracker.install()
    try:
        out = model(tokens)
    finally:
        tracker.remove()
    found, pending, seen = {}, [out.grad_fn], set()
    while pending:
        node = pending.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        found.setdefault(node.name(), tracker.owner_of_node(node)[0])
        pending.extend(n for n, _ in node.next_functions)
    return found


def test_amax_in_the_models_own_forward_is_the_models_and_the_submodules_keep_theirs():
    owners = _owners(TextCNN(), torch.randint(0, 50, (2, 7)))
    assert owners["AmaxBackward0"] == "TextCNN"
    assert owners["ConvolutionBackward0"] == "TextCNN.conv0"
    assert owners["AddmmBackward0"] == "TextCNN.fc"
    assert owners["EmbeddingBackward0"] == "TextCNN.embed"
