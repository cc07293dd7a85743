"""Every branch of every doctor check, on simulated machines (Snapshots built by hand)."""
from __future__ import annotations

import dataclasses
import json

import pytest

from dmlprof.doctor.devices import (auto_device, check_cuda, check_directml_adapter_possible, check_directml_adapters,
                                    check_directml_float64, check_mps, check_scan_device, check_xpu, device_available)
from dmlprof.doctor.gather import gather_snapshot, probe_from_availability
from dmlprof.doctor.packages import (check_dependencies, check_directml_package, check_directml_torch_pin,
                                     check_exact_predictions, check_python, check_torch, check_torchvision, exact_pins,
                                     release, torchvision_for)
from dmlprof.doctor.settings import (PLACEBO_ENV, check_autocast, check_bf16, check_dml_visible_devices, check_float64,
                                     check_inference_mode, check_placebo_env, check_with_stack, find_settings)
from dmlprof.doctor.snapshot import STATUSES, Check, DirectMLProbe, Snapshot, TorchFacts
from dmlprof.doctor.table import CHECKS, exit_code, render_table, run_checks, tally, to_json

HEALTHY_PACKAGES = {"torch": "2.13.0+cpu", "pandas": "2.2.0", "tabulate": "0.9.0", "jinja2": "3.1.4"}
DML_PACKAGES = {"torch": "2.4.1", "torchvision": "0.19.1", "torch-directml": "0.2.5.dev240914",
                "pandas": "2.2.0", "tabulate": "0.9.0", "jinja2": "3.1.4"}
DML_REQUIRES = {"torch-directml": ["torch==2.4.1", "torchvision==0.19.1"]}
NO_ADAPTER = "Linux without WSL2's /usr/lib/wsl/lib or /dev/dxg: no D3D12 adapter can exist"


def snap(**overrides) -> Snapshot:
    """A plain Linux box with a CPU build of torch; override what a test is about."""
    base = dict(
        platform="linux", platform_release="6.1.0", python_version=(3, 11, 7),
        packages=dict(HEALTHY_PACKAGES), torch=TorchFacts(version="2.13.0+cpu", xpu_present=True),
        directml_adapter_possible=False, directml_adapter_reason=NO_ADAPTER,
    )
    base.update(overrides)
    return Snapshot(**base)


def windows_dml(adapters=None, available=True, reason="", **overrides) -> Snapshot:
    """Windows with torch-directml 0.2.5 on torch 2.4.1 and a probed adapter."""
    if adapters is None:
        adapters = [{"index": 0, "name": "AMD Radeon RX 6600", "float64": True, "memory_used_mb": 412.0}]
    base = dict(
        platform="win32", platform_release="10", packages=dict(DML_PACKAGES), requires=dict(DML_REQUIRES),
        torch=TorchFacts(version="2.4.1+cpu", xpu_present=True), directml_adapter_possible=True,
        directml_adapter_reason="Windows", directml_probe=DirectMLProbe(available, reason, adapters),
    )
    base.update(overrides)
    return snap(**base)


def names(rows):
    return [r.name for r in rows]


# -- helpers -------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("2.4.1+cu121", (2, 4, 1)), ("0.19.1", (0, 19, 1)), ("0.2.5.dev240914", (0, 2, 5)), ("2.13", (2, 13)),
    ("", ()), (None, ()), ("unknown version", ()),
])
def test_release_reads_the_numeric_part(text, expected):
    assert release(text) == expected


def test_exact_pins_reads_only_unconditional_equality_pins():
    pins = exact_pins(["torch==2.4.1", "torchvision == 0.19.1", "numpy>=1.21",
                              "pytest==8.0; extra == \"test\"", "Some_Pkg[x]==1.0"])
    assert pins == {"torch": "2.4.1", "torchvision": "0.19.1", "some-pkg": "1.0"}


@pytest.mark.parametrize("torch_version, expected", [("2.4.1", "0.19"), ("2.13.0+cpu", "0.28"), ("2.0.0", "0.15"),
                                                     ("1.13.1", None), ("", None)])
def test_torchvision_series_for_torch(torch_version, expected):
    assert torchvision_for(torch_version) == expected


def test_check_rejects_an_unknown_status():
    with pytest.raises(ValueError):
        Check("x", "great", "detail")


# -- python ----------------------------------------------------------------------
def test_python_too_old_fails_and_blocks():
    row = check_python(snap(python_version=(3, 8, 18)))
    assert (row.status, row.blocking) == ("fail", True) and "3.9" in row.detail


def test_python_newer_than_directml_wheels_is_info_on_windows_and_linux():
    for platform in ("win32", "linux"):
        row = check_python(snap(platform=platform, python_version=(3, 13, 1)))
        assert row.status == "info" and "3.12" in row.remedy


