"""A stand-in for PyTorch/XLA in tests (no TPU and no torch_xla here): the
runner's XLA path (agent/runners/torch_runner.py) runs against it, its
"device" the CPU, as torch_xla's own PJRT CPU device would be. Put this
folder's parent on PYTHONPATH. Labelled fake wherever a test uses it."""
