"""The stand-in's tensors and their storage (re-probe 19, cases 5, 13 and 34).

``copy.deepcopy``: torch copied a plain tensor through its storage, which holds no memory on the stand-in, and every
prediction of a model deep-copying a module with buffers in its step (BYOL's lazily made target encoder, a
best-weights copy) died of SIGSEGV; torch copies torch-directml's storage-less tensors by ``clone()``, and the
stand-in's are copied so too. Reads of a device tensor's storage fail on torch-directml, and only there."""
from __future__ import annotations

import pytest

from dmlprof.predict import predict_scan

pytestmark = pytest.mark.own_process  # a stand-in device that cannot meet the emulated one (tests/conftest.py)

_LAZY_TARGET = """
    if not hasattr(self, "target"):
        self.target = copy.deepcopy(self.online).requires_grad_(False)
        print("copied", self.target[1].running_mean.device.type, torch.equal(
            self.target[1].running_mean.cpu(), self.online[1].running_mean.cpu()), flush=True)
    with torch.no_grad():
        t = self.target(x)
    return self.online(x) + t
"""


@pytest.mark.parametrize("target", ["dml", "xpu"])
def test_a_module_deep_copied_in_the_step_is_predicted_and_keeps_its_values(linear_model_file, capsys, target):
    model = linear_model_file(_LAZY_TARGET, init="self.online = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))",
                              extra="import copy\n")
    session = predict_scan(model, target=target)
    assert session.meta.device_failure is None and len(session.ops) > 0
    seen = {line for line in capsys.readouterr().out.splitlines() if line.startswith("copied")}
    expected = "privateuseone" if target == "dml" else target
    assert seen == {f"copied {expected} True"}


@pytest.mark.parametrize("target", ["dml", "xpu"])
@pytest.mark.parametrize("read", ["self.fc.weight.data_ptr()", "x.untyped_storage().nbytes()",
                                  "torch.nested.as_nested_tensor([x[0], x[1, :2]], layout=torch.jagged)"])
def test_reading_a_device_tensors_storage_fails_on_directml_only(linear_model_file, target, read):
    """Re-probe 19, 13 and 34: torch-directml's tensors have no storage (measured on realdml: a jagged nested
    tensor's ``values.untyped_storage()`` raises "Cannot access storage of OpaqueTensorImpl", ``data_ptr()``
    "Cannot access data pointer of Tensor that doesn't have storage"); ``check --target dml`` passed such code.
    MPS's and XPU's tensors have storage: it runs there."""
    from dmlprof.errors import DeviceError
    from dmlprof.runner import ScanStopped

    model = linear_model_file(f"{read}\nreturn self.fc(x)")
    if target != "dml":
        assert predict_scan(model, target=target).meta.device_failure is None
        return
    with pytest.raises(ScanStopped) as stopped:
        predict_scan(model, target=target)
    assert isinstance(stopped.value.cause, DeviceError) and "have no storage" in str(stopped.value.cause)


@pytest.mark.parametrize("target", ["xpu", "dml", "mps"])  # DirectML after XPU: the target's answer is gone
def test_weights_tied_on_the_cpu_stay_tied_through_the_move_where_the_target_keeps_them(linear_model_file, capsys,
                                                                                        target):
    """Re-probe 19, 35: ``Module.to(device)`` keeps a parameter where torch calls the moved tensor's type compatible
    with it, and makes one per module otherwise. XPU's and MPS's tensors are compatible with the CPU's: a tie
    (``fc2.weight = fc.weight``) stays, one parameter trained; torch-directml's are not (measured on realdml:
    ``torch._has_compatible_shallow_copy_type`` False between the CPU and the device): DirectML trains two. The
    stand-in's PrivateUse1 tensors untied them for every target."""
    model = linear_model_file('print("tied", self.fc2.weight is self.fc.weight, flush=True)\nreturn self.fc2(self.fc(x))',
                              init="self.fc = nn.Linear(4, 4)\nself.fc2 = nn.Linear(4, 4)\nself.fc2.weight = self.fc.weight")
    session = predict_scan(model, target=target)
    assert session.meta.device_failure is None
    seen = {line for line in capsys.readouterr().out.splitlines() if line.startswith("tied")}
    assert seen == {f"tied {target != 'dml'}"}