def test_python_newer_than_directml_wheels_is_fine_on_macos():
    assert check_python(snap(platform="darwin", python_version=(3, 13, 1))).status == "ok"


def test_python_supported_is_ok():
    row = check_python(snap())
    assert row.status == "ok" and "3.11.7" in row.detail


# -- torch -----------------------------------------------------------------------
def test_torch_missing_fails_and_blocks_with_the_import_error():
    row = check_torch(snap(torch=None, torch_error="ModuleNotFoundError: No module named 'torch'"))
    assert (row.status, row.blocking) == ("fail", True) and "No module named" in row.detail


def test_torch_missing_without_a_reason_says_not_installed():
    row = check_torch(snap(torch=None))
    assert row.status == "fail" and "not installed" in row.detail


def test_torch_too_old_fails_and_blocks():
    row = check_torch(snap(torch=TorchFacts(version="2.3.1")))
    assert (row.status, row.blocking) == ("fail", True)


@pytest.mark.parametrize("facts, build", [
    (TorchFacts(version="2.5.1+rocm6.2", cuda_version=None, hip_version="6.2.41133"), "ROCm 6.2.41133 build"),
    (TorchFacts(version="2.4.1+cu121", cuda_version="12.1"), "CUDA 12.1 build"),
    (TorchFacts(version="2.13.0+cpu"), "CPU build"),
    (TorchFacts(version="2.13.0", mps_built=True), "CPU build with MPS"),
])
def test_torch_names_its_build(facts, build):
    row = check_torch(snap(torch=facts))
    assert row.status == "ok" and build in row.detail


# -- dependencies ------------------------------------------------------------------
def test_missing_pandas_or_tabulate_fails_and_blocks():
    row = check_dependencies(snap(packages={"torch": "2.13.0", "jinja2": "3"}))
    assert (row.status, row.blocking) == ("fail", True) and "pandas, tabulate" in row.detail


def test_missing_jinja2_only_warns():
    packages = dict(HEALTHY_PACKAGES, jinja2=None)
    row = check_dependencies(snap(packages=packages))
    assert row.status == "warn" and "--html" in row.detail


def test_dependencies_present_are_ok():
    assert check_dependencies(snap()).status == "ok"


# -- torch-directml and its pins -------------------------------------------------------
def test_directml_installed_is_ok():
    row = check_directml_package(windows_dml())
    assert row.status == "ok" and "0.2.5.dev240914" in row.detail


def test_directml_missing_is_info_with_an_install_line_where_it_can_run():
    row = check_directml_package(snap())
    assert row.status == "info" and "torch-directml==0.2.5.dev240914" in row.remedy


def test_directml_missing_on_macos_suggests_nothing():
    row = check_directml_package(snap(platform="darwin"))
    assert row.status == "info" and row.remedy == ""


def test_pin_is_silent_without_directml():
    assert check_directml_torch_pin(snap()) is None


def test_pin_matches_local_build_suffix():
    packages = dict(DML_PACKAGES, torch="2.4.1+cu121")
    row = check_directml_torch_pin(windows_dml(packages=packages))
    assert row.status == "ok" and "torch==2.4.1" in row.detail


def test_pin_mismatch_fails_without_blocking_dmlprof():
    packages = dict(DML_PACKAGES, torch="2.13.0+cpu")
    row = check_directml_torch_pin(windows_dml(packages=packages))
    assert (row.status, row.blocking) == ("fail", False)
    assert "2.13.0" in row.detail and "torch==2.4.1 torchvision==0.19.1" in row.remedy


def test_pin_is_read_from_the_installed_metadata_not_assumed():
    # GIVEN an older torch-directml whose metadata pins torch 2.3.1
    packages = dict(DML_PACKAGES, torch="2.3.1", **{"torch-directml": "0.2.4.dev240815"})
    row = check_directml_torch_pin(windows_dml(packages=packages, requires={"torch-directml": ["torch==2.3.1"]}))
    assert row.status == "ok" and "torch==2.3.1" in row.detail


def test_pin_falls_back_to_the_known_release_pins_when_metadata_is_unreadable():
    packages = dict(DML_PACKAGES, torch="2.5.0")
    row = check_directml_torch_pin(windows_dml(packages=packages, requires={}))
    assert row.status == "fail" and "torch==2.4.1" in row.detail


def test_pin_without_a_torch_pin_in_metadata_is_info():
    row = check_directml_torch_pin(windows_dml(requires={"torch-directml": ["torchvision==0.19.1"]}))
    assert row.status == "info"


def test_pin_with_torch_missing_fails():
    packages = dict(DML_PACKAGES, torch=None)
    row = check_directml_torch_pin(windows_dml(packages=packages, torch=None))
    assert row.status == "fail" and "not installed" in row.detail


# -- exact predictions ---------------------------------------------------------------------
def test_exact_predictions_on_torch_241_are_ok():
    row = check_exact_predictions(windows_dml())
    assert row.status == "ok" and "2.4.1" in row.detail and not row.remedy


