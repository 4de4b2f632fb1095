#!/usr/bin/python3
"""The same training loop as hetbench's, written in PyTorch (python3-torch:
Debian's Python binding of the same LibTorch 1.13). Prints one JSON line with
the per-step median and the wall time per step of the measured loop.

Models and data come from hetbench's PyTorch runner (agent/runners/
torch_runner.py), whose models match agent/models/models.cc layer for layer
(a unit test checks it); data is Fashion-MNIST, normalised the same way."""
import argparse
import ctypes
import json
import os
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agent", "runners"))
from torch_runner import MEAN, STD, build_model, load_fashion_mnist  # noqa: E402 (after the path)


def blas_core():
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode()
    except OSError:
        return "not OpenBLAS"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mlp")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    (images, labels), _, _ = load_fashion_mnist(torch, a.data_dir)
    try:
        net, reconstruction = build_model(torch, a.model)
    except ValueError as e:
        raise SystemExit(f"pytorch_reference: {e}")
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    net.train()
    perm = torch.randperm(images.size(0))
    times = []
    pos = 0
    wall_start = None
    for i in range(a.warmup + a.steps):
        if pos + a.batch > images.size(0):
            perm, pos = torch.randperm(images.size(0)), 0
        idx = perm[pos:pos + a.batch]
        pos += a.batch
        if i == a.warmup:
            wall_start = time.perf_counter_ns()
        x, y = images.index_select(0, idx), labels.index_select(0, idx)
        t0 = time.perf_counter_ns()
        opt.zero_grad()
        out = net(x)
        loss = nn.functional.mse_loss(out, x * STD + MEAN) if reconstruction else nn.functional.cross_entropy(out, y)
        loss.backward()
        opt.step()
        t1 = time.perf_counter_ns()
        if i >= a.warmup:
            times.append(t1 - t0)
    wall = time.perf_counter_ns() - wall_start
    times.sort()
    print(json.dumps({"model": a.model, "p50_ns": times[len(times) // 2], "wall_ns_per_step": wall / a.steps,
                      "threads": torch.get_num_threads(), "blas_core": blas_core(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
