"""The zoo harness's own logic: how it reads entries and how it compares runs (pure, fast).

The zoo tests are the bar dmlprof's core must meet, so the harness that
judges is tested too: it must find real differences, explain only the act of
recording, and read any file the same general way.
"""
from __future__ import annotations

import textwrap

import pytest

from zoo_harness import compare
from zoo_harness.entries import EXCEPT_ENV, REQUIRING_ENV, STRICT_ENV, discover, read_entry, selected, strict


def _write(folder, name, source):
    path = folder / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


# -- entries -------------------------------------------------------------------------------------------
def test_a_file_defining_build_model_and_make_batch_is_a_contract(tmp_path):
    path = _write(tmp_path, "m.py", """
        import torch
        from mymodels import build_model
        def make_batch(n): ...
    """)
    entry = read_entry(path)
    assert entry.kind == "contract" and entry.from_device is None
    assert entry.requires == ("mymodels", "torch")


def test_requirements_follow_sibling_modules_and_skip_stdlib_optional_and_provided(tmp_path):
    _write(tmp_path, "_helpers.py", "import transformers\nimport json\n")
    path = _write(tmp_path, "s.py", """
        import os, sys
        import _helpers
        import torch_directml
        try:
            import lightning
        except ImportError:
            lightning = None
        def main():
            import timm.models
    """)
    assert read_entry(path).requires == ("timm", "transformers")


def test_a_script_naming_cuda_is_scanned_from_cuda(tmp_path):
    for source in ('device = "cuda:0"\n', "import torch\nx = torch.zeros(1).cuda()\n",
                   "import torch\nok = torch.cuda.is_available()\n"):
        assert read_entry(_write(tmp_path, "s.py", source)).from_device == "cuda", source


def test_a_directml_script_or_a_device_neutral_one_runs_as_written(tmp_path):
    directml = _write(tmp_path, "d.py", "import torch_directml\nx = 'cuda'\n")
    neutral = _write(tmp_path, "n.py", "import torch\n# no cuda here, only in a comment: cuda\nx = 'cudacity'[:0]\n")
    assert read_entry(directml).from_device is None
    assert read_entry(neutral).from_device is None
    assert read_entry(neutral).kind == "script"


# -- losses and counts -----------------------------------------------------------------------------------
def test_losses_must_match_bit_for_bit_within_the_window():
    bare = {"window": [1, 2], "losses": [1.0, 0.5, 0.25, 9.0]}
    same = {"window": [1, 2], "losses": [1.0, 0.5, 0.25]}
    off = {"window": [1, 2], "losses": [1.0, 0.5, 0.25 + 2**-40]}
    assert compare.loss_differences(bare, same) == []
    (line,) = compare.loss_differences(bare, off)
    assert line.startswith("loss 2:")
    assert compare.loss_differences(bare, {"window": [1, 2], "losses": [1.0]})[0].startswith("3 losses")


def test_count_differences_name_each_op_that_differs():
    lines = compare.count_differences({"aten::a": 2, "aten::b": 1}, {"aten::a": 2, "aten::c": 4}, "here", "there")
    assert lines == ["aten::b: 1 calls here, 0 there", "aten::c: 0 calls here, 4 there"]


def test_device_only_rows_leave_out_calls_on_cpu_tensors():
    session = {"ops": {"op": ["aten::set_.source_Storage", "aten::mm"], "verdict": ["cpu", "device"],
                       "fallback_ops": ["", ""]}}
    assert compare.session_rows(session, device_only=True) == [("aten::mm", "device", ())]
    assert len(compare.session_rows(session)) == 2


def test_reported_fallbacks_add_inner_ops_of_fallback_rows_only():
    session = {"ops": {"op": ["aten::_foreach_lerp_.Scalar", "aten::mm", "aten::grid_sampler_2d"],
                       "verdict": ["fallback", "device", "fallback"],
                       "fallback_ops": ["aten::lerp.Scalar_out=3", "", "aten::grid_sampler_2d=1"]}}
    assert compare.reported_fallbacks(session) == {"aten::lerp.Scalar_out": 3, "aten::grid_sampler_2d": 1}