def test_exact_predictions_on_a_newer_torch_say_how_to_get_torch_241_on_linux():
    row = check_exact_predictions(snap())
    assert row.status == "info" and "2.13.0" in row.detail and "isneginf" in row.detail
    assert "python -m venv dml241" in row.remedy and 'dml241/bin/pip install "numpy<2" -e ".[dml]"' in row.remedy
    assert "dml241/bin/dmlprof scan model.py --target dml" in row.remedy and not row.blocking


def test_exact_predictions_on_windows_use_the_scripts_folder():
    row = check_exact_predictions(snap(platform="win32", platform_release="10"))
    assert "dml241\\Scripts\\pip install" in row.remedy and "dml241/bin" not in row.remedy


def test_exact_predictions_name_a_python_torch_241_has_wheels_for():
    linux = check_exact_predictions(snap(python_version=(3, 13, 1)))
    windows = check_exact_predictions(snap(python_version=(3, 13, 1), platform="win32"))
    assert linux.remedy.startswith("exact predictions") and "python3.12 -m venv" in linux.remedy
    assert "py -3.12 -m venv" in windows.remedy and "3.8 to 3.12" in windows.remedy


def test_exact_predictions_on_macos_point_to_linux_or_windows():
    row = check_exact_predictions(snap(platform="darwin"))
    assert row.status == "info" and "no macOS wheels" in row.remedy


def test_exact_predictions_say_nothing_without_torch():
    assert check_exact_predictions(snap(torch=None)) is None


# -- torchvision ------------------------------------------------------------------------
def test_torchvision_missing_is_info():
    assert check_torchvision(snap()).status == "info"


def test_torchvision_matching_the_directml_pin_is_ok():
    assert check_torchvision(windows_dml()).status == "ok"


def test_torchvision_against_the_directml_pin_fails():
    row = check_torchvision(windows_dml(packages=dict(DML_PACKAGES, torchvision="0.20.1")))
    assert row.status == "fail" and "torchvision==0.19.1" in row.remedy


def test_torchvision_pairs_with_torch_without_directml():
    ok = check_torchvision(snap(packages=dict(HEALTHY_PACKAGES, torchvision="0.28.0+cpu")))
    bad = check_torchvision(snap(packages=dict(HEALTHY_PACKAGES, torchvision="0.19.1")))
    assert ok.status == "ok"
    assert bad.status == "fail" and "0.28" in bad.detail and "torchvision==0.28.*" in bad.remedy


def test_torchvision_pairing_unknown_for_other_torch_majors_is_info():
    row = check_torchvision(snap(packages=dict(HEALTHY_PACKAGES, torch="3.0.0", torchvision="1.0.0")))
    assert row.status == "info"


# -- can a DirectML adapter exist here -----------------------------------------------------
def test_adapter_possible_is_ok_with_its_reason():
    row = check_directml_adapter_possible(windows_dml())
    assert row.status == "ok" and row.detail == "Windows"


def test_no_adapter_on_plain_linux_is_info_when_directml_is_not_installed():
    row = check_directml_adapter_possible(snap())
    assert row.status == "info" and "no D3D12 adapter" in row.detail and "Windows" in row.remedy


def test_no_adapter_with_directml_installed_warns():
    row = check_directml_adapter_possible(
        snap(packages=dict(DML_PACKAGES), requires=dict(DML_REQUIRES), torch=TorchFacts(version="2.4.1")))
    assert row.status == "warn" and row.detail.startswith("torch-directml is installed, but")


def test_no_adapter_when_dml_is_asked_for_warns():
    assert check_directml_adapter_possible(snap(device="dml")).status == "warn"


def test_wsl_without_gpu_libraries_points_at_the_windows_driver():
    row = check_directml_adapter_possible(snap(platform_release="5.15.153.1-microsoft-standard-WSL2"))
    assert "Windows GPU driver with WSL2" in row.remedy


def test_no_adapter_on_macos_has_no_os_remedy_but_mentions_the_predictor_when_there():
    assert check_directml_adapter_possible(snap(platform="darwin", directml_adapter_reason="DirectML does not run on darwin")).remedy == ""
    row = check_directml_adapter_possible(snap(platform="darwin", predictor_available=True))
    assert "--target dml" in row.remedy


# -- adapters and float64 (from the child-process probe) -----------------------------------------
def test_adapters_row_is_absent_when_nothing_was_probed():
    assert check_directml_adapters(snap()) is None
    assert check_directml_float64(snap()) is None


