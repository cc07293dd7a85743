"""Which ``torch.compile``d calls torch-directml runs (re-probe 20, case 1): each case of the unit tests'
``FAILING``, ``RUNNING`` and ``OPTIMIZER_FAILING`` model files, one training step on real torch-directml, against the
prediction's verdict (re-probe 22, cases 2, 3 and 6: torch's own hooks, what torch.compiler.disable keeps from
Dynamo, a compiled optimizer step).
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
    torch._dynamo.config.disable = False  # a case before may have turned Dynamo off (as the model's own setting)
    try:
        model = model_file.build_model().to(dml)
        x, y = model_file.make_batch(2)
        torch.nn.functional.cross_entropy(model(x.to(dml)), y.to(dml)).backward()
        if hasattr(model_file, "make_optimizer"):  # a compiled optimizer step (re-probe 22, case 6)
            model_file.make_optimizer(model.parameters()).step()
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
    sources = {name: cases.FAILING_ON_DIRECTML.replace("COMPILED", compiled).replace("CALL", call)
               for name, (compiled, call) in {**cases.FAILING, **cases.RUNNING}.items()}
    sources.update({name: cases.OPTIMIZER_MODEL.replace("COMPILED_STEP", step)
                    for name, step in cases.OPTIMIZER_FAILING.items()})
    paths, predicted = {}, {}
    for number, (name, source) in enumerate(sources.items()):
        path = tmp_path / f"compiled_block_{number}.py"
        path.write_text(source, encoding="utf-8")
        paths[name] = str(path)
        try:
            predict_scan(path, batch_size=2)
            predicted[name] = "runs"
        except ScanStopped as stopped:
            predicted[name] = "fails: " + str(stopped)[:200]
        if "torch._dynamo" in sys.modules:
            sys.modules["torch._dynamo"].config.disable = False  # a model's own setting outlives its prediction
    done = subprocess.run([sys.executable, "-c", STEP, json.dumps(paths)], capture_output=True, text=True,
                          env=realdml, timeout=600)
    assert done.returncode == 0, done.stderr[-1500:]
    real = json.loads(done.stdout.strip().splitlines()[-1])
    for name in cases.RUNNING:
        assert (real[name], predicted[name]) == ("runs", "runs"), name
    for name in list(cases.FAILING) + list(cases.OPTIMIZER_FAILING):
        assert real[name] in ("InternalTorchDynamoError", "Unsupported"), (name, real[name])
        assert predicted[name].startswith("fails: step 1: torch.compile cannot trace"), (name, predicted[name])


#: a script compiling torch.nn modules on the device (re-probe 21, case 8): what each call does, caught
SCRIPT = '''
import json, torch, torch_directml
from torch import nn
dev = torch_directml.device()
class Own(nn.Module):
    def __init__(self): super().__init__(); self.a = nn.Linear(8, 3)
    def forward(self, x): return self.a(x)
def sequential(): return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).to(dev)
class KeptFromDynamo(Own):
    @torch.compiler.disable
    def forward(self, x): return self.a(x)
def hooked(hook=lambda module, args, out: out * 2):
    model = sequential(); model[0].register_forward_hook(hook); return model
def weight_normed():
    return nn.Sequential(nn.utils.weight_norm(nn.Linear(8, 16)), nn.ReLU(), nn.Linear(16, 3)).to(dev)
def step_compiled():  # re-probe 22, case 6: the optimizer's step compiled (torch's tutorial)
    model = sequential()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.step = torch.compile(opt.step)
    def forward(x):
        out = model(x); out.sum().backward(retain_graph=True); opt.step(); return out
    return forward
cases = {"seq": lambda: torch.compile(sequential()),
         "seq_fullgraph": lambda: torch.compile(sequential(), fullgraph=True),
         "seq_hook": lambda: torch.compile(hooked()), "own": lambda: torch.compile(Own().to(dev)),
         "seq_method": lambda: None,
         # re-probe 22, cases 2, 3 and 6
         "seq_weight_norm": lambda: torch.compile(weight_normed()),
         "seq_hook_kept": lambda: torch.compile(hooked(torch.compiler.disable(lambda module, args, out: out * 2))),
         "own_kept": lambda: torch.compile(KeptFromDynamo().to(dev)), "opt_step": step_compiled}
found = {}
for name, make in cases.items():
    torch._dynamo.reset()
    try:
        model = make()
        if model is None:  # Module.compile() compiles in place
            model = sequential(); model.compile()
        model(torch.randn(4, 8).to(dev)).sum().backward()
        found[name] = "runs"
    except Exception as e:
        found[name] = type(e).__name__
print("FOUND", json.dumps(found))
'''


def test_a_scripts_compiled_torch_nn_modules_run_or_fail_on_the_emulated_device_as_on_real_directml(realdml, tmp_path):
    script = tmp_path / "compiled_script.py"
    script.write_text(SCRIPT, encoding="utf-8")
    real = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=realdml, timeout=600)
    assert real.returncode == 0, real.stderr[-1500:]
    found = json.loads([line for line in real.stdout.splitlines() if line.startswith("FOUND ")][-1][6:])
    assert found["seq"] == found["seq_method"] == "runs" and found["own"] == found["seq_hook"] != "runs"
    assert found["seq_fullgraph"] != "runs"
    assert found["seq_weight_norm"] == found["own_kept"] == "runs" != found["opt_step"]
    assert found["seq_hook_kept"] != "runs"  # a forward hook on the Linear inside: Dynamo inlines its call
    repo = Path(__file__).resolve().parents[2]
    emulated = subprocess.run([sys.executable, "-m", "dmlprof", "scan", str(script), "--device", "emulated-dml",
                               "--no-profiler", "--out", str(tmp_path)], capture_output=True, text=True,
                              env=realdml, cwd=repo, timeout=900)
    assert emulated.returncode == 0, emulated.stderr[-1500:]
    on_emulated = json.loads([line for line in emulated.stdout.splitlines() if line.startswith("FOUND ")][-1][6:])
    assert {name: verdict == "runs" for name, verdict in on_emulated.items()} == {
        name: verdict == "runs" for name, verdict in found.items()}
