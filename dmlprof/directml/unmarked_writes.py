"""Arguments a CPU kernel writes that the op's schema does not mark as written: one definition, read by both devices
that stand in for DirectML (the emulated device, :mod:`dmlprof.testing`, and the prediction's stand-in,
:mod:`dmlprof.predict.standin`).

``native_batch_norm`` in training updates ``running_mean`` and ``running_var`` in place, though its schema says
``Tensor? running_mean`` (not ``Tensor(a!)?``). torch's boxed CPU fallback (``at::native::cpu_fallback``) hands the
CPU kernel copies of a device's tensors and copies back only the arguments the schema marks as written, so what the
CPU kernel writes into these is lost. Measured on realdml (torch-directml 0.2.5, torch 2.4.1;
tests/realdml/test_unmarked_writes_on_real_directml.py):

- a kernel of torch-directml's own keeps the write: ``nn.BatchNorm1d`` after 3 training forwards holds the CPU's
  running statistics (running_mean sums to 1.25454, running_var to 13.52717, ``num_batches_tracked`` 3), with
  ``momentum=None`` the cumulative average, and an evaluation reads them;
- torch-directml's fallback (torch's cpu_fallback) loses it: ``batch_norm_update_stats`` leaves the statistics as they
  were, and on torch 2.4.1 (whose schema leaves ``noise`` unmarked; 2.6 on marks it) ``rrelu_with_noise`` leaves its
  noise as it was, so ``F.rrelu``'s gradient in training is not the slope it applied.

So a device kernel of these ops keeps what the CPU kernel writes into the arguments named here, and the fallback
loses it: the emulated device's kernel hands its CPU kernel host aliases of them (its fallback is torch's, and loses
them as torch-directml's does); the stand-in hands a device kernel the values themselves and the fallback copies.

The ops were found by running every OpInfo sample of torch 2.4.1 and 2.13 (forward and backward) on the CPU under a
dispatch mode that compares each unmarked tensor argument before and after each op (re-probe 20, 4). Every argument
named here is unmarked in torch 2.4.1, the torch torch-directml runs on, so its fallback loses each of them whatever a
later torch's schema says: torch 2.6 marks ``noise``, and a stand-in that left a marked argument to the schema kept
the slopes, giving RReLU the CPU's gradient where realdml's is wrong (re-probe 21, 27). Both stand-ins therefore
lose every one in the fallback on every torch (the emulated device copies a marked one aside first).
"""
from __future__ import annotations

import functools

_RUNNING_STATS = ("running_mean", "running_var")

#: op -> the arguments its CPU kernel writes though the schema may not mark them
UNMARKED_WRITES = {
    "aten::native_batch_norm": _RUNNING_STATS,
    "aten::native_batch_norm.out": _RUNNING_STATS,
    "aten::batch_norm_update_stats": _RUNNING_STATS,
    "aten::rrelu_with_noise": ("noise",),
    "aten::rrelu_with_noise.out": ("noise",),
    "aten::rrelu_with_noise_": ("noise",),
}


@functools.lru_cache(maxsize=None)
def unmarked_written_slots(overload) -> tuple:
    """(position, name) of the arguments ``overload``'s CPU kernel writes that torch 2.4.1's schema (torch-directml's)
    does not mark, whether or not the running torch's marks them."""
    names = UNMARKED_WRITES.get(_name(overload._schema), ())
    return tuple((index, argument.name) for index, argument in enumerate(overload._schema.arguments)
                 if argument.name in names)


def _name(schema) -> str:
    return f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name
