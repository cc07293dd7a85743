"""``--target xpu`` and ``--target mps``: verdicts read from a torch wheel's registrations (docs/targets.md).

GIVEN a target's shipped table and its semantics module, WHEN a call (or a model's step) is judged, THEN the
verdict is what the registrations, the fallback lists and common_mps.py say.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from dmlprof.predict import known_targets, predict_scan
from dmlprof.runner import ScanStopped
from dmlprof.tables import targets as target_tables
from dmlprof.tables.targets import load_target_table, shipped_target_tables
from dmlprof.targets import semantics_for
from dmlprof.targets.base import FALLS_BACK, RAISES, RUNS

pytestmark = pytest.mark.own_process  # a stand-in device that cannot meet the emulated one (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]


# -- the tables ---------------------------------------------------------------------------------------
@pytest.mark.slow  # 45 s of the quick set on CI's 2 cores
@pytest.mark.parametrize("target", ["xpu", "mps"])
def test_each_table_says_what_torch_and_which_files_it_was_read_from(target):
    table = load_target_table(target)
    assert table.torch_version == shipped_target_tables()[target][-1]  # the newest shipped is the default
    assert "native_functions.yaml" in table.source["registrations"]
    assert table.source["fallback_list"]  # the origin of the always-on list, which no CPU wheel holds
    assert "not measured" in table.version_label()
    # every op of the always-on list is one the backend registered no kernel for
    assert table.cpu_fallback and all(table.kind(op) == "fallback" for op in table.cpu_fallback)


def test_the_xpu_table_of_torch_2_14_holds_torch_xpu_ops_29_fallbacks_and_the_yaml_xpu_entries():
    table = load_target_table("xpu", "2.14.1")
    assert len(table.cpu_fallback) == 29
    assert table.source["entries_naming_key"] == 782  # the yaml entries naming XPU, as the tool counted them


def test_the_xpu_table_of_torch_2_13_reads_intels_own_yaml_where_the_wheel_names_31_entries():
    older, newer = load_target_table("xpu", "2.13.0"), load_target_table("xpu", "2.14.1")
    assert older.source["entries_naming_key"] == 31  # before the registrations moved into torch (2.14)
    outside = older.doc["registered_outside_yaml"]
    assert len(outside) > 1000 and all("torch-xpu-ops" in origin or "pytorch/pytorch" in origin
                                       for origin in outside.values())
    assert older.kind("aten::add.Tensor") == newer.kind("aten::add.Tensor") == "native"
    # torch-xpu-ops 2.13 sent torch.cholesky to the CPU; torch 2.14's yaml no longer has the op (removed)
    assert older.kind("aten::cholesky") == "fallback" and newer.kind("aten::cholesky") is None


def test_target_torch_picks_the_table_and_the_session_says_which(tmp_path, linear_model_file):
    model = linear_model_file("return self.fc(x)")
    session = predict_scan(model, target="xpu", target_torch="2.13.0")
    assert session.meta.prediction.table_torch_version == "2.13.0"
    assert "torch 2.13.0" in session.meta.notes[0]
    from dmlprof.predict import PredictionError

    with pytest.raises(PredictionError, match="torch-directml 0.2.5 runs on torch 2.4.1 only"):
        predict_scan(model, target="dml", target_torch="2.14.1")
    script = tmp_path / "train.py"  # a script runs on the emulated device: --target-torch was silently ignored
    script.write_text("import torch\nprint(torch.ones(2).sum())\n", encoding="utf-8")
    with pytest.raises(PredictionError, match="torch-directml 0.2.5 runs on torch 2.4.1 only"):
        predict_scan(script, target="dml", target_torch="9.9")


@pytest.mark.parametrize("target, origin", [("xpu", "torch-xpu-ops"), ("mps", "pytorch/vision")])
def test_torchvision_s_device_kernels_are_registrations_too(target, origin):
    """nms and roi_align run on both devices (registered by torch-xpu-ops lazily, by torchvision for MPS):
    a prediction reading only aten's yaml would stop Faster R-CNN at nms."""
    table = load_target_table(target, "2.14.1")
    for op in ("torchvision::nms", "torchvision::roi_align", "torchvision::_roi_align_backward"):
        assert table.kind(op) == "native" and origin in table.doc["registered_outside_yaml"][op]
    assert semantics_for(target, environ={}).check_call("torchvision::nms", ("float32",)) == RUNS


