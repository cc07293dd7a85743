"""Which ``torch.compile``d calls torch-directml runs (re-probe 20, case 1): each case of the unit tests'
``FAILING`` and ``RUNNING`` model files, one training step on real torch-directml, against the prediction's verdict.
Before, every compiled call was predicted to run eagerly; real torch-directml raises InternalTorchDynamoError (or,
for a torch.nn module with fullgraph=True, Unsupported) at most of them."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.realdml

STEP = '''
import importlib.util, json, sys, torch, torch_directml
dml = torch_directml.device()
found = {}
for name, path in json.loads(sys.argv[1]).items():
    spec = importlib.util.spec_from_file_location("compiled_block_" + str(len(found)), path)
    model_file = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(model_file)
    torch._dynamo.reset()
    try:
        model = model_file.build_model().to(dml)
        x, y = model_file.make_batch(2)
        torch.nn.functional.cross_entropy(model(x.to(dml)), y.to(dml)).backward()
        found[name] = "runs"
    except Exception as e:
        found[name] = type(e).__name__
print(json.dumps(found))
'''


def _unit_cases():
    path = Path(__file__).resolve().parents[1] / "unit" / "test_predict_compiled.py"
    spec = importlib.util.spec_from_file_location("unit_compiled_cases", path)
    cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cases)
    return cases


def test_the_prediction_fails_exactly_the_compiled_calls_real_directml_fails(tmp_path, realdml):
    from dmlprof.predict import predict_scan
    from dmlprof.runner import ScanStopped

    cases = _unit_cases()
    paths, predicted = {}, {}
    for number, (name, (compiled, call)) in enumerate({**cases.FAILING, **cases.RUNNING}.items()):
        path = tmp_path / f"compiled_block_{number}.py"
        path.write_text(cases.FAILING_ON_DIRECTML.replace("COMPILED", compiled).replace("CALL", call), encoding="utf-8")
        paths[name] = str(path)
        try:
            predict_scan(path, batch_size=2)
            predicted[name] = "runs"
        except ScanStopped as stopped:
            predicted[name] = "fails: " + str(stopped)[:200]
    done = subprocess.run([sys.executable, "-c", STEP, json.dumps(paths)], capture_output=True, text=True,
                          env=realdml, timeout=600)
    assert done.returncode == 0, done.stderr[-1500:]
    real = json.loads(done.stdout.strip().splitlines()[-1])
    for name in cases.RUNNING:
        assert (real[name], predicted[name]) == ("runs", "runs"), name
    for name in cases.FAILING:
        assert real[name] in ("InternalTorchDynamoError", "Unsupported"), (name, real[name])
        assert predicted[name].startswith("fails: step 1: torch.compile cannot trace"), (name, predicted[name])
