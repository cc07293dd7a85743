"""The dxcore stand-in names its adapter after the Vulkan device, and dmlprof reads a GPU's name as a GPU.

Every realdml adapter was once named "llvmpipe/lavapipe", so dmlprof labelled an NVIDIA GPU's times a
CPU's. The stand-in is built here from tools/realdml/dxcore_shim.c (what a realdml build ships) and put
first on the library path, so the test judges the source, whatever build ``env.sh`` points at.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dmlprof.backends.dml import software_adapter

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.realdml

_NAME = "import torch_directml; print(torch_directml.device_name(0).replace(chr(0), '').strip())"


@pytest.fixture(scope="module")
def shim_env(realdml, tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to build the dxcore stand-in")
    out = tmp_path_factory.mktemp("dxcore")
    subprocess.run(["gcc", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-o", str(out / "libdxcore.so"),
                    "-Wl,-soname,libdxcore.so", str(REPO / "tools" / "realdml" / "dxcore_shim.c")], check=True)
    env = dict(realdml)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(out), env.get("LD_LIBRARY_PATH")]))
    env.pop("REALDML_ADAPTER_NAME", None)
    return env


def _adapter_name(env) -> str:
    done = subprocess.run([sys.executable, "-c", _NAME], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_the_adapter_is_named_after_the_vulkan_device_lavapipe_reads_as_a_cpu(shim_env):
    name = _adapter_name(shim_env)
    assert name.startswith("vkd3d-proton (Vulkan: llvmpipe (LLVM ") and name.endswith(") via realdml shim")
    assert "lavapipe" in software_adapter(name)


def test_a_gpus_name_reads_as_a_gpu(shim_env):
    name = _adapter_name(dict(shim_env, REALDML_ADAPTER_NAME="NVIDIA H200"))
    assert name == "vkd3d-proton (Vulkan: NVIDIA H200) via realdml shim"
    assert software_adapter(name) == ""