def test_an_unknown_target_or_torch_is_a_usage_error():
    from dmlprof.errors import UsageError

    with pytest.raises(UsageError, match="no target table"):
        load_target_table("tpu")
    with pytest.raises(UsageError, match="no xpu table for torch 1.0"):
        load_target_table("xpu", "1.0")


# -- the semantics, call by call ----------------------------------------------------------------------
def test_an_op_xpu_registers_runs_and_one_on_its_fallback_list_falls_back():
    xpu = semantics_for("xpu", environ={})
    assert xpu.check_call("aten::add.Tensor", ("float32",)) == RUNS
    assert xpu.check_call("aten::linalg_eig", ("float32",)) == FALLS_BACK  # torch-xpu-ops' fallback_list


@pytest.mark.parametrize("value, verdict", [(None, RAISES), ("0", RAISES), ("1", FALLS_BACK)])
def test_an_op_xpu_lacks_raises_unless_its_fallback_variable_is_set(value, verdict):
    environ = {} if value is None else {"PYTORCH_ENABLE_XPU_FALLBACK": value}
    xpu = semantics_for("xpu", environ=environ)
    assert load_target_table("xpu").kind("aten::_add_relu.Tensor") == "missing"
    assert xpu.check_call("aten::_add_relu.Tensor", ("float32",)) == verdict
    assert ("set" if verdict == FALLS_BACK else "unset") in xpu.setting()


def test_mps_holds_no_float64_and_complex64_only_in_the_ops_common_mps_lists():
    mps = semantics_for("mps", environ={})
    refused = mps.refused_dtypes()
    assert torch.float64 in refused and torch.complex128 in refused and torch.float32 not in refused
    assert isinstance(refused[torch.float64](), TypeError)  # MPS raises a TypeError making one
    assert mps.check_call("aten::add.Tensor", ("complex64",)) == RUNS  # "add" is in SUPPORTED_COMPLEX_OPS
    assert mps.check_call("aten::cholesky_inverse", ("complex64",)) == RAISES


@pytest.mark.parametrize("op", ["aten::_copy_from", "aten::_copy_from_and_resize", "aten::copy_", "aten::fill_.Scalar",
                                "aten::zero_", "aten::resize_", "aten::set_.source_Storage", "aten::_to_copy"])
def test_moving_filling_or_resizing_a_complex64_tensor_on_mps_is_data_movement_not_a_complex_op(op):
    """Re-probe 12: moving a complex64 tensor to MPS raised at _copy_from (the stand-in's device copy), and the
    in-place structural entries (copy_, fill_ ...) never matched an op's base name (copy, fill ...). MPS's
    copy holds complex64: common_mps.py lists clone and contiguous, device copies both, as complex-capable."""
    mps = semantics_for("mps", environ={})
    assert mps.call_failure(op, ("complex64",)) is None


def test_a_dtype_gap_of_common_mps_raises_for_that_dtype_only():
    mps = semantics_for("mps", environ={})
    assert mps.check_call("aten::median", ("float32",)) == RUNS
    assert mps.check_call("aten::median", ("bool",)) == RAISES  # UNIMPLEMENTED_XFAILLIST: median [bool]


def test_mps_s_always_on_fallbacks_fall_back_without_the_variable():
    mps = semantics_for("mps", environ={})
    assert mps.check_call("aten::embedding_renorm_", ("float32",)) == FALLS_BACK
    assert mps.check_call("aten::_pdist_forward", ("float32",)) == RAISES


# -- predictions of a step ------------------------------------------------------------------------------
def test_a_float64_step_fails_on_mps_at_the_users_line(tmp_path, linear_model_file):
    model = linear_model_file("return self.fc(x.double().float())")
    with pytest.raises(ScanStopped) as stopped:
        predict_scan(model, target="mps")
    failure = stopped.value.session.meta.device_failure
    assert failure is not None and "float64" in failure.message.lower()
    assert failure.source.startswith(str(Path(model).name)) or "net.py" in failure.source
    assert not failure.observed  # predicted, not measured