def test_adapters_row_names_devices_and_memory_in_use():
    adapters = [{"index": 0, "name": "AMD Radeon RX 6600", "float64": True, "memory_used_mb": 412.0},
                {"index": 1, "name": "Intel UHD 770", "float64": False, "memory_used_mb": None}]
    row = check_directml_adapters(windows_dml(adapters=adapters))
    assert row.status == "ok"
    assert "[0] AMD Radeon RX 6600, 412 MiB in use" in row.detail and "[1] Intel UHD 770" in row.detail


def test_adapters_available_without_details_is_still_ok():
    row = check_directml_adapters(windows_dml(adapters=[]))
    assert row.status == "ok" and row.detail == "available"


def test_no_adapter_seen_warns_and_a_failed_probe_fails():
    none_seen = check_directml_adapters(windows_dml(adapters=[], available=False, reason="torch-directml sees no adapter"))
    crashed = check_directml_adapters(windows_dml(adapters=[], available=False,
                                                         reason="torch-directml could not enumerate adapters: Unknown error -2147"))
    assert none_seen.status == "warn" and crashed.status == "fail" and "Unknown error" in crashed.detail


def test_hidden_adapters_are_named_as_a_possible_cause():
    row = check_directml_adapters(windows_dml(adapters=[], available=False, reason="torch-directml sees no adapter",
                                                     env={"DML_VISIBLE_DEVICES": "3"}))
    assert "DML_VISIBLE_DEVICES=3" in row.remedy


def test_float64_rows():
    assert check_directml_float64(windows_dml()).status == "ok"
    no = check_directml_float64(windows_dml(adapters=[{"index": 0, "name": "iGPU", "float64": False}]))
    assert no.status == "warn" and "Double (Float64)" in no.detail and "float32" in no.remedy
    unknown = check_directml_float64(windows_dml(adapters=[{"index": 0, "name": "iGPU", "float64": None}]))
    assert unknown.status == "info"
    assert check_directml_float64(windows_dml(adapters=[], available=False, reason="x")) is None


# -- CUDA / ROCm, MPS, XPU --------------------------------------------------------------------
def test_cuda_rows():
    assert check_cuda(snap(torch=None)) is None
    cuda = check_cuda(snap(torch=TorchFacts(version="2.6.0", cuda_version="12.4", cuda_available=True,
                                                   cuda_devices=["NVIDIA H200"])))
    assert cuda.name == "CUDA" and cuda.status == "ok" and "NVIDIA H200" in cuda.detail
    rocm = check_cuda(snap(torch=TorchFacts(version="2.5.1", hip_version="6.2", cuda_available=True,
                                                   cuda_devices=["AMD Instinct MI300X"])))
    assert rocm.name == "ROCm" and rocm.status == "ok" and "ROCm 6.2" in rocm.detail
    cpu = check_cuda(snap())
    assert cpu.status == "info" and "without CUDA or ROCm" in cpu.detail
    no_gpu = check_cuda(snap(torch=TorchFacts(version="2.4.1+cu121", cuda_version="12.1")))
    assert no_gpu.status == "info" and "nvidia-smi" in no_gpu.remedy
    no_rocm_gpu = check_cuda(snap(torch=TorchFacts(version="2.5.1", hip_version="6.2")))
    assert "rocm-smi" in no_rocm_gpu.remedy


@pytest.mark.parametrize("variable, value, hip", [("CUDA_VISIBLE_DEVICES", "", None), ("CUDA_VISIBLE_DEVICES", "-1", None),
                                                  ("HIP_VISIBLE_DEVICES", "", "6.2")])
def test_hidden_gpus_warn(variable, value, hip):
    facts = TorchFacts(version="2.5.1", cuda_version=None if hip else "12.1", hip_version=hip)
    row = check_cuda(snap(torch=facts, env={variable: value}))
    assert row.status == "warn" and variable in row.detail


def test_mps_rows():
    assert check_mps(snap()) is None  # not macOS
    assert check_mps(snap(platform="darwin", torch=None)) is None
    on = check_mps(snap(platform="darwin", torch=TorchFacts(version="2.4.1", mps_built=True, mps_available=True),
                               env={"PYTORCH_ENABLE_MPS_FALLBACK": "1"}))
    assert on.status == "ok"
    off = check_mps(snap(platform="darwin", torch=TorchFacts(version="2.4.1", mps_built=True, mps_available=True)))
    assert off.status == "warn" and "PYTORCH_ENABLE_MPS_FALLBACK=1" in off.remedy
    unavailable = check_mps(snap(platform="darwin", torch=TorchFacts(version="2.4.1", mps_built=True)))
    assert unavailable.status == "warn"
    not_built = check_mps(snap(platform="darwin", torch=TorchFacts(version="2.4.1")))
    assert not_built.status == "info"


