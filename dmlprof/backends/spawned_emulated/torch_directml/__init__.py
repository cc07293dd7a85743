"""dmlprof's torch_directml for the processes a script scanned on the emulated device spawns (``--device
emulated-dml``: DataLoader workers, multiprocessing's ``spawn``).

As ``spawned_stand_in`` (see its docstring: spawn hands a child the scanned process's ``sys.path``, with this
folder on it), but on torch-directml every process that imports it has the device, and a worker may make its own
tensors there: so here the import loads the emulated device, as the scanned process did (its build is cached by
then: a load, not a build), and answers with that process's stand-in module. The worker is not recorded.
"""
__dmlprof_stand_in__ = True  # set first: the device loads beside dmlprof's torch_directml, never a real one

from dmlprof.backends import backend_class as _backend_class  # noqa: E402
from dmlprof.backends.directml_shim import shim_module as _shim_module  # noqa: E402

_backend = _backend_class("emulated-dml")(0)
_backend.prepare()
globals().update({name: value for name, value in vars(_shim_module(_backend)).items()
                  if not name.startswith("__") or name in ("__version__", "__dmlprof_stand_in__")})
