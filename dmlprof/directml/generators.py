"""``torch.Generator(device=<the device>)`` on dmlprof's own devices, as the real device answers it.

torch makes a generator for a PrivateUse1 device by asking the backend's C++ hooks (``getNewGenerator``, or before
torch 2.6 the function ``REGISTER_GENERATOR_PRIVATEUSE1`` registered). torch-directml registers one; the prediction's
stand-in device has no C++ to register it with (torch's Python hooks, ``torch._C._acc.PrivateUse1Hooks``, offer no
generator slot on 2.13, and torch 2.4 has none at all), so torch refused the call with its internal "register
``PrivateUse1HooksInterface`` ... ``getNewGenerator``" message (re-probe 22, case 19). For the block, ``torch.Generator``
makes what the real device makes:

* DirectML (measured on torch-directml 0.2.5, torch 2.4.1): a CPU generator of initial seed 0 (unseeded, it draws
  what a CPU generator seeded with 0 draws). ``g.device`` is ``cpu``,
  ``manual_seed``/``seed``/``get_state``/``set_state`` are the CPU generator's (a 5056-byte state), and draws on the
  device with it equal the CPU's for the same seed (``randn``, ``uniform_``). So the stand-in's and the emulated
  device's draws (the CPU's kernels) are DirectML's.
* XPU, MPS (read, not measured: ``torch/csrc/Generator.cpp``): the device's own generator, whose ``g.device`` is
  the device; its draws are the device's Philox, not the CPU's. The stand-in gives a CPU generator reading as the
  device, so a random call accepts it as torch's kernels there do; its values are the CPU's, which the
  prediction never claims as the device's.

Every generator made still passes ``isinstance(g, torch.Generator)``, and any other device argument reaches torch.
"""
from __future__ import annotations

import weakref
from contextlib import contextmanager

import torch

#: torch's own class (``torch.Generator`` is it, until the block replaces the name)
_TORCH_GENERATOR = torch._C.Generator


class _ReadsAsDevice(_TORCH_GENERATOR):
    """A CPU generator whose ``device`` is a target's (XPU, MPS), as the generator torch makes there reads."""

    reads_as: torch.device = torch.device("cpu")

    @property
    def device(self) -> torch.device:
        return self.reads_as


#: the generators made reading as a target's device, while they live: torch hands a random kernel a fresh
#: ``torch.Generator`` wrapping the same C++ generator, so a kernel knows one only by its state
_reading_as_a_device: "weakref.WeakSet" = weakref.WeakSet()


def generator_device_type(generator) -> str:
    """The device type ``generator`` reads as to the program: a CPU one handed to a kernel, whose state is that of a
    generator made reading as a target's device, is that device's (its C++ generator is the same)."""
    if isinstance(generator, _ReadsAsDevice) or generator.device.type != "cpu":
        return generator.device.type
    state = generator.get_state()
    for made in list(_reading_as_a_device):
        if torch.equal(made.get_state(), state):
            return made.device.type
    return "cpu"


def _generator_reading_as(device: torch.device) -> type:
    return type(f"{device.type.upper()}Generator", (_ReadsAsDevice,), {"reads_as": device})


def _device_type_of(device) -> str:
    """The device type a ``device`` argument names ("" where it names none torch can parse)."""
    if isinstance(device, torch.device):
        return device.type
    if isinstance(device, str):
        try:
            return torch.device(device).type
        except RuntimeError:
            return ""
    return ""


def generator_class(make_for) -> type:
    """A ``torch.Generator`` stand-in: ``make_for(device)`` makes the generator for a ``device`` argument it answers
    (``None`` where torch should make it). ``isinstance``/``issubclass`` with it answer as with torch's class."""

    class _AnyGenerator(type(_TORCH_GENERATOR)):
        def __instancecheck__(cls, instance):
            return isinstance(instance, _TORCH_GENERATOR)

        def __subclasscheck__(cls, subclass):
            return issubclass(subclass, _TORCH_GENERATOR)

    class Generator(_TORCH_GENERATOR, metaclass=_AnyGenerator):
        def __new__(cls, device="cpu"):
            made = make_for(device)
            return _TORCH_GENERATOR(device=device) if made is None else made

    return Generator


def device_generators(device_type: str, reads_as: str = ""):
    """``make_for`` of :func:`generator_class` for a device of ``device_type`` whose generator is a CPU one:
    reading as the CPU (DirectML, ``reads_as`` empty) or as the device ``reads_as`` names (a target's)."""
    names = {device_type, reads_as} - {""}
    kind = _generator_reading_as(torch.device(reads_as)) if reads_as else _TORCH_GENERATOR

    def make_for(device):
        if _device_type_of(device) not in names:
            return None
        made = kind(device="cpu")
        if reads_as:
            _reading_as_a_device.add(made)
        else:
            made.manual_seed(0)  # torch-directml's starts at seed 0 (measured), a CPU generator's at 67280421310721
        return made

    return make_for


#: the ``make_for`` of every block now open, innermost last (``--from cuda``'s mapping asks them too)
_open: list = []


def made_by_open_blocks(device):
    """The generator an open :func:`device_generators_made` block makes for ``device`` (``None``: none answers)."""
    for make_for in reversed(_open):
        made = make_for(device)
        if made is not None:
            return made
    return None


@contextmanager
def device_generators_made(device_type: str, reads_as: str = ""):
    """For the block, ``torch.Generator(device=<device_type>)`` (and ``reads_as``'s) makes the CPU generator the
    device's random calls draw from (see the module); other devices' reach torch."""
    saved = torch.Generator
    _open.append(device_generators(device_type, reads_as))
    torch.Generator = generator_class(made_by_open_blocks)
    try:
        yield
    finally:
        torch.Generator = saved
        _open.pop()