def test_an_xpu_fallback_listed_op_falls_back_and_a_missing_one_raises_unless_enabled(linear_model_file, monkeypatch):
    listed = linear_model_file("return self.fc(x) + torch.cholesky_inverse(torch.eye(4, device=x.device)).sum()")
    session = predict_scan(listed, target="xpu")
    assert "aten::cholesky_inverse" in " ".join(session.ops["fallback_ops"])
    assert session.meta.prediction.target == "xpu" and session.meta.prediction.table_torch_version
    assert any("not measured" in note and "PYTORCH_ENABLE_XPU_FALLBACK unset" in note for note in session.meta.notes)

    # (_add_relu has no derivative: called on a detached tensor, as a model's own fused op would be)
    missing = linear_model_file("return self.fc(x) + torch.ops.aten._add_relu.Tensor(self.fc(x).detach(), x)")
    with pytest.raises(ScanStopped) as stopped:
        predict_scan(missing, target="xpu")
    failure = stopped.value.session.meta.device_failure
    assert failure is not None and "_add_relu" in failure.message
    assert "PYTORCH_ENABLE_XPU_FALLBACK=1" in failure.remedy

    monkeypatch.setenv("PYTORCH_ENABLE_XPU_FALLBACK", "1")
    session = predict_scan(missing, target="xpu")
    assert "aten::_add_relu.Tensor" in " ".join(session.ops["fallback_ops"])
    assert any("PYTORCH_ENABLE_XPU_FALLBACK set" in note for note in session.meta.notes)


# -- a target is one table and one module ----------------------------------------------------------------
def test_adding_a_target_is_one_table_and_one_semantics_module(tmp_path, monkeypatch):
    """A new target's table file and module make it a --target choice; no other file is touched."""
    doc = json.loads((target_tables.TARGET_DIR / "xpu-torch2.14.1.json").read_text())
    doc.update(target="npu", dispatch_key="NPU", torch_version="9.9")
    tables = tmp_path / "targets"
    tables.mkdir()
    for path in target_tables.TARGET_DIR.glob("*.json"):
        (tables / path.name).write_text(path.read_text())
    (tables / "npu-torch9.9.json").write_text(json.dumps(doc))
    monkeypatch.setattr(target_tables, "TARGET_DIR", tables)
    target_tables.load_target_table.cache_clear()
    module = types.ModuleType("dmlprof.targets.npu")
    from dmlprof.targets.base import TargetSemantics

    module.Semantics = type("Semantics", (TargetSemantics,), {"title": "NPU", "fallback_env": "NPU_FALLBACK"})
    monkeypatch.setitem(sys.modules, "dmlprof.targets.npu", module)
    try:
        assert "npu" in known_targets()
        from dmlprof.cli.arguments import target_list

        assert target_list("dml,npu") == "dml,npu"
        npu = semantics_for("npu", environ={"NPU_FALLBACK": "1"})
        assert npu.table.torch_version == "9.9" and npu.check_call("aten::_add_relu.Tensor") == FALLS_BACK
    finally:
        target_tables.load_target_table.cache_clear()


#: the modules that serve every target: none may name one (docs/targets.md)
_TARGET_FREE = ("dmlprof/predict/targets.py", "dmlprof/cli/side_by_side.py", "dmlprof/tables/targets.py",
                "dmlprof/targets/__init__.py", "dmlprof/targets/base.py", "dmlprof/report/targets.py")


def test_only_a_targets_own_module_and_table_name_it():
    for target in shipped_target_tables():
        own = ROOT / "dmlprof" / "targets" / f"{target}.py"
        assert own.exists(), f"{target} has a table but no semantics module"
        variable = f"PYTORCH_ENABLE_{target.upper()}_FALLBACK"
        # (the live backends and the doctor read the variable of a device that is there: not a prediction's)
        naming = [str(path.relative_to(ROOT)) for folder in ("predict", "targets", "report", "tables", "cli")
                  for path in (ROOT / "dmlprof" / folder).rglob("*.py") if variable in path.read_text(encoding="utf-8")]
        assert naming == [str(own.relative_to(ROOT))]
        for name in _TARGET_FREE:
            text = (ROOT / name).read_text(encoding="utf-8")
            assert f'"{target}"' not in text and f"'{target}'" not in text, f"{name} names {target}"