# -- traces ------------------------------------------------------------------------------------------------
def test_nested_redispatch_and_mode_ranges_are_explained_and_nothing_else():
    bare = [["aten::mm", ""], ["aten::sum", ""], ["aten::sum", "aten::sum"]]
    scanned = [["aten::mm", ""], ["PythonDispatchMode", "aten::mm"], ["aten::mm", "<mode>/aten::mm"],
               ["aten::sum", ""], ["aten::sum", "aten::sum"], ["aten::sum", "aten::sum"],
               ["aten::detach", ""]]
    missing, extra, explained = compare.window_difference(bare, scanned)
    assert not missing and extra == {"aten::detach": 1}
    assert explained == {("mode_range", "PythonDispatchMode"): 1, ("redispatch", "aten::mm"): 1,
                         ("redispatch", "aten::sum"): 1}


def test_a_recall_below_a_custom_ops_autograd_range_is_the_recorders():
    wrapper = "GeneratedBackwardFor_torchvision_roi_align_default"
    bare = [["torchvision::roi_align", ""], [wrapper, "torchvision::roi_align"]]
    scanned = bare + [["torchvision::roi_align", wrapper]]
    missing, extra, explained = compare.window_difference(bare, scanned)
    assert not missing and not extra and explained == {("redispatch", "torchvision::roi_align"): 1}
    other = bare + [["torchvision::nms", wrapper]]
    assert compare.window_difference(bare, other)[1] == {"torchvision::nms": 1}, "only the same op is explained"


def test_an_op_missing_under_dmlprof_is_never_explained():
    bare = [["aten::_ctc_loss", ""], ["aten::add_", ""]]
    scanned = [["aten::_ctc_loss", ""], ["aten::_ctc_loss", "aten::_ctc_loss"], ["aten::add", ""]]
    missing, extra, explained = compare.window_difference(bare, scanned)
    assert missing == {"aten::add_": 1} and extra == {"aten::add": 1}
    assert explained == {("redispatch", "aten::_ctc_loss"): 1}


def test_batches_a_dataloader_rebuilds_may_move_between_windows_and_nothing_else_may():
    receive = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
    bare = [["aten::mm", ""]]
    scanned = [["aten::set_", receive], ["aten::empty", receive], ["aten::mm", ""], ["aten::set_", "aten::mm"]]
    missing, extra, explained = compare.window_difference(bare, scanned)
    assert not missing and extra == {"aten::set_": 1}, "only calls made inside the DataLoader's __next__ may move"
    assert explained == {("worker_batch", "aten::set_"): 1, ("worker_batch", "aten::empty"): 1}
    missing, extra, explained = compare.window_difference(scanned[:2] + [["aten::mm", ""]], [["aten::mm", ""]])
    assert not missing and not extra and explained == {("worker_batch", "aten::set_"): 1,
                                                       ("worker_batch", "aten::empty"): 1}


def test_trace_differences_list_windows_and_hint_at_the_dispatch_mode():
    bare = {"windows": [[["aten::add_", ""]], [["aten::mm", ""]]]}
    scanned = {"windows": [[["aten::add", ""], ["PythonDispatchMode", ""]], [["aten::mm", ""]], [["aten::mm", ""]]]}
    unexplained, explained = compare.trace_differences(bare, scanned)
    assert unexplained[0] == "2 optimizer steps without dmlprof, 3 with it"
    assert "step window 0: aten::add x1 only with dmlprof" in unexplained
    assert "step window 0: aten::add_ x1 only without dmlprof" in unexplained
    assert unexplained[-1] == compare.MODE_HINT
    assert explained and "PythonDispatchMode" in explained[0]


def test_reported_ops_may_not_exceed_the_programs_calls_in_the_measured_steps():
    bare = {"window": [1, 2], "windows": [[["aten::index_put_", ""]], [["aten::mm", ""]], [["aten::mm", ""]]],
            "tail": []}
    session = {"ops": {"op": ["aten::mm", "aten::mm", "aten::index_put", "aten::mm"], "verdict": ["device"] * 4,
                       "fallback_ops": [""] * 4}}
    assert compare.reported_op_differences(session, bare) == [
        "aten::index_put: reported 1 times, the program without dmlprof calls it 0 times",
        "aten::mm: reported 3 times, the program without dmlprof calls it 2 times"]