def test_xpu_rows():
    assert check_xpu(snap(torch=None)) is None
    assert check_xpu(snap(torch=TorchFacts(version="2.3.1", xpu_present=False))).status == "info"
    assert check_xpu(snap()).status == "info"
    facts = TorchFacts(version="2.6.0", xpu_present=True, xpu_available=True, xpu_devices=["Intel Arc A770"])
    quiet = check_xpu(snap(torch=facts))
    assert quiet.status == "warn" and "PYTORCH_DEBUG_XPU_FALLBACK=1" in quiet.remedy
    loud = check_xpu(snap(torch=facts, env={"PYTORCH_DEBUG_XPU_FALLBACK": "1"}))
    assert loud.status == "ok" and "Intel Arc A770" in loud.detail


# -- the device a scan will use -------------------------------------------------------------------
def test_auto_device_follows_the_runner_order():
    cuda_and_dml = windows_dml(torch=TorchFacts(version="2.4.1", cuda_version="12.1", cuda_available=True,
                                                cuda_devices=["RTX 4090"]))
    assert auto_device(cuda_and_dml) == "cuda"
    assert auto_device(windows_dml()) == "dml"
    assert auto_device(windows_dml(available=False, reason="torch-directml sees no adapter")) == "cpu"
    assert auto_device(snap()) == "cpu"
    assert auto_device(snap(torch=TorchFacts(version="2.6", xpu_present=True, xpu_available=True))) == "xpu"
    assert auto_device(snap(platform="darwin", torch=TorchFacts(version="2.6", mps_available=True))) == "mps"


def test_device_available_reasons():
    assert device_available(snap(torch=None), "cuda") == (False, "torch does not import")
    assert device_available(snap(), "dml") == (False, "torch-directml is not installed")
    installed_linux = snap(packages=dict(DML_PACKAGES))
    assert device_available(installed_linux, "dml") == (False, NO_ADAPTER)
    not_asked = windows_dml(directml_probe=None)
    assert device_available(not_asked, "dml")[0] is False
    assert device_available(snap(), "emulated-dml")[0] is True
    assert device_available(snap(), "tpu")[0] is False
    assert device_available(snap(), "cpu")[0] is True


def test_scan_device_rows():
    cpu = check_scan_device(snap())
    assert cpu.status == "info" and "CPU" in cpu.detail and cpu.remedy == ""
    assert "--target dml" in check_scan_device(snap(predictor_available=True)).remedy
    assert check_scan_device(windows_dml()).detail == "--device auto will use dml"
    assert check_scan_device(snap(device="cpu")).status == "ok"
    asked = check_scan_device(snap(device="dml"))
    assert (asked.status, asked.blocking) == ("fail", True) and "not installed" in asked.detail


# -- settings known to fail on DirectML ------------------------------------------------------------
SETTING_CHECKS = [check_with_stack, check_inference_mode, check_bf16, check_autocast,
                  check_float64]


@pytest.mark.parametrize("check", SETTING_CHECKS)
def test_settings_say_nothing_when_directml_is_not_the_device(check):
    assert check(snap()) is None


@pytest.mark.parametrize("check", SETTING_CHECKS)
def test_settings_warn_with_a_remedy_when_directml_is_the_device(check):
    no_double = [{"index": 0, "name": "iGPU", "float64": False}]
    row = check(windows_dml(adapters=no_double))
    assert row.status == "warn" and row.remedy


@pytest.mark.parametrize("check", SETTING_CHECKS)
def test_settings_warn_when_dml_is_asked_for_even_without_an_adapter(check):
    row = check(snap(device="dml"))
    assert row.status == "warn"


@pytest.mark.parametrize("check", SETTING_CHECKS)
def test_settings_are_ok_when_the_files_read_do_not_use_them(check):
    no_double = [{"index": 0, "name": "iGPU", "float64": False}]
    row = check(windows_dml(adapters=no_double, files=("train.py",), source_findings={}))
    assert row.status == "ok" and "train.py" in row.detail


def test_settings_found_in_files_name_the_line():
    findings = {"inference_mode": ["train.py:12"], "bf16": ["train.py:30", "eval.py:4"]}
    dml = windows_dml(files=("train.py", "eval.py"), source_findings=findings)
    row = check_inference_mode(dml)
    assert row.status == "warn" and "train.py:12" in row.detail and "no_grad" in row.remedy
    assert "eval.py:4" in check_bf16(dml).detail
    # on another device the same finding is only information
    elsewhere = check_bf16(snap(files=("train.py",), source_findings=findings))
    assert elsewhere.status == "info" and "train.py:30" in elsewhere.detail


def test_float64_setting_is_ok_on_an_adapter_that_runs_doubles():
    row = check_float64(windows_dml(source_findings={"float64": ["a.py:1"]}, files=("a.py",)))
    assert row.status == "ok" and "a.py:1" in row.detail


