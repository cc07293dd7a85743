"""What DirectML is, shared by everything that plays or runs it: the calls torch-directml refuses or that end
its process (:mod:`~dmlprof.directml.failures`), and the device module its stand-ins answer ``torch.<device>``
with (:mod:`~dmlprof.directml.device_module`). The real backend (``backends/dml.py``), the emulated device
(``testing/``) and the prediction's stand-in (``predict/``) all build on it; it builds on none of them."""
