"""Prediction (``scan --target dml``): table-driven verdicts on a stand-in device, without a device.

Each test writes a small model file, predicts its training step and checks
what a DirectML user would see: which calls fall back and why, including the
device-dependent paths a CPU trace gets wrong (optimizer foreach, SDPA's math
path, SiLU's decomposed backward, the LSTM cell, composites hiding fallbacks).
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dmlprof.analysis.core import fallback_op_set
from dmlprof.errors import DmlprofError
from dmlprof.predict import PredictionError, predict_scan
from dmlprof.session import Session

pytestmark = pytest.mark.live  # torch-version-sensitive: runs on torch 2.4.1 too


def _model_file(tmp_path: Path, body: str, name: str = "model.py", extra: str = "") -> Path:
    path = tmp_path / name
    path.write_text("import torch\nfrom torch import nn\nfrom torch.nn import functional as F\n"
                    + textwrap.dedent(body) + textwrap.dedent(extra), encoding="utf-8")
    return path


def _linear_model(tmp_path: Path, forward: str, before: str = "") -> Path:
    """A model file of one ``nn.Linear(8, 4)`` (``self.lin``) whose ``forward(self, x)`` body is ``forward``;
    ``before`` goes above the class (an op defined at import)."""
    body = textwrap.indent(textwrap.dedent(forward).strip() + "\n", " " * 8)
    return _model_file(tmp_path, textwrap.dedent(before) + "class Model(nn.Module):\n    def __init__(self):\n"
                       "        super().__init__()\n        self.lin = nn.Linear(8, 4)\n    def forward(self, x):\n"
                       + body + "def build_model():\n    return Model()\ndef make_batch(batch_size):\n"
                       "    return torch.randn(batch_size, 8), torch.randn(batch_size)\n")


LINEAR_BATCH = """
def make_batch(batch_size):
    return torch.randn(batch_size, 8), torch.randint(0, 4, (batch_size,))