def test_find_settings_reads_text_and_skips_comments():
    sources = {
        "train.py": "\n".join([
            "import torch",
            "with torch.inference_mode():",
            "    x = x.to(torch.bfloat16)",
            "# torch.profiler.profile(with_stack=True) is commented out",
            "prof = torch.profiler.profile(with_stack = True)",
            "y = y.double()",
            "z = torch.zeros(3, dtype=torch.float64)",
            "w = torch.zeros(3, dtype=torch.float32)  # not float64",
            "autocast_dtype = 'bf16'",
            "scaler = torch.cuda.amp.GradScaler()",
            "with torch.autocast(device_type='cuda', dtype=torch.float16):",
        ]),
    }
    found = find_settings(["train.py"], read=sources.__getitem__)
    assert found == {
        "inference_mode": ["train.py:2"],
        "bf16": ["train.py:3", "train.py:9"],
        "with_stack": ["train.py:5"],
        "float64": ["train.py:6", "train.py:7"],
        "autocast": ["train.py:10", "train.py:11"],
    }


# -- environment variables -------------------------------------------------------------------
@pytest.mark.parametrize("variable", PLACEBO_ENV)
def test_placebo_variables_warn_and_name_the_real_one(variable):
    row = check_placebo_env(snap(env={variable: "1"}))
    assert row.status == "warn" and variable in row.detail
    assert "DML_VISIBLE_DEVICES" in row.remedy and "torch.dml.empty_cache()" in row.remedy
    assert "torch.backends.dml" in row.remedy and "ProfilerActivity.DML" in row.remedy


def test_no_placebo_variables_is_ok_where_directml_matters_and_silent_elsewhere():
    assert check_placebo_env(windows_dml()).status == "ok"
    assert check_placebo_env(snap()) is None


def test_dml_visible_devices_is_real_and_reported_as_info():
    assert check_dml_visible_devices(snap()) is None
    absent = check_dml_visible_devices(snap(env={"DML_VISIBLE_DEVICES": "1"}))
    assert absent.status == "info" and "not installed" in absent.detail
    present = check_dml_visible_devices(windows_dml(env={"DML_VISIBLE_DEVICES": "1"}))
    assert present.status == "info" and "sees only" in present.detail


# -- the whole run ------------------------------------------------------------------------------
def test_every_check_returns_a_check_or_nothing_on_varied_machines():
    machines = [snap(), windows_dml(), snap(torch=None), snap(platform="darwin"), snap(device="dml"),
                windows_dml(available=False, reason="torch-directml sees no adapter", adapters=[])]
    for machine in machines:
        for check in CHECKS:
            found = check(machine)
            for row in found if isinstance(found, list) else [found]:  # the source calls give a row per kind
                assert row is None or (isinstance(row, Check) and row.status in STATUSES and row.detail)


def test_a_check_that_raises_becomes_a_failed_row_and_the_rest_still_run():
    def check_broken(_):
        raise KeyError("oops")

    rows = run_checks(snap(), [check_python, check_broken, check_torch])
    assert names(rows) == ["python", "broken", "torch"]
    assert rows[1].status == "fail" and "oops" in rows[1].detail


def test_exit_code_blocks_only_on_blocking_failures_unless_strict():
    healthy = run_checks(snap())
    assert exit_code(healthy) == 0
    assert not any(r.status == "fail" for r in healthy)
    mismatched = run_checks(windows_dml(packages=dict(DML_PACKAGES, torch="2.13.0")))
    assert any(r.status == "fail" for r in mismatched)
    assert exit_code(mismatched) == 0 and exit_code(mismatched, strict=True) == 1
    assert exit_code(run_checks(snap(torch=None))) == 1
    assert exit_code(run_checks(snap(device="dml"))) == 1


def test_plain_linux_ci_machine_reads_truthfully():
    """GIVEN the CI box (Linux, CPU torch, no DirectML) THEN nothing fails and DirectML is 'not installed'."""
    rows = {r.name: r for r in run_checks(snap())}
    assert rows["torch-directml"].detail == "torch-directml is not installed"
    assert rows["DirectML adapter possible"].status == "info"
    assert "DirectML adapters" not in rows and "profiler with_stack" not in rows
    assert rows["scan device"].detail.startswith("--device auto will use the CPU")


def test_table_and_json_render_every_row():
    machine = windows_dml(env={"DML_EXECUTION_MODE": "1"})
    rows = run_checks(machine)
    table = render_table(rows, width=400)
    assert table.splitlines()[0].split()[:4] == ["status", "check", "detail", "remedy"]
    assert "WARN" in table and "DirectML env advice" in table
    assert table.rstrip().endswith(tally(rows))
    data = json.loads(to_json(rows, machine))
    assert [c["name"] for c in data["checks"]] == names(rows)
    assert data["exit_code"] == 0 and data["snapshot"]["env"] == {"DML_EXECUTION_MODE": "1"}
    assert data["snapshot"]["directml_probe"]["adapters"][0]["name"] == "AMD Radeon RX 6600"