# -- prediction vs emulation --------------------------------------------------------------------------------
def test_row_differences_show_hunks_with_positions():
    emulated = [("aten::mm", "device", ()), ("aten::lerp.Scalar_out", "fallback", (("aten::lerp.Scalar_out", 1),))]
    predicted = [("aten::mm", "device", ()), ("aten::lerp.Scalar_out", "device", ())]
    lines = compare.row_differences(emulated, predicted)
    assert lines[0] == "emulated 2 calls, predicted 2; 1 differ"
    assert "- [1] aten::lerp.Scalar_out fallback [aten::lerp.Scalar_out=1]" in lines
    assert "+ [1] aten::lerp.Scalar_out device" in lines
    assert compare.row_differences(emulated, list(emulated)) == []


def test_a_known_gap_forgives_only_missing_calls_of_its_ops():
    view, index = ("aten::view", "device", ()), ("aten::index.Tensor", "device", ())
    emulated = [index, view, index, view, index]
    gap = frozenset({"aten::view"})
    assert compare.row_differences(emulated, [index, index, index], emulated_only=gap) == []
    # one more call in the prediction, another op missing, a fallback missing, or a verdict changed:
    # still differences
    assert compare.row_differences(emulated, [index, index, view, view, index, index], emulated_only=gap)
    assert compare.row_differences(emulated, [index, index], emulated_only=gap)
    assert compare.row_differences([index, ("aten::view", "fallback", ()), index], [index, index], emulated_only=gap)
    assert compare.row_differences(emulated, [index, ("aten::view", "fallback", ()), index, index],
                                   emulated_only=gap)
    assert compare.row_differences(emulated, [index, index, index])  # no gap given: the same as ever


def test_meta_differences_point_at_the_step_window():
    emulated = {"meta": {"warmup_steps": 1, "steps": 2, "partial": False}}
    predicted = {"meta": {"steps": 2, "partial": False}}
    assert compare.meta_differences(emulated, predicted) == " (predicted warmup_steps None, emulated 1)"
    assert compare.meta_differences(emulated, emulated) == ""


@pytest.mark.parametrize("lines, limit, tail", [(["a"] * 3, 5, "a"), (["a"] * 7, 5, "... and 2 more")])
def test_shorten_keeps_messages_readable(lines, limit, tail):
    assert compare.shorten(lines, limit).splitlines()[-1] == tail


@pytest.mark.parametrize("setting, missing, fails", [
    ("", ["torchvision"], False), ("0", ["torchvision"], False), ("1", ["torchvision"], True),
    ("transformers,lightning", ["torchvision"], False), ("transformers, lightning", ["lightning"], True),
    ("transformers", ["timm", "transformers"], True)])
def test_strictness_names_the_packages_that_must_be_there(monkeypatch, setting, missing, fails):
    monkeypatch.setenv(STRICT_ENV, setting)
    assert strict(missing) is fails


def test_an_entry_list_can_be_narrowed_to_those_requiring_a_package(monkeypatch, tmp_path):
    (tmp_path / "vision.py").write_text("import torchvision\nimport torch\n")
    (tmp_path / "text.py").write_text("import transformers\n")
    (tmp_path / "plain.py").write_text("import torch\n")
    entries = discover([tmp_path])
    monkeypatch.delenv(REQUIRING_ENV, raising=False)
    assert [e.name for e in selected(entries)] == ["plain", "text", "vision"]
    monkeypatch.setenv(REQUIRING_ENV, "timm, torchvision")
    assert [e.name for e in selected(entries)] == ["vision"]
    monkeypatch.setenv(REQUIRING_ENV, "transformers,torchvision")
    assert [e.name for e in selected(entries)] == ["text", "vision"]
    monkeypatch.setenv(EXCEPT_ENV, "vision, other")  # and less the entries named
    assert [e.name for e in selected(entries)] == ["text"]
    monkeypatch.delenv(REQUIRING_ENV)
    assert [e.name for e in selected(entries)] == ["plain", "text"]
