"""The four calls of torch_xla.core.xla_model the runner makes, on the CPU."""

import os

import torch

marks = 0


def xla_device():
    return torch.device("cpu")


def xla_device_hw(device):  # noqa: ARG001 (torch_xla's signature)
    # What torch_xla answers for its CPU device; FAKE_XLA_HW lets a test claim a TPU.
    return os.environ.get("FAKE_XLA_HW", "CPU")


def mark_step():
    global marks
    marks += 1


def wait_device_ops():
    pass