# -- side by side --------------------------------------------------------------------------------------
def test_side_by_side_gives_one_verdict_per_target_and_one_json_document(tmp_path, linear_model_file, capsys):
    from dmlprof.cli import main

    model = linear_model_file("return self.fc(x).double().float()")  # float64: MPS fails, XPU runs
    out = tmp_path / "all.json"
    assert main(["scan", model, "--target", "xpu,mps", "--out", str(tmp_path / "r"), "--json", str(out)]) == 0
    lines = [line.strip() for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]
    assert lines[0].startswith("XPU, torch 2.14.1: 0 ops fall back (0 calls)") and "no call fails" in lines[0]
    assert lines[1].startswith("MPS, torch 2.14.1:") and "net.py:" in lines[1] and "float32" in lines[1]
    doc = json.loads(out.read_text())
    assert [row["target"] for row in doc["targets"]] == ["xpu", "mps"]
    assert doc["targets"][1]["failed_op"] and doc["targets"][1]["report"]["meta"]["target"] == "mps"
    assert len(list((tmp_path / "r").glob("*.session.json"))) == 2


def test_a_bad_target_list_is_a_one_line_usage_error(capsys):
    from dmlprof.cli import main

    for text, said in (("xpu,tpu", "unknown target tpu"), ("xpu,xpu", "names a target twice"),
                       ("dml,,mps", "empty name"), ("dml,", "empty name"), (",xpu", "empty name")):
        with pytest.raises(SystemExit) as ended:
            main(["scan", "x.py", "--target", text])
        assert ended.value.code == 2 and said in capsys.readouterr().err


