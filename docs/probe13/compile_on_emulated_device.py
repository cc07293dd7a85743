"""Re-probe 13 (docs/probe13.md case 11): inference through torch.compile on the emulated DirectML device.

`~/.cache/dmlprof/venv-torch2.4.1/bin/python -m dmlprof scan docs/probe13/compile_on_emulated_device.py
--device emulated-dml --from cuda` (PYTHONPATH=<worktree>) exits 3: "raised BackendCompilerFailed: backend='inductor'
raised: (at ...:13)"; torch 2.13: "InductorError: KeyError: 'privateuseone'". On real torch-directml (torch 2.4.1,
realdml) the same compiled forward on the device runs (prints torch.Size([3, 2])). A compiled *training* step fails on
both (real: "InternalTorchDynamoError: Cannot access storage of OpaqueTensorImpl"), with different errors.
"""
import torch

model = torch.nn.Linear(4, 2).cuda()
compiled = torch.compile(model)
print("ran", compiled(torch.randn(3, 4).cuda()).shape)
