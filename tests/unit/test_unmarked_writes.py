"""Arguments a CPU kernel writes that the op's schema does not mark (re-probe 20, 4): BatchNorm's running statistics.

The emulated device never updated them (torch's cpu_fallback copies back only marked arguments): running_mean 0 after
any number of training forwards, where plain Python and real torch-directml give 1.25454, so every BN model evaluated
under --device emulated-dml or --from cuda computed with untrained statistics. torch-directml's fallback loses such
writes too (batch_norm_update_stats): both devices standing in for DirectML follow dmlprof.directml.unmarked_writes.
Measured on realdml: tests/realdml/test_unmarked_writes_on_real_directml.py.
"""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from dmlprof.directml.unmarked_writes import UNMARKED_WRITES, unmarked_written_slots
from dmlprof.record.tap import op_overload
from dmlprof.testing import torch_version_tuple

pytestmark = pytest.mark.live  # torch-version-sensitive: runs on torch 2.4.1 too

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "tests" / "fixtures" / "unmarked_writes_probe.py"
#: batch_norm_update_stats reaches torch-directml's CPU fallback, which loses what it writes (measured)
UNCHANGED_BY_THE_FALLBACK = [0.0, 4.0]


def _probe():
    spec = importlib.util.spec_from_file_location("unmarked_writes_probe", PROBE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _as_on_directml(found: dict, on_cpu: dict) -> None:
    """``found`` holds what a run on torch-directml holds: the CPU's figures, but where its fallback lost a write."""
    assert found.pop("batch_norm_update_stats") == UNCHANGED_BY_THE_FALLBACK
    on_cpu = dict(on_cpu)
    assert on_cpu.pop("batch_norm_update_stats") != UNCHANGED_BY_THE_FALLBACK  # the CPU's kernel does write them
    # the fallback loses the noise, on every torch: torch 2.6 marks it, but torch-directml runs on 2.4.1 (re-probe 21, 27)
    assert on_cpu.pop("rrelu_with_noise") != 0.0
    assert found.pop("rrelu_with_noise") == 0.0
    flat = _probe().flat
    assert flat(found) == pytest.approx(flat(on_cpu), rel=1e-4, abs=1e-4), (found, on_cpu)


def test_the_emulated_device_updates_running_statistics_as_torch_directml(emulated_dml_backend):
    probe = _probe()
    on_cpu = probe.facts(torch.device("cpu"))
    assert on_cpu["train"][:2] == pytest.approx([1.25454, 13.52716]) and on_cpu["train"][2] == 3
    found = probe.facts(emulated_dml_backend.device())
    assert found["train"][0] != 0.0, "running_mean never moved (the CPU kernel's copy was thrown away)"
    _as_on_directml(found, on_cpu)


def test_the_stand_in_updates_running_statistics_as_torch_directml():
    """Its values path: a kernel of torch-directml's keeps a write into running statistics that are not dense (it
    handed the CPU kernel a copy and copied back only marked arguments); its fallback loses one (it kept it)."""
    on_cpu = _probe().facts(torch.device("cpu"))
    done = subprocess.run([sys.executable, str(PROBE), "standin"], capture_output=True, text=True, cwd=REPO,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    _as_on_directml(json.loads(done.stdout.strip().splitlines()[-1]), on_cpu)


def test_the_stand_in_forgets_running_statistics_a_forward_without_values_wrote():
    """Without values (none kept: a budget of 0 bytes) the stand-in still took running_mean for the zeros it was
    made of after a training forward, a value read later as known; it is unknown, as any output computed so."""
    probe = textwrap.dedent("""
        import torch
        from torch import nn
        from dmlprof.predict.device import device_name, ensure_device
        from dmlprof.predict.standin import StandIn
        from dmlprof.predict.values import ValueStore, constant_of
        from dmlprof.tables import load_table
        ensure_device()
        StandIn(load_table("dml"), [], device_name(), values=ValueStore(max_bytes=0)).install()
        bn = nn.BatchNorm1d(4).to(device_name())
        made = [constant_of(bn.running_mean), constant_of(bn.running_var)]
        bn(torch.randn(8, 4).to(device_name()))
        print(made, [constant_of(bn.running_mean), constant_of(bn.running_var)])
        """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.stdout.strip() == "[0.0, 1.0] [None, None]", done.stderr[-2000:]


@pytest.mark.parametrize("name", sorted(UNMARKED_WRITES))
def test_each_listed_op_names_arguments_of_its_schema_past_its_first_tensor(name):
    """The emulated device's kernel hands host aliases for these arguments and leaves the first tensor argument to
    torch's cpu_fallback, which puts the outputs on that argument's device."""
    overload = op_overload(name)
    assert overload is not None, name
    arguments = overload._schema.arguments
    names = [argument.name for argument in arguments]
    assert set(UNMARKED_WRITES[name]) <= set(names), (name, names)
    first_tensor = next(i for i, argument in enumerate(arguments) if "Tensor" in str(argument.type))
    assert all(names.index(argument) > first_tensor for argument in UNMARKED_WRITES[name])
    assert {n for _, n in unmarked_written_slots(overload)} == set(UNMARKED_WRITES[name])  # marked on this torch too
    if torch_version_tuple() < (2, 5):  # torch-directml's torch: the list is of arguments it leaves unmarked
        assert not any(argument.alias_info is not None and argument.alias_info.is_write for argument in arguments
                       if argument.name in UNMARKED_WRITES[name])