def test_has_storage_answers_false_to_the_model_so_a_guarded_read_is_skipped(linear_model_file, capsys):
    """Re-probe 20, case 5: a library's guard ``torch._C._has_storage(h) and h.data_ptr() != 0`` (torch's own
    fake-tensor code guards so) runs on realdml, which answers False; the stand-in answered True and then refused
    the read (exit 4)."""
    model = linear_model_file("print('guard', torch._C._has_storage(x) and x.data_ptr() != 0, "
                              "torch._C._has_storage(x.cpu()), flush=True)\nreturn self.fc(x)")
    session = predict_scan(model, target="dml")
    assert session.meta.device_failure is None
    seen = {line for line in capsys.readouterr().out.splitlines() if line.startswith("guard")}
    assert seen == {"guard False True"}


_VIEWS_DEEP_COPIED = """
    w = self.fc.weight.detach()
    w.tag = "mine"
    d = copy.deepcopy({"w": w, "row": w[0], "col": w[:, 1]})
    d["w"][0].fill_(7.0)
    d["w"][:, 1].fill_(3.0)
    print("views", float(d["row"].sum()), float(d["col"].sum()), d["row"].tag if hasattr(d["row"], "tag") else "-",
          d["w"].tag, d["w"].is_leaf, d["w"]._is_view(), torch.equal(w.cpu(), self.fc.weight.detach().cpu()),
          flush=True)
    return self.fc(x)
"""


@pytest.mark.parametrize("target", ["xpu", "mps", "dml"])
def test_a_deep_copy_keeps_a_view_of_its_base_where_torch_copies_the_storage_only(linear_model_file, capsys, target):
    """Re-probe 21, 28: torch's ``Tensor.__deepcopy__`` (torch/_tensor.py, 2.4.1 and 2.13 alike) deep-copies an XPU
    tensor's storage once per deep copy, so a row and its matrix copied together stay a view of one copy (the
    copy's row 0 written reads 4 x 7.0); it clones MPS's and torch-directml's storage-less tensors one by one, so
    the views split (measured on realdml). The stand-in cloned for every target."""
    model = linear_model_file(_VIEWS_DEEP_COPIED, extra="import copy\n")
    session = predict_scan(model, target=target)
    assert session.meta.device_failure is None
    seen = [line for line in capsys.readouterr().out.splitlines() if line.startswith("views")]
    assert seen
    row, col, _, *rest = seen[0].split()[1:]
    assert rest == ["mine", "True", "False", "True"]  # the user's attribute kept, a leaf, the source untouched
    if target == "xpu":
        assert float(row) == pytest.approx(4 * 7.0 - 7.0 + 3.0) and float(col) == pytest.approx(4 * 3.0)
    else:
        assert float(row) != pytest.approx(4 * 7.0 - 7.0 + 3.0) and float(col) != pytest.approx(4 * 3.0)


@pytest.mark.parametrize("saved, loaded, words", [
    ("self.fc.state_dict()", "torch.load(buf, map_location=x.device, weights_only=True)", "weights_only=True"),
    ("x.detach().requires_grad_()", "None", "Can't call numpy() on Tensor that requires grad"),
])
def test_a_checkpoint_torch_directml_cannot_write_or_read_fails_as_on_directml(linear_model_file, saved, loaded,
                                                                                words):
    """Measured on realdml (re-probe 21, cases 11 and 24): torch 2.4.1 pickles a device tensor from a numpy array,
    which its weights-only unpickler refuses and ``numpy()`` refuses for a tensor requiring grad; torch 2.13's
    host-copy pickling did neither."""
    from dmlprof.runner import ScanStopped

    model = linear_model_file(f"buf = io.BytesIO(); torch.save({saved}, buf); buf.seek(0)\n{loaded}\n"
                              "return self.fc(x)", extra="import io\n")
    with pytest.raises(ScanStopped) as stopped:
        predict_scan(model, target="dml")
    assert words in str(stopped.value.cause)


def test_set_of_an_empty_device_tensor_is_predicted_as_the_crash_it_is_on_directml(linear_model_file):
    """Re-probe 22, case 11: realdml dies of SIGSEGV at ``torch.empty(0, device=d).set_(x)``; it was predicted as a
    fallback (exit 6). A non-empty tensor's ``set_`` runs there (measured) and is predicted to."""
    from dmlprof.runner import ScanStopped

    with pytest.raises(ScanStopped) as stopped:
        predict_scan(linear_model_file("y = torch.empty(0, device=x.device).set_(x)\nreturn self.fc(y)"))
    said = str(stopped.value.cause)
    assert "ends the process" in said and "set_ of an empty device tensor" in said
    ran = predict_scan(linear_model_file("y = torch.zeros_like(x).set_(x)\nreturn self.fc(y)", name="ok.py"))
    assert ran.meta.device_failure is None
