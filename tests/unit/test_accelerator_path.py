"""The accelerator path without an accelerator: kernel billing, copies, syncs, CPU-tensor calls."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch
from torch.autograd import DeviceType

from dmlprof import analysis
from dmlprof.backends.cuda import CudaBackend
from dmlprof.record.frame import leaves_device, rows_to_frame
from dmlprof.record.profiler import kineto_event_frame


@dataclass
class FakeKinetoEvent:
    """What torch's _KinetoEvent answers, for the fields we read."""

    _name: str
    _start: int
    _duration: int
    _thread: int = 1
    _device: DeviceType = DeviceType.CPU
    _correlation: int = 0
    _linked: int = 0

    def name(self): return self._name
    def start_ns(self): return self._start
    def duration_ns(self): return self._duration
    def start_thread_id(self): return self._thread
    def device_type(self): return self._device
    def correlation_id(self): return self._correlation
    def linked_correlation_id(self): return self._linked


def test_kernels_are_billed_to_the_op_that_launched_them_and_its_enclosing_ops():
    events = [
        FakeKinetoEvent("aten::conv2d", 0, 100, _correlation=1),
        FakeKinetoEvent("aten::convolution", 5, 90, _correlation=2),
        FakeKinetoEvent("aten::cudnn_convolution", 10, 50, _correlation=3),
        FakeKinetoEvent("cudaLaunchKernel", 20, 5, _correlation=4),
        FakeKinetoEvent("aten::add_", 70, 10, _correlation=5),
        FakeKinetoEvent("aten::mm", 200, 30, _thread=2, _correlation=6),  # backward thread
        FakeKinetoEvent("implicit_gemm_kernel", 40, 700, _device=DeviceType.CUDA, _linked=3),
        FakeKinetoEvent("elementwise_kernel", 90, 20, _device=DeviceType.CUDA, _linked=5),
        FakeKinetoEvent("gemm_kernel", 240, 300, _device=DeviceType.CUDA, _linked=6),
        FakeKinetoEvent("orphan_memset", 5, 4, _device=DeviceType.CUDA, _linked=0),
    ]
    frame = kineto_event_frame(events).set_index("name")
    assert frame.loc["aten::cudnn_convolution", "self_device_time_ns"] == 700
    assert frame.loc["aten::convolution", "device_time_ns"] == 720  # its cudnn call + the add_ inside it
    assert frame.loc["aten::conv2d", "device_time_ns"] == 720
    assert frame.loc["aten::mm", "device_time_ns"] == 300 and frame.loc["aten::mm", "parent"] == ""
    assert frame.loc["aten::cudnn_convolution", "parent"] == "aten::convolution"
    assert frame.loc["aten::cudnn_convolution", "grandparent"] == "aten::conv2d"
    assert frame.loc["cudaLaunchKernel", "parent"] == "aten::cudnn_convolution"
    assert "implicit_gemm_kernel" not in frame.index  # device events are billed, not listed
    assert frame["self_device_time_ns"].sum() == 1020  # every linked kernel counted once


def _raw(op, inputs, outputs):
    func = {
        "aten::_to_copy": torch.ops.aten._to_copy.default,
        "aten::copy_": torch.ops.aten.copy_.default,
        "aten::_local_scalar_dense": torch.ops.aten._local_scalar_dense.default,
        "aten::nonzero": torch.ops.aten.nonzero.default,
        "aten::add.Tensor": torch.ops.aten.add.Tensor,
    }[op]
    return (0, "forward", func, inputs, outputs, 0, 10, 0, 0, "net.fc", "train.py:7", 1)


def _meta(device, nbytes):
    return (device, torch.float32, (nbytes // 4,), nbytes)


def test_copies_syncs_and_cpu_calls_are_judged_on_a_gpu_backend():
    backend = CudaBackend()
    raw = [
        _raw("aten::_to_copy", (_meta("cpu", 4096),), (_meta("cuda", 4096),)),
        _raw("aten::_to_copy", (_meta("cuda", 64),), (_meta("cpu", 64),)),
        _raw("aten::copy_", (_meta("cuda", 128), _meta("cpu", 128)), (_meta("cuda", 128),)),
        _raw("aten::_local_scalar_dense", (_meta("cuda", 4),), ()),
        _raw("aten::nonzero", (_meta("cuda", 400),), (_meta("cuda", 80),)),
        _raw("aten::add.Tensor", (_meta("cpu", 16), _meta("cpu", 16)), (_meta("cpu", 16),)),
        _raw("aten::add.Tensor", (_meta("cuda", 16), _meta("cuda", 16)), (_meta("cuda", 16),)),
    ]
    ops = rows_to_frame(raw, [], backend)
    assert list(ops["transfer"]) == ["h2d", "d2h", "h2d", "d2h", "sync", "", ""]
    assert list(ops["bytes_moved"]) == [4096, 64, 128, 4, 0, 0, 0]
    assert list(ops["verdict"]) == ["device"] * 5 + ["cpu", "device"]
    on_cpu = analysis.cpu_hotspots(ops)
    assert list(on_cpu["op"]) == ["aten::add.Tensor"] and on_cpu["sources"].iat[0] == ["train.py:7"]
    transfers = analysis.transfer_hotspots(ops)
    assert set(transfers["transfer"]) == {"h2d", "d2h", "sync"}


def test_which_calls_leave_the_device_and_get_a_source_line():
    on = ("cuda", torch.float32, (4,), 16)
    off = ("cpu", torch.float32, (4,), 16)
    assert not leaves_device(torch.ops.aten.add.Tensor, (on, on), (on,), "cuda")
    assert leaves_device(torch.ops.aten.add.Tensor, (on, off), (on,), "cuda")
    assert leaves_device(torch.ops.aten._to_copy.default, (on,), (off,), "cuda")
    assert leaves_device(torch.ops.aten._local_scalar_dense.default, (on,), (), "cuda")
    assert leaves_device(torch.ops.aten.nonzero.default, (on,), (on,), "cuda")


def test_device_time_sits_beside_host_time_in_the_op_summary():
    ops = rows_to_frame([_raw("aten::add.Tensor", (_meta("cuda", 16),), (_meta("cuda", 16),))] * 2, [], CudaBackend())
    ops["device_time_ns"] = pd.array([3000, 5000], dtype="Float64")
    row = analysis.op_summary(ops).iloc[0]
    assert row["calls"] == 2 and row["device_time_ms"] == 0.008 and row["time_ms"] == 0.00002
