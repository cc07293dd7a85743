"""A step that calls an op known to give wrong results on DirectML is flagged, predicted too.

GIVEN the shipped truth table measured on the real torch-directml (bilinear upsampling wrong there,
      confirmed on real GPUs: microsoft/DirectML#482)
WHEN  a decoder that upsamples bilinearly is predicted with ``--target dml``
THEN  the report names upsample_bilinear2d and its backward as known wrong, confirmed, with the
      replacement that fixes it, and the replaced step no longer calls them.
"""
import json

import pytest

from conftest import FIXTURES

pytestmark = pytest.mark.slow


def test_a_bilinear_decoder_predicted_for_directml_is_flagged_with_its_fix(cli, tmp_path):
    done = cli("scan", FIXTURES / "bilinear_decoder.py", "--target", "dml", "--json", tmp_path / "r.json",
               "--no-progress")
    assert done.returncode == 0, done.stderr
    found = {k["op"]: k for k in json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["known_wrong_results"]}
    assert {"aten::upsample_bilinear2d", "aten::upsample_bilinear2d_backward"} <= set(found), found
    forward = found["aten::upsample_bilinear2d"]
    assert "DirectML#482" in forward["confirmed_by"] and forward["calls"] == 1 and forward["max_abs_error"] > 0.1
    assert "interpolate_bilinear" in forward["fix"]
    assert forward["sources"][0].endswith("bilinear_decoder.py:18")
    said = " ".join(done.stdout.split())  # the terminal wraps the note at 80 columns
    assert "KNOWN WRONG RESULTS" in said and "confirmed: microsoft/DirectML#482" in said


def test_the_replacement_removes_the_wrong_calls(tmp_path):
    import torch
    import torch.nn.functional as F

    import dmlprof
    from dmlprof.replacements import ops

    x = torch.randn(2, 3, 5, 7, requires_grad=True)
    with dmlprof.profile("cpu", profiler=False) as run:
        ops.interpolate_bilinear(x, scale_factor=2).sum().backward()
    assert not any("upsample_bilinear2d" in op for op in run.session.ops["op"])
    assert torch.allclose(ops.interpolate_bilinear(x, scale_factor=2), F.interpolate(x, scale_factor=2, mode="bilinear"),
                          atol=1e-6)