"""


def _ops(session) -> set:
    return set(session.ops["op"])


def test_groupnorm_adamw_fallbacks_named_with_the_composite_that_hides_them(tmp_path):
    path = _model_file(tmp_path, """
        def build_model():
            return nn.Sequential(nn.Conv2d(3, 8, 3), nn.GroupNorm(2, 8), nn.SiLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 4))
        def make_batch(batch_size):
            return torch.randn(batch_size, 3, 8, 8), torch.randint(0, 4, (batch_size,))
        def make_optimizer(params):
            return torch.optim.AdamW(params)
        """)
    session = predict_scan(path, batch_size=2)
    ops = session.ops
    assert fallback_op_set(ops) == {"aten::native_group_norm_backward", "aten::lerp.Scalar_out"}
    # AdamW takes the foreach path on privateuseone; the per-tensor lerp inside it falls back once per parameter.
    lerp = ops[ops["op"] == "aten::_foreach_lerp_.Scalar"]
    assert len(lerp) == 1 and lerp["verdict"].iloc[0] == "fallback"
    assert lerp["fallback_calls"].iloc[0] == 6  # conv, GroupNorm and linear: weight and bias each
    # SiLU's backward decomposes on the device: no silu_backward call, no false alarm.
    assert "aten::silu_backward" not in _ops(session)
    # Convolution reaches the backend's own kernel path (convolution_overrideable, native on DirectML).
    assert ops.loc[ops["op"] == "aten::convolution", "verdict"].eq("device").all()


def test_session_is_marked_predicted_with_the_table_and_no_times(tmp_path):
    path = _model_file(tmp_path, """
        def build_model():
            return nn.Linear(8, 4)
        """, extra=LINEAR_BATCH)
    session = predict_scan(path, batch_size=4, steps=2)
    meta = session.meta.to_dict()
    assert meta["mode"] == "predicted" and meta["backend"] == "dml"
    assert meta["table_version"] == "torch-directml 0.2.5.dev240914 (read against torch 2.4.1)"
    assert meta["steps"] == 2 and set(session.ops["step"]) == {0, 1}
    assert set(session.ops["evidence"]) == {"table"}
    assert session.ops["time_ns"].eq(0).all() and session.ops["start_ns"].eq(0).all()
    assert session.ops["device_time_ns"].isna().all()
    assert {"forward", "backward", "optimizer"} <= set(session.ops["phase"])
    forward = session.ops[session.ops["phase"] == "forward"]
    assert set(forward.loc[forward["op"] == "aten::addmm", "module"]) == {"Linear"}  # the loss runs outside modules
    # Same reports as a live scan: the session saves and loads.
    saved = Session.load(session.save(tmp_path / "s.session.json"))
    assert saved.meta.to_dict()["table_version"] == meta["table_version"] and len(saved.ops) == len(session.ops)


def test_optimizer_choice_is_the_devices_foreach_not_the_cpus_loop(tmp_path):
    body = """
        def build_model():
            return nn.Linear(8, 4)
        def make_optimizer(params):
            return torch.optim.Adam(params, foreach={foreach})
        """
    default = predict_scan(_model_file(tmp_path, body.format(foreach=None), "a.py", LINEAR_BATCH), batch_size=2)
    loop = predict_scan(_model_file(tmp_path, body.format(foreach=False), "b.py", LINEAR_BATCH), batch_size=2)
    assert "aten::_foreach_lerp_.Scalar" in _ops(default)  # a CPU trace would show the per-tensor loop
    assert "aten::lerp_.Scalar" not in _ops(default)
    looped = loop.ops[loop.ops["op"] == "aten::lerp_.Scalar"]
    assert len(looped) == 2 and looped["verdict"].eq("fallback").all()  # weight and bias
    assert fallback_op_set(default.ops) == fallback_op_set(loop.ops) == {"aten::lerp.Scalar_out"}


def test_attention_takes_the_math_path(tmp_path):
    path = _model_file(tmp_path, """
        class Attend(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(16, 16)
            def forward(self, x):
                q = self.proj(x).view(x.shape[0], 5, 2, 8).transpose(1, 2)
                return F.scaled_dot_product_attention(q, q, q).sum((1, 2))
        def build_model():
            return Attend()
        def make_batch(batch_size):
            return torch.randn(batch_size, 5, 16), torch.randn(batch_size, 8)
        """)
    ops = _ops(predict_scan(path, batch_size=2))
    assert not any("flash_attention" in op or "efficient_attention" in op for op in ops)
    assert "aten::_fused_sdp_choice" not in ops
    assert "aten::bmm" in ops and any("softmax" in op for op in ops)


def test_lstm_cell_falls_back_to_a_cpu_without_a_kernel_and_the_step_would_fail(tmp_path):
    from dmlprof.runner import ScanStopped

    path = _model_file(tmp_path, """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(4, 8, batch_first=True)
            def forward(self, x):
                return self.lstm(x)[0][:, -1]
        def build_model():
            return Net()
        def make_batch(batch_size):
            return torch.randn(batch_size, 3, 4), torch.randn(batch_size, 8)
        """)
    with pytest.raises(ScanStopped) as stopped:
        predict_scan(path, batch_size=2)
    session = stopped.value.session
    assert session.meta.to_dict()["partial"] and session.meta.to_dict()["failed_op"] == "aten::_thnn_fused_lstm_cell"
    assert fallback_op_set(session.ops) == {"aten::_thnn_fused_lstm_cell"}
    assert session.ops["op"].iloc[-1] == "aten::_thnn_fused_lstm_cell"
    # The same one-line explanation a scan on the device gives.
    assert "fused cell has no DirectML kernel" in stopped.value.one_line()


def test_data_dependent_ops_run_on_placeholders_and_are_listed(tmp_path):
    """Beyond the values budget (here none at all) an output sized by data is made up, and listed."""
    path = _linear_model(tmp_path, """
                out = self.lin(x)
                keep = out[out > 0]          # shape decided by the data
                return out.sum(1) + keep.sum() * 0
        """)
    session = predict_scan(path, batch_size=3, values_budget_bytes=0)
    assert session.meta.to_dict()["placeholder_ops"], session.meta
    assert any("made them up" in note for note in session.meta.to_dict()["notes"])
    assert "aten::index.Tensor" in _ops(session) or "aten::masked_select" in _ops(session)


def test_model_built_on_meta_needs_no_memory(tmp_path):
    path = _model_file(tmp_path, """
        def build_model():
            with torch.device("meta"):
                return nn.Sequential(nn.Linear(8, 4096), nn.ReLU(), nn.Linear(4096, 4))
        """, extra=LINEAR_BATCH)
    session = predict_scan(path, batch_size=2)
    assert session.meta.to_dict()["parameters"] == 8 * 4096 + 4096 + 4096 * 4 + 4
    assert not session.meta.to_dict()["placeholder_ops"]


def test_stand_in_registers_where_torch_directml_does():
    """Its own kernels for the table's names, the fallback where torch has no composite, nothing elsewhere."""
    from dmlprof.predict.standin import StandIn
    from dmlprof.tables import OpTable

    table = OpTable(backend="dml", package="torch-directml", package_version="x", torch_version="2.4.1",
                    dispatch_key="PrivateUse1", ops={"aten::add.Tensor": "native"},
                    registrations={"PrivateUse1": ["aten::mul.Tensor", "aten::alias"]})
    standin = StandIn(table, [])
    assert standin._wanted("aten::mul.Tensor")  # registered by the backend
    assert not standin._wanted("aten::alias")  # torch's composite makes the same alias, in C++
    assert not standin._wanted("aten::linear")  # composite implicit: decomposes above the backend
    assert not standin._wanted("aten::_foreach_lerp_.Scalar")  # composite explicit: torch's loop runs
    assert standin._wanted("aten::lerp.Scalar_out")  # no kernel anywhere for the device: the fallback


def test_guard_slots_read_from_a_header(tmp_path):
    from dmlprof.predict.device import guard_slots

    header = tmp_path / "h.h"
    header.write_text(textwrap.dedent("""
        struct C10_API DeviceGuardImplInterface {
          virtual ~DeviceGuardImplInterface() = default;
          virtual DeviceType type() const = 0;
          // virtual Device commented() const = 0;
          virtual Stream getStream(Device) const noexcept = 0;
          virtual Stream getDefaultStream(Device) const {
            TORCH_CHECK(false, "no");
          }
          virtual void record(
              void** event, const Stream& stream) const {}
        };
        """))
    # The destructor first takes two slots (complete and deleting), then type, getStream, getDefaultStream.
    assert guard_slots(header) == (3, 4, 6)
    header.write_text(header.read_text().replace("virtual ~DeviceGuardImplInterface() = default;", "")
                      .replace("virtual void record(", "virtual ~DeviceGuardImplInterface() = default;\n virtual void record("))
    assert guard_slots(header) == (1, 2, 6)


def test_bad_inputs_are_one_line_errors(tmp_path):
    model = _model_file(tmp_path, "def build_model():\n    return nn.Linear(8, 4)\n", extra=LINEAR_BATCH)
    with pytest.raises(PredictionError, match="unknown target"):
        predict_scan(model, target="tpu")
    with pytest.raises(DmlprofError, match="--steps"):
        predict_scan(model, steps=0)


def test_wrapped_numbers_reach_the_device_kernels_as_tensors(tmp_path):
    """take_along_dim wraps its dim size (remainder(indices, 5)): the prediction once crashed there."""
    path = _model_file(tmp_path, """
        class Gather(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(4, 5))
            def forward(self, x):
                index = torch.tensor([[0, 1, -1, 2, 3]] * 4, device=x.device)
                return torch.take_along_dim(self.w, index, dim=1).sum(1)[:1] * x.sum(1)
        def build_model():
            return Gather()
        def make_batch(batch_size):
            return torch.randn(batch_size, 8), torch.randn(batch_size)
        """)
    session = predict_scan(path, batch_size=2, steps=1, warmup=0)
    assert not session.meta.to_dict().get("partial"), session.meta.to_dict().get("partial_reason")
    assert "aten::gather" in _ops(session)  # (torch >= 2.5 reaches it through remainder.Scalar)


def test_guarded_edge_cases_are_not_taken_on_placeholder_values(tmp_path):
    """cov zeroes its normalisation only when it is <= 0 (is_scalar_tensor_true, an equal() on values)."""
    path = _model_file(tmp_path, """
        class Cov(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(8, 3)
            def forward(self, x):
                return torch.cov(self.lin(x).T).sum().expand(x.shape[0])
        def build_model():
            return Cov()
        def make_batch(batch_size):
            return torch.randn(batch_size, 8), torch.randn(batch_size)
        """)
    session = predict_scan(path, batch_size=4, steps=1, warmup=0, values_budget_bytes=0)
    assert "aten::equal" in _ops(session)
    assert "aten::zero_" not in _ops(session), "the prediction took the branch for a non-positive normalisation"


def test_views_share_their_base_storage_and_placeholders_keep_strides():
    """The autograd engine adds a gradient in place only when nothing else shares its storage: a view
    made on fresh storage would make the prediction call add_ where the device calls add."""
    import subprocess
    import sys

    probe = textwrap.dedent("""
        import torch
        from dmlprof.predict.device import device_name, ensure_device
        from dmlprof.predict.placeholders import placeholder
        from dmlprof.predict.standin import StandIn
        from dmlprof.tables import load_table
        ensure_device()
        StandIn(load_table("dml"), [], device_name()).install()
        x = torch.empty(3, 4, device=device_name())
        view, transposed = x.view(12), x.t()
        assert torch._C.TensorBase.untyped_storage(view)._cdata == torch._C.TensorBase.untyped_storage(x)._cdata, "view on fresh storage"
        assert torch._C.TensorBase.untyped_storage(transposed)._cdata == torch._C.TensorBase.untyped_storage(x)._cdata, "t() on fresh storage"
        assert transposed.stride() == (1, 4) and placeholder(transposed).stride() == (1, 4)
        print("ok")
        """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]


def test_index_less_devices_and_lazy_views_copy_as_on_a_device():
    """Re-probe 12, in one process (each costs one): on torch < 2.6 the stand-in's device guard answered
    "meta" for an index-less device, so 2.4.1's ``h.new_tensor(2.0)`` made a meta tensor and the step failed
    "Tensor on device meta is not on the expected device"; and a complex parameter under --target xpu (its
    gradient a conjugate view) died of SIGSEGV: clone -> copy_ -> _copy_from -> the Conjugate fallback's
    clone -> ... for ever."""
    import subprocess
    import sys

    probe = textwrap.dedent("""
        import torch
        from dmlprof.predict.device import device_name, ensure_device
        from dmlprof.predict.standin import StandIn
        from dmlprof.predict.targets import TargetStandIn
        from dmlprof.tables import load_table
        from dmlprof.targets import semantics_for
        ensure_device()
        real = torch.randn(3)
        standin = StandIn(load_table("dml"), [], device_name())
        standin.install()
        on_device = real.to(device_name())
        for made in (on_device.new_tensor(2.0), on_device.new_zeros(()), torch.tensor(2.0).to(device_name())):
            assert made.device == torch.device(device_name(), 0), made.device
        assert torch.equal(torch._neg_view(on_device).clone().cpu(), -real)
        standin.remove()
        TargetStandIn(semantics_for("xpu", environ={}), [], device_name()).install()
        held = torch.randn(3, dtype=torch.complex64)
        on_device = held.to(device_name())
        assert torch.equal(on_device.conj().clone().cpu(), held.conj())
        assert torch.equal(on_device.conj().resolve_conj().cpu(), held.conj())
        constant = torch.full((3,), 1 + 2j, dtype=torch.complex64, device=device_name())
        assert torch.equal(constant.conj().clone().cpu(), torch.full((3,), 1 - 2j))
        assert torch.equal(torch._neg_view(constant).clone().cpu(), torch.full((3,), -1 - 2j))
        print("ok")
        """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "ok", (done.returncode, done.stderr[-2000:])


def test_a_sparse_result_on_the_device_fails_as_on_torch_directml(tmp_path):
    path = _linear_model(tmp_path, """
                return self.lin(x).to_sparse().to_dense().sum(1)
        """)
    with pytest.raises(DmlprofError, match="DirectML has no sparse tensors"):
        predict_scan(path, batch_size=2, steps=1, warmup=0)


def test_checks_on_values_pass_as_they_do_on_real_data(tmp_path):
    """A check written as allclose (linalg.eig's backward; users' own asserts) holds on placeholders."""
    path = _linear_model(tmp_path, """
                out = self.lin(x)
                if not torch.allclose(out, out.clone()):
                    raise RuntimeError("the model's own check failed")
                return out.sum(1)
        """)
    session = predict_scan(path, batch_size=2, steps=1, warmup=0, values_budget_bytes=0)
    assert not session.meta.to_dict().get("partial"), session.meta.to_dict().get("partial_reason")
    assert "aten::allclose" in _ops(session) and session.meta.to_dict()["placeholder_ops"].get("aten::allclose")


def test_a_filter_keeps_elements_so_the_path_after_it_is_the_working_programs(tmp_path):
    """Which elements a filter keeps depends on values; on zeros it would keep none, and code after
    it would take its empty-input exit (torchvision's batched_nms returns early on no boxes)."""
    path = _linear_model(tmp_path, """
                out = self.lin(x)
                keep = torch.where(out[:, 0] > 0)[0]
                if keep.numel() == 0:
                    return out.sum(1)
                return out.sum(1) + out[keep].logsumexp(0).sum() * 0 + out[out > 0].sum() * 0
        """)
    session = predict_scan(path, batch_size=3, steps=1, warmup=0, values_budget_bytes=0)
    ops = session.ops
    assert "aten::logsumexp" in set(ops["op"]), "the prediction took the empty-filter exit"
    # every row kept (3 of 3), and every element of the masked selection summed after it (12 of 12)
    assert "[[3, 4], [3]]" in ops[ops["op"] == "aten::index.Tensor"]["shapes"].tolist()
    assert "[[12]]" in ops[ops["op"] == "aten::sum"]["shapes"].tolist(), ops[ops["op"] == "aten::sum"]["shapes"]


def test_ops_an_extension_defines_at_import_are_covered_in_warm_up_steps(tmp_path):
    """A model file that imports an extension (torchvision) defines ops after the stand-in is installed:
    the warm-up steps must find their kernels too, not fail and lose a measured step."""
    path = _linear_model(tmp_path, """
                return self.lin(torch.ops.dmlprof_test_import.twice(x)).sum(1)
        """, before="""
        try:  # a CPU kernel only, and the autograd kernel custom_op gives every op (torch 2.4 needs one)
            @torch.library.custom_op("dmlprof_test_import::twice", mutates_args=(), device_types="cpu")
            def twice(x: torch.Tensor) -> torch.Tensor:
                return x * 2
        except RuntimeError:  # defined by an earlier import in this process
            pass
        """)
    session = predict_scan(path, batch_size=2, steps=2, warmup=1)
    assert session.meta.to_dict()["steps"] == 2, session.meta.to_dict().get("notes")
    assert not any("warm-up step failed" in note for note in session.meta.to_dict().get("notes") or [])
    assert "dmlprof_test_import::twice" in fallback_op_set(session.ops)


def test_a_test_for_an_exact_float_value_matches_nothing(tmp_path):
    """prod's backward asks ``(input == 0).nonzero()``: on a working program's values no input is exactly
    zero, and the gradient is ``grad * result / input``, not the zero-handling path."""
    path = _linear_model(tmp_path, """
                out = self.lin(x)
                return torch.prod(out).expand(x.shape[0]) + out[torch.isnan(out)].sum()
        """)
    session = predict_scan(path, batch_size=3, steps=1, warmup=0, values_budget_bytes=0)
    ops = session.ops
    backward = set(ops[ops["phase"] == "backward"]["op"])
    assert "aten::div.Tensor" in backward and "aten::zeros_like" not in backward, sorted(backward)
    assert "[[0]]" in ops[ops["op"] == "aten::sum"]["shapes"].tolist()  # no NaN selected


@pytest.mark.parametrize("written, known", [(False, True), (True, False)])
def test_a_value_filled_in_is_known_until_something_writes_it(tmp_path, written, known):
    """transformers builds an all-ones attention mask and asks ``mask.all()`` before leaving the causal
    mask to SDPA: a constant filled in on the device is read as what it is, not made up; once anything
    writes into it (here through a view) its value is unknown again."""
    path = _linear_model(tmp_path, f"""
                out = self.lin(x)
                mask = torch.ones(x.shape[0], 4, device=x.device)
                if {written}:
                    mask[:, 0] = out[:, 0].detach()
                if mask.bool().all():
                    return out.logsumexp(1)
                return out.sum(1)
        """)
    session = predict_scan(path, batch_size=3, steps=1, warmup=0, values_budget_bytes=0)
    assert ("aten::logsumexp" in _ops(session)) is known
    made_up = (session.meta.to_dict()["placeholder_ops"] or {}).get("aten::_local_scalar_dense", 0)
    assert (made_up == 0) is known, session.meta.to_dict()["placeholder_ops"]


def test_the_indices_a_filter_found_are_read_as_found(tmp_path):
    """Mixture-of-experts layers loop over the experts a router hit (``for i in hit.nonzero():
    self.experts[i]``): each index read back must be the one the filter found, in turn, not index 0
    every time (which trains one expert four times: extra gradient accumulations in backward)."""
    path = _model_file(tmp_path, """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.experts = nn.ModuleList(nn.Linear(8, 4, bias=False) for _ in range(4))
                self.router = nn.Linear(8, 4)
            def forward(self, x):
                hit = self.router(x).sum(0) > 0
                out = x.new_zeros(x.shape[0], 4)
                visited = []
                for index in hit.nonzero():
                    out = out + self.experts[index](x)
                    visited.append(int(index))
                if visited != list(range(4)) or hit.nonzero().flatten().tolist() != visited:
                    raise RuntimeError(f"read back as {visited}")
                return out.sum(1)
        def build_model():
            return Model()
        def make_batch(batch_size):
            return torch.randn(batch_size, 8), torch.randn(batch_size)
        """)
    session = predict_scan(path, batch_size=3, steps=1, warmup=0, values_budget_bytes=0)
    assert not session.meta.to_dict().get("partial"), session.meta.to_dict().get("partial_reason")
    ops = session.ops
    # one weight gradient per expert, none accumulated into another's
    backward_mm = ops[(ops["phase"] == "backward") & (ops["op"] == "aten::mm")]
    assert backward_mm["module"].str.contains("experts").sum() == 4, backward_mm[["module", "shapes"]]
    assert "aten::add_.Tensor" not in set(ops[ops["module"].str.contains("experts", na=False)]["op"])


def test_a_convolution_on_channels_last_activations_is_laid_out_as_the_devices(tmp_path):
    """ConvNeXt and SegFormer convolve permuted (channels-last) activations; the device's convolution
    answers channels-last there, and ``flatten`` of it is then an alias of strides, not a view, and
    adaptive pooling restrides its mean."""
    path = _model_file(tmp_path, """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(4, 6, 3, padding=1)
            def forward(self, x):
                y = self.conv(x.permute(0, 3, 1, 2))
                if not y.is_contiguous(memory_format=torch.channels_last):
                    raise RuntimeError("the convolution's output is not channels-last")
                return y.flatten(2).sum((1, 2))
        def build_model():
            return Model()
        def make_batch(batch_size):
            return torch.randn(batch_size, 5, 5, 4), torch.randn(batch_size)
        """)
    session = predict_scan(path, batch_size=2, steps=1, warmup=0)
    assert not session.meta.to_dict().get("partial"), session.meta.to_dict().get("partial_reason")


def _on_cpu(path: Path, batch_size: int):
    """The model file's model and batch, built on the CPU with its own seeds."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"cpu_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_model(), module.make_batch(batch_size)[0]


def test_a_branch_that_reads_a_tensor_takes_the_path_its_values_decide(tmp_path):
    """GIVEN a forward that loops as many times as a tensor says (a mixture of experts' tokens per expert)
    WHEN it is predicted with values (the default)
    THEN it loops exactly as on the CPU, reads no made-up value and marks no call a guess."""
    path = _model_file(tmp_path, """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.lin = nn.Linear(8, 4)
            def forward(self, x):
                out = self.lin(x)
                for _ in range(int((out > 0).sum())):
                    out = torch.sigmoid(out)
                return out.sum(1)
        def build_model():
            return Model()
        def make_batch(batch_size):
            generator = torch.Generator().manual_seed(1)
            return torch.randn(batch_size, 8, generator=generator), torch.randn(batch_size, generator=generator)
        """)
    model, x = _on_cpu(path, 3)
    expected = int((model.lin(x) > 0).sum())
    assert 0 < expected < 12  # the data decides: neither every element nor none
    session = predict_scan(path, batch_size=3, steps=1, warmup=0)
    ops = session.ops
    assert (ops[ops["phase"] == "forward"]["op"] == "aten::sigmoid").sum() == expected
    assert not session.meta.to_dict()["placeholder_ops"] and session.meta.prediction.guess is None


def test_a_write_through_an_alias_is_seen_by_the_tensor_it_aliases(tmp_path):
    """``p.data`` and ``p.detach()`` share ``p``'s storage without being views of it: a value written
    through them is what ``p`` holds (an EMA written through ``.detach()``, an init through ``.data``)."""
    path = _linear_model(tmp_path, """
                with torch.no_grad():
                    self.lin.weight.data.fill_(2.0)
                    self.lin.bias.detach().zero_()
                if bool((self.lin.weight == 2.0).all()) and float(self.lin.bias.abs().sum()) == 0.0:
                    return torch.sigmoid(self.lin(x)).sum(1)
                return self.lin(x).sum(1)
        """)
    session = predict_scan(path, batch_size=2, steps=1, warmup=0)
    assert "aten::sigmoid" in _ops(session)
    assert not session.meta.to_dict()["placeholder_ops"], session.meta.to_dict()["placeholder_ops"]


def test_an_empty_tensor_an_op_overwrites_in_place_holds_what_it_wrote(tmp_path):
    """``empty_like(p).scatter_(0, p, arange)`` (every packed sequence's inverse permutation, re-probe 14 case 3):
    the written elements do not depend on torch.empty's bytes, so what is read back later is no guess."""
    path = _linear_model(tmp_path, """
                order = torch.argsort(x[:, 0])
                inverse = torch.empty_like(order).scatter_(0, order, torch.arange(order.numel(), device=x.device))
                if int(inverse[int(order[0])]) == 0:
                    return torch.sigmoid(self.lin(x)).sum(1)
                return self.lin(x).sum(1)
        """)
    session = predict_scan(path, batch_size=3, steps=1, warmup=0)
    assert session.meta.prediction.guess is None, session.meta.prediction.guess
    assert "aten::sigmoid" in _ops(session)


def test_an_empty_tensor_written_in_part_still_holds_made_up_values(tmp_path):
    """Re-probe 15 (case 26): a scatter_ naming only some elements of a fresh torch.empty leaves the rest arbitrary
    on the device too: reading them is a guess."""
    path = _linear_model(tmp_path, """
                part = torch.empty(6, dtype=torch.long, device=x.device)
                part.scatter_(0, torch.tensor([0, 1], device=x.device), torch.tensor([5, 7], device=x.device))
                if int(part[4]) == 0:
                    return torch.sigmoid(self.lin(x)).sum(1)
                return self.lin(x).sum(1)
        """)
    guess = predict_scan(path, batch_size=3, steps=1, warmup=0).meta.prediction.guess
    assert guess is not None and "torch.empty" in guess.why, guess

def test_values_beyond_the_budget_are_made_up_and_every_call_after_is_marked(tmp_path):
    """GIVEN a forward that reads a tensor, predicted with no room for values
    WHEN the value is made up
    THEN the session says where and why, and the report marks the rows holding calls from there on."""
    from dmlprof.render.terminal import render_text
    from dmlprof.report import build_report

    path = _linear_model(tmp_path, """
                out = self.lin(x)
                if float(out.sum()) > 1e9:
                    out = out * 2
                return torch.sigmoid(out).sum(1)
        """)
    session = predict_scan(path, batch_size=2, steps=1, warmup=0, values_budget_bytes=0)
    guess = session.meta.prediction.guess
    assert guess is not None and guess.op == "aten::_local_scalar_dense"
    assert "values are off" in guess.why and guess.source.endswith("model.py:10"), guess
    ops = session.ops
    assert ops.loc[ops["seq"] == guess.first_seq, "op"].item() == "aten::_local_scalar_dense"
    report = build_report(session)
    assert report.guess.calls_after == (ops["seq"] >= guess.first_seq).sum()
    sigmoid = [row for row in report.ops if row.op == "aten::sigmoid"]
    addmm = [row for row in report.ops if row.op == "aten::addmm" and row.phase == "forward"]
    assert sigmoid[0].guessed and not addmm[0].guessed  # after the read, and before it
    text = render_text(session, width=200)
    assert "GUESS" in text and "came after a value the prediction made up" in text and "aten::sigmoid [guess]" in text
    assert Session.from_dict(session.to_dict()).meta.prediction.guess == guess  # saved and read back


def test_values_written_through_a_strided_view_land_in_its_base():
    """A kernel gets a slice with gaps as a contiguous copy (as torch's CPU fallback hands it over):
    what it writes there is copied back into the base, and the view keeps sharing the base's storage."""
    import subprocess
    import sys

    probe = textwrap.dedent("""
        import torch
        from dmlprof.predict.device import device_name, ensure_device
        from dmlprof.predict.standin import StandIn
        from dmlprof.tables import load_table
        ensure_device()
        StandIn(load_table("dml"), [], device_name()).install()
        x = torch.arange(12.0, device=device_name()).reshape(3, 4)  # (a bare .to() needs the runner on torch 2.4)
        view = x[:, ::2]
        view.mul_(10)
        assert torch._C.TensorBase.untyped_storage(view)._cdata == torch._C.TensorBase.untyped_storage(x)._cdata, "the view left its base"
        assert x.cpu().tolist() == [[0, 1, 20, 3], [40, 5, 60, 7], [80, 9, 100, 11]], x.cpu()
        out = torch.empty(0, device=device_name())
        torch.add(x[:, 1::2], 1, out=out)
        assert out.cpu().tolist() == [[2, 4], [6, 8], [10, 12]], out.cpu()
        print("ok")
        """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]
