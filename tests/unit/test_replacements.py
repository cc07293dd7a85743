"""Each replacement gives the original's values and gradients (float64, CPU, several shapes).

GIVEN random float64 inputs of a few shapes
WHEN the replacement and the original torch op run forward and backward
THEN values match, and gradcheck passes on the replacement itself.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from dmlprof.replacements import fft as dft
from dmlprof.replacements import ops

D = torch.float64


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _rand(*shape, seed=0, low=None, high=None, grad=True):
    t = torch.randn(*shape, generator=_gen(seed), dtype=D)
    if low is not None:
        t = low + (high - low) * torch.rand(*shape, generator=_gen(seed), dtype=D)
    return t.requires_grad_(grad)


def _same_values_and_grads(reference, replacement, inputs, atol=1e-9, rtol=1e-7):
    """Forward values equal; gradients of a random projection equal; gradcheck on the replacement."""
    ref_out = reference(*inputs)
    rep_out = replacement(*inputs)
    ref_list = ref_out if isinstance(ref_out, (tuple, list)) else [ref_out]
    rep_list = rep_out if isinstance(rep_out, (tuple, list)) else [rep_out]
    assert len(ref_list) == len(rep_list)
    for a, b in zip(ref_list, rep_list):
        assert a.shape == b.shape
        assert torch.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True), (a - b).abs().max()
    diff = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    if not diff:
        return
    weights = [torch.randn(a.shape, generator=_gen(99), dtype=a.dtype) for a in ref_list if a.is_floating_point()]
    ref_grads = torch.autograd.grad(sum((a * w).sum() for a, w in zip(ref_list, weights)), diff, allow_unused=True)
    rep_grads = torch.autograd.grad(sum((b * w).sum() for b, w in zip(rep_list, weights)), diff, allow_unused=True)
    for g_ref, g_rep in zip(ref_grads, rep_grads):
        if g_ref is None:
            assert g_rep is None or not g_rep.abs().any()
            continue
        assert torch.allclose(g_ref, g_rep, atol=atol * 10, rtol=rtol * 10), (g_ref - g_rep).abs().max()
    assert torch.autograd.gradcheck(lambda *xs: replacement(*_swap(inputs, xs)), tuple(diff), atol=1e-6)


def _swap(inputs, diff_values):
    it = iter(diff_values)
    return [next(it) if isinstance(t, torch.Tensor) and t.requires_grad else t for t in inputs]


SHAPES_4D = [(2, 4, 3, 3), (1, 6, 5, 2), (3, 8, 2, 4)]


@pytest.mark.parametrize("shape", SHAPES_4D + [(2, 4, 7), (2, 6)])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(shape, affine):
    c = shape[1]
    groups = 2
    x = _rand(*shape, seed=1)
    w = _rand(c, seed=2) if affine else None
    b = _rand(c, seed=3) if affine else None
    _same_values_and_grads(lambda x, w, b: F.group_norm(x, groups, w, b, 1e-5),
                           lambda x, w, b: ops.group_norm(x, groups, w, b, 1e-5), [x, w, b])


@pytest.mark.parametrize("shape", [((2, 3, 4, 5), (2, 3, 2)), ((1, 2, 3, 3), (1, 4, 5)), ((2, 1, 5, 2), (2, 2, 2))])
@pytest.mark.parametrize("padding_mode", ["zeros", "border"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample(shape, padding_mode, align_corners):
    (n, c, h, w), (_, ho, wo) = shape
    x = _rand(n, c, h, w, seed=4)
    grid = _rand(n, ho, wo, 2, seed=5, low=-1.3, high=1.3)  # some points outside, to test the padding
    _same_values_and_grads(
        lambda x, g: F.grid_sample(x, g, mode="bilinear", padding_mode=padding_mode, align_corners=align_corners),
        lambda x, g: ops.grid_sample(x, g, padding_mode=padding_mode, align_corners=align_corners), [x, grid])


@pytest.mark.parametrize("mode,case", [(m, c) for m in ("sum", "mean") for c in ("2d", "offsets", "offsets_last", "padding")]
                         + [("sum", "weights")])  # per_sample_weights is only defined for mode='sum'
def test_embedding_bag(mode, case):
    weight = _rand(10, 3, seed=6)
    kwargs = {}
    if case == "2d":
        inputs = torch.randint(0, 10, (4, 5), generator=_gen(7))
        offsets = None
    else:
        inputs = torch.randint(0, 10, (9,), generator=_gen(8))
        offsets = torch.tensor([0, 2, 2, 6])  # one empty bag
        if case == "offsets_last":
            offsets = torch.tensor([0, 2, 2, 6, 9])
            kwargs["include_last_offset"] = True
        if case == "padding":
            inputs[3] = 0
            kwargs["padding_idx"] = 0
        if case == "weights":
            kwargs["per_sample_weights"] = _rand(9, seed=9, grad=False)
    _same_values_and_grads(lambda w: F.embedding_bag(inputs, w, offsets, mode=mode, **kwargs),
                           lambda w: ops.embedding_bag(inputs, w, offsets, mode=mode, **kwargs), [weight])


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
def test_logsigmoid(shape):
    x = _rand(*shape, seed=10) * 10
    _same_values_and_grads(F.logsigmoid, ops.logsigmoid, [x.detach().requires_grad_()])


@pytest.mark.parametrize("shape", [(6,), (3, 4), (2, 3, 2)])
@pytest.mark.parametrize("options", [{}, {"pos_weight": True}, {"weight": True, "reduction": "sum"}, {"reduction": "none"}])
def test_bce_with_logits(shape, options):
    x = _rand(*shape, seed=11) * 4
    y = torch.rand(*shape, generator=_gen(12), dtype=D)
    kw = {"reduction": options.get("reduction", "mean")}
    if options.get("pos_weight"):
        kw["pos_weight"] = torch.rand(shape[-1], generator=_gen(13), dtype=D) + 0.5
    if options.get("weight"):
        kw["weight"] = torch.rand(shape, generator=_gen(14), dtype=D)
    _same_values_and_grads(lambda x, y: F.binary_cross_entropy_with_logits(x, y, **kw),
                           lambda x, y: ops.binary_cross_entropy_with_logits(x, y, **kw), [x, y.requires_grad_()])


@pytest.mark.parametrize("shape", [(6,), (3, 4), (2, 3, 2)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy(shape, reduction):
    p = _rand(*shape, seed=15, low=0.05, high=0.95)
    y = _rand(*shape, seed=16, low=0.0, high=1.0)
    weight = torch.rand(shape, generator=_gen(17), dtype=D)
    _same_values_and_grads(lambda p, y: F.binary_cross_entropy(p, y, weight, reduction=reduction),
                           lambda p, y: ops.binary_cross_entropy(p, y, weight, reduction=reduction), [p, y])


def test_binary_cross_entropy_clamps_like_torch():
    p = torch.tensor([0.0, 1.0, 0.5], dtype=D)
    y = torch.tensor([1.0, 0.0, 0.5], dtype=D)
    assert torch.allclose(F.binary_cross_entropy(p, y, reduction="none"), ops.binary_cross_entropy(p, y, reduction="none"))


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("sizes", [(1, 3, 4), (5, 2, 3), (2, 4, 1)])
def test_cells(cell, sizes):
    batch, n_in, hidden = sizes
    gates = 4 if cell == "lstm" else 3
    x = _rand(batch, n_in, seed=18)
    h = _rand(batch, hidden, seed=19)
    w_ih, w_hh = _rand(gates * hidden, n_in, seed=20), _rand(gates * hidden, hidden, seed=21)
    b_ih, b_hh = _rand(gates * hidden, seed=22), _rand(gates * hidden, seed=23)
    if cell == "lstm":
        c = _rand(batch, hidden, seed=24)
        _same_values_and_grads(lambda *a: torch.lstm_cell(a[0], (a[1], a[2]), *a[3:]),
                               lambda *a: ops.lstm_cell(a[0], (a[1], a[2]), *a[3:]), [x, h, c, w_ih, w_hh, b_ih, b_hh])
    else:
        _same_values_and_grads(torch.gru_cell, ops.gru_cell, [x, h, w_ih, w_hh, b_ih, b_hh])


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU])
@pytest.mark.parametrize("config", [dict(num_layers=1), dict(num_layers=2, bidirectional=True),
                                    dict(num_layers=2, batch_first=True, bias=False)])
def test_rnn_stack(cls, config):
    torch.manual_seed(0)
    module = cls(3, 4, **config).double()
    x = _rand(5, 2, 3, seed=25)
    cell = "lstm" if cls is torch.nn.LSTM else "gru"

    def replacement(x, *weights):
        layers = config.get("num_layers", 1) * (2 if config.get("bidirectional") else 1)
        h0 = torch.zeros(layers, 2 if not config.get("batch_first") else 5, 4, dtype=D)
        hx = (h0, h0) if cell == "lstm" else h0
        out = ops.rnn_stack(cell, x, hx, list(weights), config.get("bias", True), config.get("num_layers", 1),
                            0.0, False, config.get("bidirectional", False), config.get("batch_first", False))
        return out

    def reference(x, *weights):
        with torch.nn.utils.stateless._reparametrize_module(module, dict(zip(module._flat_weights_names, weights))) \
                if hasattr(torch.nn.utils, "stateless") else _nullcontext():
            out, state = module(x)
        return (out,) + (tuple(state) if cell == "lstm" else (state,))

    _same_values_and_grads(reference, replacement, [x] + [w.detach().clone().requires_grad_() for w in module._flat_weights])


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("sizes", [(6, 2, 5, 3), (8, 3, 4, 2), (5, 1, 3, 1)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("concatenated", [False, True])
def test_ctc_loss(sizes, reduction, concatenated):
    t, n, c, s = sizes
    logits = _rand(t, n, c, seed=26)
    targets = torch.randint(1, c, (n, s), generator=_gen(27))
    targets[0, -1] = targets[0, -2] if s > 1 else targets[0, -1]  # a repeated label needs a blank between
    input_lengths = torch.tensor([t - (i % 2) for i in range(n)])
    target_lengths = torch.tensor([s - (i % 2) if s > 1 else s for i in range(n)])
    if concatenated:
        targets = torch.cat([targets[i, : target_lengths[i]] for i in range(n)])

    def run(fn):
        return lambda z: fn(z.log_softmax(2), targets, input_lengths, target_lengths, reduction=reduction)

    _same_values_and_grads(run(F.ctc_loss), run(ops.ctc_loss), [logits])


def test_ctc_impossible_alignment_zero_infinity():
    logits = _rand(2, 1, 4, seed=28)  # 2 frames cannot emit 3 labels
    targets = torch.tensor([[1, 2, 3]])
    args = (logits.log_softmax(2), targets, torch.tensor([2]), torch.tensor([3]))
    assert torch.isinf(ops.ctc_loss(*args, reduction="sum")) and torch.isinf(F.ctc_loss(*args, reduction="sum"))
    assert ops.ctc_loss(*args, reduction="sum", zero_infinity=True).item() == 0.0


@pytest.mark.parametrize("shape,dim", [((7,), 0), ((3, 5), 1), ((4, 3, 2), 0), ((2, 9), -1)])
def test_cumprod(shape, dim):
    x = _rand(*shape, seed=29)
    _same_values_and_grads(lambda x: torch.cumprod(x, dim), lambda x: ops.cumprod(x, dim), [x])


def test_cumprod_with_zero_gradient():
    x = torch.tensor([2.0, 0.0, 3.0, -1.5], dtype=D, requires_grad=True)
    _same_values_and_grads(lambda x: torch.cumprod(x, 0), lambda x: ops.cumprod(x, 0), [x])


@pytest.mark.parametrize("n,m", [(1, None), (3, None), (3, 5), (4, 2)])
def test_eye(n, m):
    for dtype in (torch.float32, torch.int64, torch.bool):
        ref = torch.eye(n, dtype=dtype) if m is None else torch.eye(n, m, dtype=dtype)
        got = ops.eye(n, m, dtype=dtype)
        assert got.dtype == ref.dtype and torch.equal(got, ref)


@pytest.mark.parametrize("shape,repeats,dim", [((3,), 2, None), ((2, 3), 3, 1), ((2, 3), "t", 0), ((4, 2), "t", 0),
                                               ((2, 3), "t", 1), ((2, 2), 2, None)])
def test_repeat_interleave(shape, repeats, dim):
    x = _rand(*shape, seed=30)
    size = shape[dim] if dim is not None else x.numel()
    if repeats == "t":
        repeats = torch.tensor([(i * 2) % 3 for i in range(size)])  # includes a zero repeat
    _same_values_and_grads(lambda x: torch.repeat_interleave(x, repeats, dim),
                           lambda x: ops.repeat_interleave(x, repeats, dim), [x])


def test_repeat_interleave_index_form():
    repeats = torch.tensor([1, 0, 3, 2])
    assert torch.equal(ops.repeat_interleave(repeats), torch.repeat_interleave(repeats))


@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1)])
def test_count_nonzero(dim):
    x = torch.tensor([[0.0, 1.0, 2.0], [0.0, 0.0, -3.0]])
    ref = torch.count_nonzero(x) if dim is None else torch.count_nonzero(x, dim)
    got = ops.count_nonzero(x, dim)
    assert got.dtype == ref.dtype and torch.equal(got, ref)


@pytest.mark.parametrize("length,kwargs", [(5, {"scale_factor": 2}), (4, {"size": 7}), (6, {"size": 3}),
                                           (5, {"scale_factor": 1.7})])
def test_upsample_nearest1d(length, kwargs):
    x = _rand(2, 3, length, seed=31)
    _same_values_and_grads(lambda x: F.interpolate(x, mode="nearest", **kwargs),
                           lambda x: ops.interpolate_nearest1d(x, **kwargs), [x])


@pytest.mark.parametrize("args,kwargs", [((), {}), ((1,), {}), ((0,), {"keepdim": True}), ((), {"dim": (0, 2), "correction": 0}),
                                         ((False,), {}), ((1, True, True), {}), ((), {"correction": 2})])
def test_std_var_mean(args, kwargs):
    x = _rand(3, 4, 5, seed=32)
    _same_values_and_grads(lambda x: torch.std(x, *args, **kwargs), lambda x: ops.std(x, *args, **kwargs), [x])
    _same_values_and_grads(lambda x: torch.var_mean(x, *args, **kwargs),
                           lambda x: ops.var_mean(x, *args, **kwargs), [x])


@pytest.mark.parametrize("which", ["min", "max", "both"])
def test_clamp_tensor_bounds(which):
    x = _rand(4, 5, seed=33)
    lo = _rand(4, 5, seed=34) - 0.5 if which in ("min", "both") else None
    hi = _rand(5, seed=35) + 0.5 if which in ("max", "both") else None
    inputs = [x] + [t for t in (lo, hi) if t is not None]

    def call(fn):
        def run(x, *bounds):
            it = iter(bounds)
            return fn(x, min=next(it) if lo is not None else None, max=next(it) if hi is not None else None)
        return run

    _same_values_and_grads(call(torch.clamp), call(ops.clamp), inputs)


@pytest.mark.parametrize("alpha", [1.0, 0.3])
def test_elu(alpha):
    x = _rand(3, 7, seed=36)
    _same_values_and_grads(lambda x: F.elu(x, alpha), lambda x: ops.elu(x, alpha), [x])


@pytest.mark.parametrize("name,kwargs", [("selu", {}), ("celu", {"alpha": 0.7}), ("softshrink", {"lambd": 0.3}),
                                         ("hardshrink", {"lambd": 0.4})])
def test_elu_family_and_shrink(name, kwargs):
    x = _rand(3, 7, seed=79)
    _same_values_and_grads(lambda x: getattr(F, name)(x, **kwargs), lambda x: getattr(ops, name)(x, **kwargs), [x])


@pytest.mark.parametrize("delta", [1.0, 0.5, 2.0])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_huber_loss(delta, reduction):
    x, y = _rand(4, 5, seed=37) * 2, _rand(4, 5, seed=38)
    _same_values_and_grads(lambda x, y: F.huber_loss(x, y, reduction=reduction, delta=delta),
                           lambda x, y: ops.huber_loss(x, y, reduction=reduction, delta=delta), [x, y])


@pytest.mark.parametrize("weight", [0.1, 0.9, "tensor"])
def test_lerp(weight):
    a, b = _rand(3, 4, seed=39), _rand(3, 4, seed=40)
    inputs = [a, b]
    if weight == "tensor":
        inputs.append(_rand(3, 4, seed=41, low=0.0, high=1.0))
        _same_values_and_grads(torch.lerp, ops.lerp, inputs)
    else:
        _same_values_and_grads(lambda a, b: torch.lerp(a, b, weight), lambda a, b: ops.lerp(a, b, weight), inputs)


def test_foreach_lerp_in_place():
    starts = [torch.randn(3, generator=_gen(42)), torch.randn(2, 2, generator=_gen(43))]
    ends = [torch.randn(3, generator=_gen(44)), torch.randn(2, 2, generator=_gen(45))]
    expected = [torch.lerp(s, e, 0.1) for s, e in zip(starts, ends)]
    ops.foreach_lerp_(starts, ends, 0.1)
    for got, want in zip(starts, expected):
        assert torch.allclose(got, want, atol=1e-6)


@pytest.mark.parametrize("shape,dim", [((8,), -1), ((3, 6), 1), ((5, 4), 0), ((2, 7, 3), 1)])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_fft_family(shape, dim, norm):
    x = _rand(*shape, seed=46)
    _same_values_and_grads(lambda x: torch.view_as_real(torch.fft.rfft(x, dim=dim, norm=norm)),
                           lambda x: dft.rfft(x, dim=dim, norm=norm), [x])
    z = _rand(*shape, 2, seed=47)
    _same_values_and_grads(lambda z: torch.view_as_real(torch.fft.fft(torch.view_as_complex(z), dim=dim, norm=norm)),
                           lambda z: dft.fft(z, dim=dim, norm=norm), [z])
    _same_values_and_grads(lambda z: torch.view_as_real(torch.fft.ifft(torch.view_as_complex(z), dim=dim, norm=norm)),
                           lambda z: dft.ifft(z, dim=dim, norm=norm), [z])
    spectrum = torch.view_as_real(torch.fft.rfft(x.detach(), dim=dim)).requires_grad_()
    n = shape[dim]
    # irfft's gradient differs from torch's only in how it treats the (discarded) imaginary parts of DC/Nyquist.
    ref = torch.fft.irfft(torch.view_as_complex(spectrum.detach()), n=n, dim=dim, norm=norm)
    assert torch.allclose(dft.irfft(spectrum, n=n, dim=dim, norm=norm), ref, atol=1e-9)
    assert torch.autograd.gradcheck(lambda s: dft.irfft(s, n=n, dim=dim, norm=norm), (spectrum,))



@pytest.mark.parametrize("shape,dim", [((4, 6), -1), ((2, 4, 3), 1)])
def test_glu_and_mish(shape, dim):
    x = _rand(*shape, seed=70)
    _same_values_and_grads(lambda x: F.glu(x, dim), lambda x: ops.glu(x, dim), [x])
    _same_values_and_grads(F.mish, ops.mish, [x.detach().clone().requires_grad_()])


@pytest.mark.parametrize("shape,dim", [((4, 3), 0), ((5, 2, 3), 0), ((3, 4, 2), 1), ((3, 4), -1)])
def test_weight_norm(shape, dim):
    v = _rand(*shape, seed=71)
    if dim == -1:
        g = torch.tensor(1.7, dtype=D, requires_grad=True)
    else:
        g = _rand(*[s if i == dim else 1 for i, s in enumerate(shape)], seed=72)
    _same_values_and_grads(lambda v, g: torch._weight_norm(v, g, dim), lambda v, g: ops.weight_norm(v, g, dim), [v, g])


@pytest.mark.slow  # 45 s of the quick set on CI's 2 cores
@pytest.mark.parametrize("kernel,kwargs", [((2, 2), {}), ((3, 2), {"stride": 2, "padding": 1}),
                                           ((2, 3), {"dilation": (2, 1), "stride": (1, 2)})])
def test_unfold_fold(kernel, kwargs):
    x = _rand(2, 3, 6, 5, seed=73)
    _same_values_and_grads(lambda x: F.unfold(x, kernel, **kwargs), lambda x: ops.unfold(x, kernel, **kwargs), [x])
    cols = F.unfold(x.detach(), kernel, **kwargs).requires_grad_()
    _same_values_and_grads(lambda c: F.fold(c, (6, 5), kernel, **kwargs), lambda c: ops.fold(c, (6, 5), kernel, **kwargs),
                           [cols])


@pytest.mark.parametrize("output_size", [(2, 3), 1, (3, None)])
def test_adaptive_max_pool2d(output_size):
    x = _rand(2, 3, 6, 6, seed=74)
    _same_values_and_grads(lambda x: F.adaptive_max_pool2d(x, output_size, return_indices=True),
                           lambda x: ops.adaptive_max_pool2d(x, output_size, return_indices=True), [x])


@pytest.mark.parametrize("kwargs", [{"scale_factor": 2}, {"size": 7, "align_corners": True}, {"size": 3},
                                    {"scale_factor": 1.5, "align_corners": False}])
def test_upsample_linear1d(kwargs):
    x = _rand(2, 3, 5, seed=75)
    _same_values_and_grads(lambda x: F.interpolate(x, mode="linear", **kwargs),
                           lambda x: ops.interpolate_linear1d(x, **kwargs), [x])


@pytest.mark.slow  # 25 s of the quick set on CI's 2 cores
@pytest.mark.parametrize("kwargs", [{"scale_factor": 2}, {"size": (3, 11), "align_corners": True}, {"scale_factor": 0.5},
                                    {"scale_factor": (1.7, 0.6)}, {"scale_factor": 1.5, "recompute_scale_factor": True},
                                    {"size": (9, 2), "align_corners": False}])
def test_interpolate_bilinear_samples_as_aten_does(kwargs):
    """upsample_bilinear2d gives wrong values on DirectML (microsoft/DirectML#482): the replacement's matmuls
    must give ATen's values and gradients, sizes and scales included."""
    x = _rand(2, 3, 5, 7, seed=77)
    _same_values_and_grads(lambda x: F.interpolate(x, mode="bilinear", **kwargs),
                           lambda x: ops.interpolate_bilinear(x, **kwargs), [x])


@pytest.mark.parametrize("pad, value", [((1, 2), 0.0), ((1, 2, 0, 1), 0.5), ((0, 0, 2, 2, 1, 0), -1.0)])
def test_pad_constant_pads_by_concatenation(pad, value):
    """F.pad's backward (constant_pad_nd with negative pads) is refused by torch-directml: the replacement's
    values and gradients are F.pad's."""
    x = _rand(2, 3, 5, 4, seed=78)
    _same_values_and_grads(lambda x: F.pad(x, pad, value=value), lambda x: ops.pad_constant(x, pad, value), [x])


@pytest.mark.parametrize("shifts,dims", [(2, None), (1, 0), ((1, -2), (0, 1)), (-7, 1), (0, 1)])
def test_roll(shifts, dims):
    x = _rand(3, 4, seed=76)
    _same_values_and_grads(lambda x: torch.roll(x, shifts, dims), lambda x: ops.roll(x, shifts, dims), [x])


def test_trunc_frac_nan_to_num_logit_bucketize():
    x = torch.tensor([-2.5, -0.5, 0.0, 0.7, 3.2, float("nan"), float("inf"), -float("inf")], dtype=D)
    assert torch.equal(ops.trunc(x[:5]), torch.trunc(x[:5]))
    assert torch.allclose(ops.frac(x[:5]), torch.frac(x[:5]))
    for kwargs in ({}, {"nan": 1.0, "posinf": 9.0, "neginf": -9.0}):
        assert torch.equal(ops.nan_to_num(x, **kwargs), torch.nan_to_num(x, **kwargs))
    finite = _rand(6, seed=77) * 3
    _same_values_and_grads(torch.frac, ops.frac, [finite])
    p = _rand(3, 4, seed=78, low=0.02, high=0.98)
    _same_values_and_grads(torch.logit, ops.logit, [p])
    _same_values_and_grads(lambda p: torch.logit(p, 0.1), lambda p: ops.logit(p, 0.1), [p.detach().clone().requires_grad_()])
    values = torch.tensor([[0.0, 1.0, 2.5], [3.0, -1.0, 10.0]])
    bounds = torch.tensor([0.0, 1.0, 3.0, 5.0])
    for right in (False, True):
        assert torch.equal(ops.bucketize(values, bounds, right=right), torch.bucketize(values, bounds, right=right))


# --------------------------------------------------------------------------- on the emulated DirectML device
# GIVEN the emulated DirectML device (torch-directml's exact op set, counting its CPU fallback)
# WHEN the original op and its replacement run forward and backward there
# THEN the original reaches the fallback (or fails there) and the replacement makes zero fallback calls.


@pytest.fixture(scope="module")
def device_results():
    """Every case's fallback counts, from one fresh process: on torch 2.4.1 the autograd engine sizes its
    device queues once, so the device must be loaded before anything in the process runs a backward."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, __file__], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        pytest.fail(f"device check process failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _run_device_cases() -> dict:
    from dmlprof import testing

    problem = testing.build_problem()
    if problem:
        raise SystemExit(f"the emulated DML device must build here: {problem}")
    testing.load()
    results = {}
    for case, (original, replacement) in _device_cases(testing.device()).items():
        row = {}
        for label, fn in (("original", original), ("replacement", replacement)):
            testing.reset_fallback_counts()
            try:
                _forward_backward(fn)
                row[label] = testing.fallback_counts()
            except (NotImplementedError, RuntimeError) as exc:  # e.g. a fused LSTM cell has no CPU kernel to fall back to
                row[label] = {"raised": str(exc).splitlines()[0][:300]}
        results[case] = row
    return results


def _device_cases(dev):
    def r(*shape, low=None, high=None):
        g = _gen(sum(shape) + len(shape))
        t = torch.randn(*shape, generator=g) if low is None else low + (high - low) * torch.rand(*shape, generator=g)
        return t.to(dev).requires_grad_()

    x4, grid = r(2, 4, 5, 5), r(2, 3, 3, 2, low=-1.2, high=1.2)
    emb_w, idx, offsets = r(10, 3), torch.randint(0, 10, (9,), generator=_gen(1)).to(dev), torch.tensor([0, 2, 2, 6]).to(dev)
    xl, yl = r(3, 4), torch.rand(3, 4, generator=_gen(2)).to(dev)
    prob = r(3, 4, low=0.05, high=0.95)
    xc, h, c = r(2, 3), r(2, 5), r(2, 5)
    w_ih, w_hh, b_ih, b_hh = r(20, 3), r(20, 5), r(20), r(20)
    seq = r(4, 2, 3)
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(3, 5, num_layers=2, bidirectional=True).to(dev)
    gru = torch.nn.GRU(3, 5).to(dev)
    logits, labels = r(6, 2, 5), torch.randint(1, 5, (2, 3), generator=_gen(3)).to(dev)
    xx, lo, hi = r(3, 6), r(3, 6), r(6)
    x3, sig, pair = r(2, 3, 5), r(4, 8), r(4, 8, 2)
    repeats = torch.tensor([1, 0, 2]).to(dev)
    zeros_h = torch.zeros(4, 2, 5).to(dev)
    q4, k4, v4 = r(1, 2, 3, 4), r(1, 2, 5, 4), r(1, 2, 5, 5)
    cols = r(2, 16, 16)
    def optimizer_case(name, **kwargs):
        def make():
            torch.manual_seed(0)
            model = torch.nn.Linear(4, 3).to(dev)
            return model, getattr(torch.optim, name)(model.parameters(), lr=0.01, **kwargs)

        def step(model, optimizer):
            for _ in range(2):
                model(torch.ones(2, 4).to(dev)).sum().backward()
                optimizer.step()
                optimizer.zero_grad()

        def patched():
            from dmlprof.replacements import patch_optimizer

            model, optimizer = make()
            patch_optimizer(optimizer)
            step(model, optimizer)

        return (lambda: step(*make())), patched

    return {
        "optim_adam": optimizer_case("Adam"),
        "optim_adamw": optimizer_case("AdamW"),
        "optim_adam_amsgrad": optimizer_case("Adam", amsgrad=True),
        "optim_adamw_single_tensor": optimizer_case("AdamW", foreach=False),
        "optim_adamax": optimizer_case("Adamax"),
        "optim_nadam": optimizer_case("NAdam"),
        "optim_radam": optimizer_case("RAdam"),
        "grid_sample_zeros": (lambda: F.grid_sample(x4, grid, padding_mode="zeros", align_corners=False),
                              lambda: ops.grid_sample(x4, grid, padding_mode="zeros", align_corners=False)),
        "grid_sample_border": (lambda: F.grid_sample(x4, grid, padding_mode="border", align_corners=True),
                               lambda: ops.grid_sample(x4, grid, padding_mode="border", align_corners=True)),
        "embedding_bag_sum": (lambda: F.embedding_bag(idx, emb_w, offsets, mode="sum"),
                              lambda: ops.embedding_bag(idx, emb_w, offsets, mode="sum")),
        "embedding_bag_mean_2d": (lambda: F.embedding_bag(idx.reshape(3, 3), emb_w, mode="mean"),
                                  lambda: ops.embedding_bag(idx.reshape(3, 3), emb_w, mode="mean")),
        "group_norm": (lambda: F.group_norm(x4, 2, lo[0, :4], hi[:4]), lambda: ops.group_norm(x4, 2, lo[0, :4], hi[:4])),
        "logsigmoid": (lambda: F.logsigmoid(xl), lambda: ops.logsigmoid(xl)),
        "bce_with_logits": (lambda: F.binary_cross_entropy_with_logits(xl, yl), lambda: ops.binary_cross_entropy_with_logits(xl, yl)),
        "binary_cross_entropy": (lambda: F.binary_cross_entropy(prob, yl), lambda: ops.binary_cross_entropy(prob, yl)),
        "lstm_cell": (lambda: torch.lstm_cell(xc, (h, c), w_ih, w_hh, b_ih, b_hh),
                      lambda: ops.lstm_cell(xc, (h, c), w_ih, w_hh, b_ih, b_hh)),
        "gru_cell": (lambda: torch.gru_cell(xc, h, w_ih[:15], w_hh[:15], b_ih[:15], b_hh[:15]),
                     lambda: ops.gru_cell(xc, h, w_ih[:15], w_hh[:15], b_ih[:15], b_hh[:15])),
        "nn_lstm": (lambda: lstm(seq)[0], lambda: ops.rnn_stack("lstm", seq, (zeros_h, zeros_h), lstm._flat_weights,
                                                                  True, 2, 0.0, True, True, False)[0]),
        "nn_gru": (lambda: gru(seq)[0], lambda: ops.rnn_stack("gru", seq, zeros_h[:1], gru._flat_weights,
                                                                True, 1, 0.0, True, False, False)[0]),
        "ctc_loss": (lambda: F.ctc_loss(logits.log_softmax(2), labels, torch.tensor([6, 5]), torch.tensor([3, 2])),
                     lambda: ops.ctc_loss(logits.log_softmax(2), labels, torch.tensor([6, 5]), torch.tensor([3, 2]))),
        "cumprod": (lambda: torch.cumprod(xx, 1), lambda: ops.cumprod(xx, 1)),
        "eye": (lambda: torch.eye(3, 4, device=dev), lambda: ops.eye(3, 4, device=dev)),
        "repeat_interleave": (lambda: torch.repeat_interleave(xx, repeats, 0), lambda: ops.repeat_interleave(xx, repeats, 0)),
        "count_nonzero": (lambda: torch.count_nonzero(xx, 1), lambda: ops.count_nonzero(xx, 1)),
        "upsample_nearest1d": (lambda: F.interpolate(x3, scale_factor=2, mode="nearest"),
                               lambda: ops.interpolate_nearest1d(x3, scale_factor=2)),
        "std": (lambda: torch.std(xx, 1), lambda: ops.std(xx, 1)),
        "var_mean": (lambda: torch.var_mean(xx, 1), lambda: ops.var_mean(xx, 1)),
        "clamp_tensor": (lambda: torch.clamp(xx, min=lo, max=hi), lambda: ops.clamp(xx, min=lo, max=hi)),
        "elu": (lambda: F.elu(xx), lambda: ops.elu(xx)),
        "huber_loss": (lambda: F.huber_loss(xx, lo), lambda: ops.huber_loss(xx, lo)),
        "lerp": (lambda: torch.lerp(xx, lo, 0.3), lambda: ops.lerp(xx, lo, 0.3)),
        "rfft": (lambda: torch.view_as_real(torch.fft.rfft(sig)), lambda: dft.rfft(sig)),
        "fft": (lambda: torch.view_as_real(torch.fft.fft(torch.view_as_complex(pair))), lambda: dft.fft(pair)),
        "attention": (lambda: F.scaled_dot_product_attention(q4, k4, v4),
                      lambda: ops.scaled_dot_product_attention(q4, k4, v4)),
        "glu": (lambda: F.glu(xx), lambda: ops.glu(xx)),
        "selu": (lambda: F.selu(xx), lambda: ops.selu(xx)),
        "celu": (lambda: F.celu(xx, 0.7), lambda: ops.celu(xx, 0.7)),
        "softshrink": (lambda: F.softshrink(xx), lambda: ops.softshrink(xx)),
        "hardshrink": (lambda: F.hardshrink(xx), lambda: ops.hardshrink(xx)),
        "mish": (lambda: F.mish(xx), lambda: ops.mish(xx)),
        "weight_norm": (lambda: torch._weight_norm(lo, hi[:3].reshape(3, 1), 0), lambda: ops.weight_norm(lo, hi[:3].reshape(3, 1), 0)),
        "unfold": (lambda: F.unfold(x4, (2, 3), stride=2), lambda: ops.unfold(x4, (2, 3), stride=2)),
        "fold": (lambda: F.fold(cols, (5, 5), (2, 2)), lambda: ops.fold(cols, (5, 5), (2, 2))),
        "adaptive_max_pool2d": (lambda: F.adaptive_max_pool2d(x4[..., :4, :4], 2), lambda: ops.adaptive_max_pool2d(x4[..., :4, :4], 2)),
        "upsample_linear1d": (lambda: F.interpolate(x3, scale_factor=2, mode="linear"),
                              lambda: ops.interpolate_linear1d(x3, scale_factor=2)),
        "roll": (lambda: torch.roll(xx, 2, 1), lambda: ops.roll(xx, 2, 1)),
        "frac": (lambda: torch.frac(xx), lambda: ops.frac(xx)),
        "nan_to_num": (lambda: torch.nan_to_num(xx), lambda: ops.nan_to_num(xx)),
        "logit": (lambda: torch.logit(prob), lambda: ops.logit(prob)),
        "bucketize": (lambda: torch.bucketize(xx.detach(), hi.detach().sort().values),
                      lambda: ops.bucketize(xx.detach(), hi.detach().sort().values)),
        "irfft": (lambda: torch.fft.irfft(torch.view_as_complex(pair[:, :5].contiguous())), lambda: dft.irfft(pair[:, :5])),
    }


DEVICE_CASES = ["optim_adam", "optim_adamw", "optim_adam_amsgrad", "optim_adamw_single_tensor", "optim_adamax",
                "optim_nadam", "optim_radam", "grid_sample_zeros", "grid_sample_border", "embedding_bag_sum", "embedding_bag_mean_2d", "group_norm",
                "logsigmoid", "bce_with_logits", "binary_cross_entropy", "lstm_cell", "gru_cell", "nn_lstm", "nn_gru",
                "ctc_loss", "cumprod", "eye", "repeat_interleave", "count_nonzero", "upsample_nearest1d", "std",
                "var_mean", "clamp_tensor", "elu", "huber_loss", "lerp", "rfft", "fft", "irfft", "attention", "glu", "mish", "weight_norm", "unfold", "fold",
                "adaptive_max_pool2d", "upsample_linear1d", "roll", "frac", "nan_to_num", "logit", "bucketize", "selu", "celu", "softshrink",
                "hardshrink"]
# The original only falls back on some torch versions (the attention math path calls isneginf from 2.5 on).
FALLS_BACK_FROM = {"attention": (2, 5)}


def _torch_version():
    return tuple(int("".join(ch for ch in part if ch.isdigit()) or 0) for part in torch.__version__.split("+")[0].split(".")[:2])


def _forward_backward(fn):
    out = fn()
    if out is None:  # an optimizer case: the steps ran inside fn
        return
    outs = out if isinstance(out, (tuple, list)) else [out]
    total = [o.float().sum() for o in outs if o.is_floating_point() and o.requires_grad]
    if total:
        sum(total).backward()


@pytest.mark.live
@pytest.mark.parametrize("case", DEVICE_CASES)
def test_replacement_is_all_native_on_emulated_dml(device_results, case):
    row = device_results[case]
    if _torch_version() >= FALLS_BACK_FROM.get(case, (0, 0)):
        assert row["original"], f"{case}: the original no longer falls back here; is the replacement still needed?"
    assert row["replacement"] == {}


@pytest.mark.parametrize("mask", [None, "bool", "float", "causal", "bool_full_row"])
@pytest.mark.parametrize("shapes", [((1, 2, 3, 4), (1, 2, 5, 4)), ((2, 1, 3, 2), (2, 1, 3, 2))])
def test_scaled_dot_product_attention(mask, shapes):
    q_shape, kv_shape = shapes
    q, k, v = _rand(*q_shape, seed=50), _rand(*kv_shape, seed=51), _rand(*kv_shape, seed=52)
    kwargs = {}
    if mask == "causal":
        kwargs["is_causal"] = True
    elif mask in ("bool", "bool_full_row"):
        m = torch.rand(q_shape[-2], kv_shape[-2], generator=_gen(53)) > 0.3
        m[:, 0] = True
        if mask == "bool_full_row":
            m[0] = False  # every key masked for the first query
            if tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) < (2, 5):
                m[0, 0] = True  # torch < 2.5 gives NaN there (no safe softmax)
        kwargs["attn_mask"] = m
    elif mask == "float":
        kwargs["attn_mask"] = torch.randn(q_shape[-2], kv_shape[-2], generator=_gen(54), dtype=D)
    _same_values_and_grads(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kwargs),
                           lambda q, k, v: ops.scaled_dot_product_attention(q, k, v, **kwargs), [q, k, v])


if __name__ == "__main__":  # the device check's own process (see device_results)
    import json as _json
    import warnings as _warnings

    _warnings.simplefilter("ignore")
    print(_json.dumps(_run_device_cases()))


# --------------------------------------------------------------------------- applying: patch, replaced, undo
class _Net(torch.nn.Module):
    """Touches a swapped module, a functional call and a Tensor method that have replacements."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.GroupNorm(4, 8)
        self.rnn = torch.nn.GRU(8, 6, batch_first=True)
        self.head = torch.nn.Linear(6, 1)

    def forward(self, x):
        y = self.norm(self.conv(x))
        y = y + 0.1 * y.std(dim=1, keepdim=True)
        seq = y.mean(2).transpose(1, 2)  # (batch, width, channels)
        out, _ = self.rnn(seq)
        return self.head(out[:, -1]).squeeze(1)


def _net_and_batch():
    torch.manual_seed(0)
    model = _Net().double()
    x = torch.randn(2, 3, 5, 5, generator=_gen(60), dtype=D)
    y = torch.rand(2, generator=_gen(61), dtype=D)
    return model, x, y


def _train(model, optimizer, x, y, steps):
    for _ in range(steps):
        loss = F.binary_cross_entropy_with_logits(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return loss


def test_patch_swaps_and_undo_restores():
    from dmlprof import patch
    from dmlprof.replacements import patching as patch_module

    model, x, y = _net_and_batch()
    keys = list(model.state_dict())
    reference = model(x)
    handle = patch(model)
    assert type(model.norm).__name__ == "DmlSafeGroupNorm" and isinstance(model.norm, torch.nn.GroupNorm)
    assert type(model.rnn).__name__ == "DmlSafeGRU" and "forward" in vars(model)
    assert list(model.state_dict()) == keys
    seen = {}
    original_handlers = dict(patch_module.HANDLERS)
    try:  # count which replacements ran, through the same table the mode uses
        for func, handler in original_handlers.items():
            patch_module.HANDLERS[func] = (lambda h, name: lambda *a, **k: (seen.__setitem__(name, 1), h(*a, **k))[1])(
                handler, getattr(func, "__name__", str(func)))
        patched = model(x)
    finally:
        patch_module.HANDLERS.clear()
        patch_module.HANDLERS.update(original_handlers)
    assert {"group_norm", "std", "gru"} <= set(seen)
    assert torch.allclose(patched, reference, atol=1e-10)
    handle.undo()
    assert type(model.norm) is torch.nn.GroupNorm and type(model.rnn) is torch.nn.GRU
    assert "forward" not in vars(model)
    assert torch.allclose(model(x), reference)


def test_patch_context_manager_covers_loss_and_undoes():
    import dmlprof

    model, x, y = _net_and_batch()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    with dmlprof.patch(model, optimizer) as handle:
        assert type(optimizer).__name__ == "DmlSafeAdamW"
        F.binary_cross_entropy_with_logits(model(x), y).backward()
        calls = handle._mode.replaced_calls
        assert calls.get("binary_cross_entropy_with_logits") == 1  # the loss, outside the model
        optimizer.step()
        assert calls.get("lerp_", 0) + calls.get("_foreach_lerp_", 0) >= 1
    assert type(optimizer) is torch.optim.AdamW and type(model.norm) is torch.nn.GroupNorm
    assert handle.applied == []


@pytest.mark.parametrize("name,kwargs", [("Adam", {"amsgrad": True}), ("Adamax", {}), ("NAdam", {}), ("RAdam", {})])
def test_patched_optimizers_step_like_the_originals(name, kwargs):
    from dmlprof.replacements import patch_optimizer

    runs = []
    for patched in (False, True):
        model, x, y = _net_and_batch()
        optimizer = getattr(torch.optim, name)(model.parameters(), lr=1e-2, foreach=True, **kwargs)
        if patched:
            patch_optimizer(optimizer)
        _train(model, optimizer, x, y, 3)
        runs.append(list(model.parameters()))
    for p_plain, p_patched in zip(*runs):
        assert torch.allclose(p_plain, p_patched, atol=1e-12)


@pytest.mark.parametrize("foreach", [False, True])
def test_patched_optimizer_keeps_state_and_matches(foreach):
    """Two plain steps, then patch: the third step continues from the same moments as an unpatched run."""
    from dmlprof.replacements import patch_optimizer

    model_a, x, y = _net_and_batch()
    model_b, _, _ = _net_and_batch()
    opt_a = torch.optim.AdamW(model_a.parameters(), lr=1e-2, foreach=foreach)
    opt_b = torch.optim.AdamW(model_b.parameters(), lr=1e-2, foreach=foreach)
    _train(model_a, opt_a, x, y, 2)
    _train(model_b, opt_b, x, y, 2)
    moments = [s["exp_avg"].clone() for s in opt_b.state.values()]
    handle = patch_optimizer(opt_b)
    assert all(torch.equal(m, s["exp_avg"]) for m, s in zip(moments, opt_b.state.values()))  # nothing reset
    _train(model_a, opt_a, x, y, 1)
    _train(model_b, opt_b, x, y, 1)
    for p_a, p_b in zip(model_a.parameters(), model_b.parameters()):
        assert torch.allclose(p_a, p_b, atol=1e-12)
    assert all(float(s["step"]) == 3 for s in opt_b.state.values())
    plain = torch.optim.AdamW(model_a.parameters(), lr=1e-2)
    plain.load_state_dict(opt_b.state_dict())  # the state dict is the original class's
    handle.undo()
    assert type(opt_b) is torch.optim.AdamW


def test_fused_optimizer_switches_to_foreach_and_back():
    from dmlprof.replacements import patch_optimizer

    model, x, y = _net_and_batch()
    model = model.float()
    try:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    except (RuntimeError, ValueError) as exc:  # fused needs a supported device on some torch versions
        pytest.fail(f"fused AdamW unavailable on the CPU here: {exc}")
    handle = patch_optimizer(optimizer)
    assert all(g["fused"] is False and g["foreach"] is True for g in optimizer.param_groups)
    handle.undo()
    assert all(g["fused"] is True for g in optimizer.param_groups)


def test_patch_rejects_non_modules():
    import dmlprof
    from dmlprof.errors import DmlprofError

    with pytest.raises(DmlprofError):
        dmlprof.patch("not a model")


def test_advice_names_replacement_for_reported_fallbacks():
    from dmlprof.replacements import advice_for, advice_for_hotspot

    lerp = advice_for("aten::lerp.Scalar_out")
    assert "only resets its moments" in lerp and "falls back once per parameter" in lerp and "dmlprof.patch" in lerp
    assert "group_norm" in advice_for("aten::native_group_norm_backward")
    assert advice_for("aten::mm") is None
    assert advice_for_hotspot(["aten::mm", "aten::_embedding_bag.out"]).startswith("nn.EmbeddingBag")
    assert advice_for_hotspot(["aten::mm"]) is None


def test_every_table_fallback_op_named_in_catalog_exists_in_the_table():
    """Catalog entries name real DirectML fallbacks (or composites over them), not typos."""
    from dmlprof.replacements import CATALOG
    from dmlprof.tables import load_table

    table = load_table("dml")
    known = {op.split(".", 1)[0] for op in table.ops()}
    for entry in CATALOG:
        for op in entry.removes:
            assert op in known, f"{entry.name}: {op} is not an op of the DirectML table"


def test_patched_model_pickles_and_loads_in_a_fresh_process(tmp_path):
    import subprocess
    import sys

    import dmlprof

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.GroupNorm(2, 4))
    optimizer = torch.optim.AdamW(model.parameters())
    dmlprof.patch(model, optimizer)
    path = tmp_path / "model.pt"
    torch.save({"model": model, "optimizer": optimizer}, path)
    code = ("import torch, sys; d = torch.load(sys.argv[1], weights_only=False); "
            "m = d['model']; m(torch.randn(1, 3, 5, 5)); "
            "print(type(m[1]).__name__, type(d['optimizer']).__name__, type(vars(m)['forward']).__name__)")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["DmlSafeGroupNorm", "DmlSafeAdamW", "_ReplacedForward"]


def test_forward_and_step_stop_entering_the_mode_when_nothing_is_replaced():
    import dmlprof
    from dmlprof.replacements import patching

    plain = torch.nn.Sequential(torch.nn.Linear(3, 2))
    sgd = torch.optim.SGD(plain.parameters(), lr=0.1, momentum=0.9)
    busy, x, y = _net_and_batch()
    adamw = torch.optim.AdamW(busy.parameters(), foreach=True)
    handles = [dmlprof.patch(plain, sgd), dmlprof.patch(busy, adamw)]
    for _ in range(patching.IDLE_CALLS_BEFORE_BYPASS + 2):
        plain(torch.ones(1, 3)).sum().backward()
        sgd.step()
        _train(busy, adamw, x, y, 1)
    assert vars(plain)["forward"]._dmlprof_idle_calls == patching.IDLE_CALLS_BEFORE_BYPASS  # bypassed since
    assert vars(sgd)["_dmlprof_idle_calls"] == patching.IDLE_CALLS_BEFORE_BYPASS
    assert vars(busy)["forward"]._dmlprof_idle_calls == 0  # x.std() and the GRU are replaced every call
    assert vars(adamw)["_dmlprof_idle_calls"] == 0  # lerp every step
    for handle in handles:
        handle.undo()
    assert "_dmlprof_idle_calls" not in vars(sgd)