def test_tally_counts_each_status():
    rows = [Check("a", "ok", "x"), Check("b", "warn", "x"), Check("c", "warn", "x"), Check("d", "info", "x")]
    assert tally(rows) == "1 ok, 2 warn, 0 fail, 1 info"


# -- the real snapshot ----------------------------------------------------------------------------
def test_real_snapshot_is_truthful_and_never_probes_where_no_adapter_can_exist():
    import importlib.util
    import sys

    import torch

    from dmlprof.backends.dml import adapter_possible

    real = gather_snapshot()
    assert real.platform == sys.platform and real.python_version == tuple(sys.version_info[:3])
    assert real.torch is not None and real.torch.version == torch.__version__
    assert real.torch.cuda_available == torch.cuda.is_available()
    assert real.directml_installed == (importlib.util.find_spec("torch_directml") is not None)
    possible, _ = adapter_possible()
    assert real.directml_adapter_possible == possible
    if not possible:
        assert real.directml_probe is None
    json.dumps(real.to_dict())  # the snapshot is plain data
    assert dataclasses.asdict(real)["device"] == "auto"


def test_float64_setting_warns_when_any_adapter_lacks_doubles():
    mixed = [{"index": 0, "name": "dGPU", "float64": True}, {"index": 1, "name": "iGPU", "float64": False}]
    assert check_float64(windows_dml(adapters=mixed)).status == "warn"


FAKE_DIRECTML = '''
def device_count():
    return 2
def device_name(i):
    return ["Radeon RX 7600", "Intel UHD 770"][i]
def has_float64_support(i):
    if i == 1:
        raise RuntimeError("Unknown error -2005270523")
    return True
def gpu_memory(i):
    return [100.0, 28.5]
'''