def test_check_gates_one_target_and_names_its_torch(tmp_path, linear_model_file, capsys):
    from dmlprof.cli import main

    model = linear_model_file("return self.fc(x)")
    assert main(["check", model, "--target", "xpu,mps", "--out", str(tmp_path / "r")]) == 2
    assert "one target at a time" in capsys.readouterr().err
    assert main(["check", model, "--target", "mps", "--target-torch", "2.13.0", "--out", str(tmp_path / "r")]) == 0
    ran = torch.__version__.split("+")[0]
    said = " ".join(capsys.readouterr().out.split())
    assert "on mps (predicted for torch 2.13.0" + ("):" if ran == "2.13.0" else f" from a run on torch {ran}):") in said
    # the torch the step ran on is named where it is not the table's: its calls followed that torch's code
    assert main(["check", model, "--target", "mps", "--target-torch", "2.14.1", "--out", str(tmp_path / "r")]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "on mps (predicted for torch 2.14.1" + ("):" if ran == "2.14.1" else f" from a run on torch {ran}):") in said


def test_a_target_is_not_predicted_beside_the_emulated_directml_device():
    # its kernels would run on the stand-in's storage-less tensors where the target has none (a segfault, seen in
    # CI's one pytest process): refused in one line instead
    code = ("from dmlprof import testing\ntesting.load()\nfrom dmlprof.predict import predict_scan, PredictionError\n"
            "try:\n    predict_scan(r'%s', target='xpu', steps=1)\nexcept PredictionError as e:\n    print('REFUSED', e)\n"
            % (ROOT / "models" / "lenet5.py"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-1500:]
    assert "REFUSED --target xpu cannot be predicted in a process where the emulated DirectML device is loaded" \
        in done.stdout


def test_side_by_side_gives_a_verdict_for_a_target_that_fails_before_the_step_and_predicts_the_others(tmp_path, capsys):
    """A float64 model fails on MPS at its move to the device, before any call is recorded: that ended the whole
    `--target xpu,mps` comparison with MPS's error (rc 4), and XPU, which runs it, got no verdict."""
    from dmlprof.cli import main

    model = tmp_path / "f64.py"
    model.write_text("import torch\nBATCH_SIZE = 4\n"
                     "def build_model(): return torch.nn.Linear(8, 2).double()\n"
                     "def make_batch(batch_size): return torch.randn(batch_size, 8, dtype=torch.float64), "
                     "torch.randint(0, 2, (batch_size,))\n"
                     "def loss_fn(out, target): return torch.nn.functional.cross_entropy(out, target)\n", encoding="utf-8")
    out = tmp_path / "all.json"
    assert main(["scan", str(model), "--target", "mps,xpu", "--out", str(tmp_path / "r"), "--json", str(out)]) == 0
    lines = [line.strip() for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]
    assert lines[0].startswith("MPS: fails before the step;") and "Float64" in lines[0]
    assert lines[1].startswith("XPU, torch 2.14.1:") and "no call fails" in lines[1]
    doc = json.loads(out.read_text())
    assert [row["target"] for row in doc["targets"]] == ["mps", "xpu"] and doc["targets"][0]["report"] is None
    assert len(list((tmp_path / "r").glob("*.session.json"))) == 1


def test_side_by_side_refuses_confirm_instead_of_dropping_it(tmp_path, linear_model_file, capsys):
    from dmlprof.cli import main

    model = linear_model_file("return self.fc(x)")
    assert main(["scan", model, "--target", "dml,xpu", "--confirm", "--out", str(tmp_path / "r")]) == 2
    assert "--confirm" in capsys.readouterr().err and not (tmp_path / "r").exists()


_GRU_MODEL = """
import torch
from torch import nn
BATCH_SIZE = 2
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru, self.cell, self.fc = nn.GRU(4, 4, batch_first=True), nn.GRUCell(4, 4), nn.Linear(4, 2)
    def forward(self, x):
        return self.fc(self.gru(x)[0][:, -1] + self.cell(x[:, 0]))
def build_model():
    return Net()
def make_batch(batch_size):
    return torch.randn(batch_size, 3, 4), torch.randint(0, 2, (batch_size,))
def loss_fn(out, target):
    return nn.functional.cross_entropy(out, target)
"""


def test_a_gru_runs_on_mps_as_atens_unfused_cell_and_on_xpu_as_its_fused_kernel(tmp_path):
    """ATen fuses the GRU cell on CUDA, XPU and PrivateUse1 inputs only (RNN.cpp's GRUCell): the stand-in met the
    fused call for MPS, which lacks it, and failed a model real MPS runs (probe 13, case 24); on XPU, which has it,
    torch's missing Meta kernel ended the step with dmlprof's own error, read as the model's (case 25)."""
    model = tmp_path / "gru.py"
    model.write_text(_GRU_MODEL, encoding="utf-8")
    on_mps = predict_scan(model, target="mps")
    mps_ops = set(on_mps.ops["op"])
    assert not any("_thnn_fused_gru_cell" in op for op in mps_ops)  # MPS never makes the call
    assert {"aten::sigmoid_", "aten::tanh_", "aten::sigmoid_backward"} <= mps_ops  # its pieces, and their gradients
    on_xpu = predict_scan(model, target="xpu")
    assert {"aten::_thnn_fused_gru_cell", "aten::_thnn_fused_gru_cell_backward"} <= set(on_xpu.ops["op"])
    for target in ("mps", "xpu"):  # the fused call judged from the table as the device takes it
        assert semantics_for(target).check_call("aten::_thnn_fused_gru_cell", ("float32",)) == RUNS


def test_side_by_side_says_a_step_raised_of_its_own_as_the_target_alone_does(tmp_path, linear_model_file, capsys):
    """`--target dml,xpu,mps` said "no call fails" for XPU where `--target xpu` ended with the step's error
    (exit 3): the side-by-side line read only a refused call as a failure (probe 13, case 25)."""
    from dmlprof.cli import main

    model = linear_model_file("raise ValueError('the model raised')")
    assert main(["scan", model, "--target", "xpu,mps", "--out", str(tmp_path / "r")]) == 3
    captured = capsys.readouterr()
    lines = [line.strip() for line in captured.out.splitlines() if line.startswith("  ")]
    assert len(lines) == 2 and all("no call fails before the step raised: step 1 raised ValueError" in line
                                   for line in lines)
    assert "ValueError" in captured.err  # and it ends the command as `--target xpu` alone ends it


def test_an_lstm_with_projections_fails_on_mps_where_atens_lstm_calls_lstm_mps(tmp_path):
    """ATen's lstm runs _lstm_mps for an MPS input, which refuses proj_size > 0 (RnnOps.mm); the stand-in's lstm
    never calls it and predicted the step to run (found re-checking the RNN family after probe 13's case 24)."""
    model = tmp_path / "lstm_proj.py"
    lstm = "nn.LSTM(4, 8, proj_size=4, batch_first=True)"
    model.write_text(_GRU_MODEL.replace("nn.GRU(4, 4, batch_first=True)", lstm).replace("nn.GRUCell", "nn.RNNCell"),
                     encoding="utf-8")
    with pytest.raises(ScanStopped) as stopped:
        predict_scan(model, target="mps")
    failure = stopped.value.session.meta.device_failure
    assert failure is not None and failure.op == "aten::_lstm_mps" and "projections" in failure.message
    assert "lstm_proj.py:10" in failure.source  # the user's line, as for any refused call
    # what to change is the projection, not a dtype (re-probe 14 case 5)
    assert "proj_size" in failure.remedy and "dtype" not in failure.remedy, failure.remedy


def test_side_by_side_gives_directmls_autocast_refusal_as_its_verdict_and_predicts_the_others(tmp_path, capsys):
    """Re-probe 18, 26: a timm-style step under ``torch.autocast(x.device.type, float16)``: DirectML refuses
    autocast as a whole (no one call's failure), which ended `--target mps,dml,xpu` with DirectML's error alone
    (rc 4): MPS and XPU, which run it, got no line."""
    from dmlprof.cli import main

    model = tmp_path / "amp.py"
    model.write_text("import torch\nBATCH_SIZE = 4\n"
                     "class Net(torch.nn.Module):\n"
                     "    def __init__(self):\n"
                     "        super().__init__(); self.fc = torch.nn.Linear(8, 2)\n"
                     "    def forward(self, x):\n"
                     "        with torch.autocast(device_type=x.device.type, dtype=torch.float16):\n"
                     "            return self.fc(x).float()\n"
                     "def build_model(): return Net()\n"
                     "def make_batch(batch_size): return torch.randn(batch_size, 8), torch.randint(0, 2, (batch_size,))\n",
                     encoding="utf-8")
    out = tmp_path / "all.json"
    assert main(["scan", str(model), "--target", "mps,dml,xpu", "--out", str(tmp_path / "r"), "--json", str(out)]) == 0
    lines = [line.strip() for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]
    assert lines[0].startswith("MPS, torch") and "no call fails" in lines[0]
    assert lines[1].startswith("DirectML, torch 2.4.1:") and "fails: step 1: mixed precision" in lines[1]
    assert lines[2].startswith("XPU, torch") and "no call fails" in lines[2]
    doc = json.loads(out.read_text())
    assert "autocast" in doc["targets"][1]["remedy"] and len(list((tmp_path / "r").glob("*.session.json"))) == 3


def test_a_sparse_gradient_is_not_predicted_on_xpu_and_mps_and_directmls_refusal_stays_directmls(tmp_path, capsys):
    """Re-probe 18, 34: ``nn.Embedding(sparse=True)``: `--target xpu` said "DirectML has no sparse tensors" (the
    stand-in's PrivateUse1 words), for devices torch gives sparse kernels of their own (SparseXPU, SparseMPS)."""
    from dmlprof.cli import main

    model = tmp_path / "sparse.py"
    model.write_text("import torch\nBATCH_SIZE = 4\n"
                     "def build_model(): return torch.nn.Sequential(torch.nn.Embedding(10, 4, sparse=True), "
                     "torch.nn.Flatten(), torch.nn.Linear(8, 2))\n"
                     "def make_batch(batch_size): return torch.randint(0, 10, (batch_size, 2)), "
                     "torch.randint(0, 2, (batch_size,))\n"
                     "def make_optimizer(params): return torch.optim.SGD(params, lr=0.1)\n", encoding="utf-8")
    code = main(["scan", str(model), "--target", "xpu,dml", "--out", str(tmp_path / "r")])
    out, err = capsys.readouterr()
    lines = [line.strip() for line in out.splitlines() if line.startswith("  ")]
    assert code == 2 and "XPU" in err and "DirectML" not in err
    assert lines[0].startswith("XPU: not predicted;") and "sparse" in lines[0] and "DirectML" not in lines[0]
    assert lines[1].startswith("DirectML, torch 2.4.1:") and "fails: step 1: DirectML has no sparse tensors" in lines[1]


NESTED_ENCODER = """\
import torch
from torch import nn
BATCH_SIZE = 2
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), 2)
        self.encoder.requires_grad_(False)
        self.head = nn.Linear(8, 2)
    def forward(self, x):
        mask = torch.zeros(x.shape[:2], dtype=torch.bool, device=x.device)
        mask[:, -1] = True
        self.encoder.eval()  # frozen (dmlprof's model.train() reaches it too)
        with torch.no_grad():
            h = self.encoder(x, src_key_padding_mask=mask)
        return self.head(h[:, 0])
def build_model(): return Net()
def make_batch(batch_size): return torch.randn(batch_size, 4, 8), torch.randint(0, 2, (batch_size,))
"""


def test_a_frozen_encoders_nested_tensor_is_directmls_failure_with_its_fix_and_not_predicted_on_xpu(tmp_path):
    """Re-probe 18, 36: nn.TransformerEncoder's fast path with a padding mask packs its input into a nested
    tensor; the stand-in could not shape it ("Internal error: NestedTensorImpl doesn't support sizes"), read as the
    model's own error on every target. Real torch-directml raises NotImplementedError there (NestedTensorPrivateUse1,
    measured on realdml); XPU takes the same path with nested kernels of its own, which the stand-in cannot follow;
    and the fast path is XPU's only where the mode that reads the device as XPU's hides from torch's override test."""
    from dmlprof.errors import DeviceError, NotPredicted
    from dmlprof.predict import predict_scan
    from dmlprof.runner import ScanStopped

    model = tmp_path / "encoder.py"
    model.write_text(NESTED_ENCODER, encoding="utf-8")
    with pytest.raises(ScanStopped) as on_directml:
        predict_scan(model, target="dml")
    assert isinstance(on_directml.value.cause, DeviceError) and "no nested tensors" in str(on_directml.value.cause)
    assert "enable_nested_tensor=False" in on_directml.value.cause.remedy
    import inspect

    if '"xpu"' not in inspect.getsource(torch.nn.modules.transformer.TransformerEncoder.forward):
        return  # this torch's encoder takes no fast path on XPU (torch 2.4): its calls are predicted as they run
    with pytest.raises((ScanStopped, NotPredicted)) as on_xpu:
        predict_scan(model, target="xpu")
    cause = getattr(on_xpu.value, "cause", on_xpu.value)
    assert isinstance(cause, NotPredicted) and "nested" in str(cause) and "DirectML" not in str(cause)


@pytest.mark.parametrize("target", ["mps", "xpu"])
@pytest.mark.parametrize("drawn_on_the_device", [True, False])
def test_noise_from_a_cpu_generator_drawn_on_the_device_fails_on_mps_and_xpu(linear_model_file, target,
                                                                             drawn_on_the_device):
    """Re-probe 19, 7: ``torch.randn(..., generator=cpu_generator, device=x.device)`` was "no call fails" on MPS
    and XPU, whose random kernels refuse a generator of another device (ATen's check_generator); drawn on the CPU
    and moved (diffusers' randn_tensor on MPS), it runs."""
    from dmlprof.errors import DeviceError
    from dmlprof.predict import predict_scan
    from dmlprof.runner import ScanStopped

    draw = ("torch.randn(x.shape, generator=self.g, device=x.device)" if drawn_on_the_device else
            "torch.randn(x.shape, generator=self.g).to(x.device)")
    model = linear_model_file(f"return self.fc(x) + {draw}",
                              init="self.fc = nn.Linear(4, 4)\nself.g = torch.Generator().manual_seed(0)")
    if not drawn_on_the_device:
        assert predict_scan(model, target=target).meta.device_failure is None
        return
    with pytest.raises(ScanStopped) as stopped:
        predict_scan(model, target=target)
    assert isinstance(stopped.value.cause, DeviceError)
    assert f"Expected a '{target}' device type for generator but found 'cpu'" in str(stopped.value.cause)
