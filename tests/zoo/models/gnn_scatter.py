"""A message-passing graph network written the way PyTorch Geometric's layers are, in plain torch.

Edges are cleaned as ``remove_self_loops``/``add_self_loops`` clean them (a
boolean mask over the edge list: how many edges remain depends on values),
degrees are counted with ``scatter_add``, messages are gathered per edge and
aggregated per node with ``scatter_add_`` (GCN, symmetric normalisation) and
``scatter_reduce(..., "amax")`` (max aggregation, GraphSAGE-style); graphs are
pooled per graph with ``scatter_reduce(..., "mean")`` over the batch vector,
and classified with cross-entropy.
"""
import torch
import torch.nn.functional as F
from torch import nn

BATCH_SIZE = 3          # graphs per batch
NODES = 10              # per graph
EDGES = 30              # per graph, self-loops among them
FEATURES = 8
HIDDEN = 16
CLASSES = 3


def remove_self_loops(edge_index):
    keep = edge_index[0] != edge_index[1]
    return edge_index[:, keep]


def add_self_loops(edge_index, num_nodes):
    loops = torch.arange(num_nodes, device=edge_index.device).unsqueeze(0).repeat(2, 1)
    return torch.cat([edge_index, loops], dim=1)


class GCNConv(nn.Module):
    def __init__(self, features, out):
        super().__init__()
        self.lin = nn.Linear(features, out)

    def forward(self, x, edge_index):
        edge_index = add_self_loops(remove_self_loops(edge_index), x.shape[0])
        src, dst = edge_index
        degree = torch.zeros(x.shape[0], device=x.device).scatter_add_(0, dst, torch.ones_like(dst, dtype=x.dtype))
        norm = degree.pow(-0.5)
        norm = norm.masked_fill(torch.isinf(norm), 0)
        h = self.lin(x)
        message = h[src] * (norm[src] * norm[dst]).unsqueeze(-1)
        return torch.zeros_like(h).scatter_add_(0, dst.unsqueeze(-1).expand_as(message), message)


class MaxConv(nn.Module):
    def __init__(self, features, out):
        super().__init__()
        self.lin = nn.Linear(features, out)
        self.root = nn.Linear(features, out)

    def forward(self, x, edge_index):
        src, dst = remove_self_loops(edge_index)
        message = self.lin(x)[src]
        index = dst.unsqueeze(-1).expand_as(message)
        pooled = torch.zeros(x.shape[0], message.shape[1], device=x.device).scatter_reduce(
            0, index, message, reduce="amax", include_self=False)
        return pooled + self.root(x)


class GraphClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = GCNConv(FEATURES, HIDDEN)
        self.conv2 = MaxConv(HIDDEN, HIDDEN)
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x, edge_index, batch):
        h = F.relu(self.conv1(x, edge_index))
        h = F.relu(self.conv2(h, edge_index))
        graphs = int(batch.max()) + 1
        index = batch.unsqueeze(-1).expand_as(h)
        pooled = torch.zeros(graphs, h.shape[1], device=h.device).scatter_reduce(
            0, index, h, reduce="mean", include_self=False)
        return self.head(pooled)


def build_model():
    torch.manual_seed(0)
    return GraphClassifier()


def make_batch(batch_size):
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(batch_size * NODES, FEATURES, generator=generator)
    edges = [torch.randint(0, NODES, (2, EDGES), generator=generator) + graph * NODES for graph in range(batch_size)]
    edge_index = torch.cat(edges, dim=1)
    batch = torch.arange(batch_size).repeat_interleave(NODES)
    labels = torch.randint(0, CLASSES, (batch_size,), generator=generator)
    return (x, edge_index, batch), labels


def loss_fn(logits, labels):
    return F.cross_entropy(logits, labels)


def make_optimizer(params):
    return torch.optim.Adam(params, lr=1e-2)