def test_the_child_process_probe_reads_names_float64_and_memory(tmp_path, monkeypatch):
    """GIVEN a stand-in torch_directml on the child's path WHEN probed THEN each adapter's facts come back."""
    from dmlprof.backends.dml import probe_adapters

    (tmp_path / "torch_directml.py").write_text(FAKE_DIRECTML, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    answer = probe_adapters.__wrapped__(timeout_s=60)  # bypass the cache: this is not the real package
    probe = probe_from_availability(answer)
    assert probe.available
    assert probe.adapters == [
        {"index": 0, "name": "Radeon RX 7600", "float64": True, "memory_used_mb": 128.5},
        {"index": 1, "name": "Intel UHD 770", "float64": None, "memory_used_mb": 128.5},
    ]
    row = check_directml_float64(windows_dml(adapters=probe.adapters))
    assert row.status == "info" and "adapter 1" in row.detail


def test_a_probe_that_crashes_is_a_reason_not_a_crash(tmp_path, monkeypatch):
    (tmp_path / "torch_directml.py").write_text("import os\nos._exit(134)  # dies the way a native crash does: no Python error\n", encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    from dmlprof.backends.dml import probe_adapters

    probe = probe_from_availability(probe_adapters.__wrapped__(timeout_s=60))
    assert not probe.available and probe.adapters == []
    assert check_directml_adapters(windows_dml(adapters=[], available=False, reason=probe.reason)).status == "fail"


# -- the table at a terminal's width, and the calls a scan stops on or flags ------------------------------------------
FIVE_CALLS = """import torch
import torch.nn as nn
import torch.nn.functional as F

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 16)  # line 8

    def forward(self, x, labels, index):
        target = F.one_hot(labels, 4)  # line 11
        agg = x.new_zeros(4, 8).scatter_reduce(0, index, x, reduce="amax")  # line 12
        eye = torch.eye(4, device=x.device)  # line 13
        # torch.eye(2) in a comment is not a call
        return self.rnn(x)[0], target, agg, eye

model = Net().cuda()  # line 17
spectrum = torch.fft.rfft(torch.randn(8))  # line 18
kth = torch.randn(4, 3).kthvalue(2)  # line 19
pooled = torch.randn(4, 3).amax(-1)  # line 20
"""


@pytest.mark.parametrize("width", [80, 100])
def test_table_fits_the_terminal_width(width):
    """GIVEN a machine whose rows have long details and remedies WHEN rendered at 80 columns THEN no line is wider,
    and every remedy is still there, whole (moved under its row, not cut)."""
    findings = {"call:one_hot": ["train.py:3"], "call:eye": ["train.py:9"], "call:rnn": ["model.py:12"]}
    rows = run_checks(windows_dml(env={"DML_EXECUTION_MODE": "1"}, files=("train.py",), source_findings=findings))
    table = render_table(rows, width=width)
    assert max(len(line) for line in table.splitlines()) <= width
    flat = " ".join(table.split())
    for row in rows:
        if row.remedy:
            assert " ".join(row.remedy.split()) in flat.replace("remedy ", "", 0)


def test_doctor_file_names_each_call_a_dml_scan_stops_on_or_flags(tmp_path):
    """GIVEN a file with .cuda(), F.one_hot, nn.LSTM, scatter_reduce(amax) and torch.eye WHEN the doctor reads it
    for a DirectML scan THEN each is named with its line, with the verdict the scan's own rules give."""
    from dmlprof.backends.errors import match_known_error
    from dmlprof.doctor.source_calls import find_calls

    path = tmp_path / "five.py"
    path.write_text(FIVE_CALLS, encoding="utf-8")
    found = find_calls([str(path)])
    assert found == {"rnn": ["five.py:8"], "one_hot": ["five.py:11"], "scatter_reduce": ["five.py:12"],
                     "eye": ["five.py:13"], "cuda": ["five.py:17"], "complex": ["five.py:18"],
                     "kthvalue": ["five.py:19"], "amax": ["five.py:20"]}
    machine = windows_dml(files=(str(path),), device="dml",
                          source_findings={f"call:{k}": v for k, v in found.items()})
    rows = {r.name: r for r in run_checks(machine)}
    assert "five.py:17" in rows['.cuda() / "cuda"'].detail and "--from cuda" in rows['.cuda() / "cuda"'].remedy
    one_hot = rows["F.one_hot"]
    assert one_hot.status == "fail" and "five.py:11" in one_hot.detail
    # the scan's known error for DirectML's scatter refusal, not a copy of it
    assert one_hot.remedy == match_known_error("DirectML scatter doesn't allow partially modified dimensions").remedy
    assert rows["nn.LSTM / nn.GRU"].status == "fail" and "five.py:8" in rows["nn.LSTM / nn.GRU"].detail
    assert "_thnn_fused_lstm_cell" in rows["nn.LSTM / nn.GRU"].detail
    assert rows["scatter_reduce"].status == "warn" and "fallback" in rows["scatter_reduce"].detail
    assert "amax" in rows["scatter_reduce"].remedy
    assert rows["torch.eye"].status == "fail" and "SIGSEGV" in rows["torch.eye"].detail
    assert "five.py:13" in rows["torch.eye"].detail and "five.py:14" not in rows["torch.eye"].detail
    assert rows["torch.fft / complex views"].status == "fail" and "five.py:18" in rows["torch.fft / complex views"].detail
    assert rows["kthvalue"].status == "fail" and "five.py:19" in rows["kthvalue"].detail
    amax = rows["amax / amin"]  # flagged as the scan flags it: its backward zeroes the gradients
    assert amax.status == "warn" and "five.py:20" in amax.detail and "zero" in amax.detail
    table = render_table(list(rows.values()), width=80)
    assert max(len(line) for line in table.splitlines()) <= 80


def test_doctor_source_rows_follow_the_rules(monkeypatch):
    """WHEN the failure rule for eye no longer fails THEN the doctor says nothing of torch.eye (same rules)."""
    from dmlprof.directml import failures

    monkeypatch.setitem(failures.RULES, "aten::eye.m", lambda args, kwargs: None)
    rows = run_checks(windows_dml(files=("a.py",), device="dml", source_findings={"call:eye": ["a.py:1"]}))
    assert "torch.eye" not in names(rows)


def test_doctor_source_rows_without_torch_leave_it_to_the_torch_row():
    rows = run_checks(snap(torch=None, files=("a.py",), source_findings={"call:eye": ["a.py:1"]}))
    assert "torch.eye" not in names(rows) and not any("check itself failed" in r.detail for r in rows)


def test_doctor_says_plainly_when_the_files_it_read_have_none_of_the_calls_it_looks_for():
    # GIVEN files read with nothing found; THEN one row says so, naming them (silence would read as not looked)
    rows = {r.name: r for r in run_checks(snap(files=("train.py", "eval.py"), source_findings={}))}
    row = rows["calls a scan flags"]
    assert row.status == "ok" and "train.py" in row.detail and "eval.py" in row.detail and "F.one_hot" in row.detail
    # WHEN a call is found THEN its own row speaks, not this one; and without files neither is said
    found = run_checks(snap(files=("train.py",), source_findings={"call:one_hot": ["train.py:3"]}))
    assert "calls a scan flags" not in names(found) and "F.one_hot" in names(found)
    assert "calls a scan flags" not in names(run_checks(snap()))


def test_the_amax_remedy_names_checks_that_can_see_the_wrong_value():
    # the emulated device computes with the CPU's kernels: its --verify finds amax's backward right, so the
    # remedy must send the user where the wrong value shows (real DirectML's --verify, or --confirm)
    rows = {r.name: r for r in run_checks(snap(files=("net.py",), source_findings={"call:amax": ["net.py:7"]}))}
    remedy = rows["amax / amin"].remedy
    assert "--device dml --verify" in remedy and "--confirm" in remedy and "emulated device" in remedy
