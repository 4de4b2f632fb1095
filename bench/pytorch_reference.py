#!/usr/bin/python3
"""The same training loop as hetbench's, written in PyTorch (python3-torch:
Debian's Python binding of the same LibTorch 1.13). Prints one JSON line with
the per-step median and the wall time per step of the measured loop.

Models are defined exactly as in agent/models/models.cc; data is
Fashion-MNIST from dataset-fashion-mnist, normalised the same way."""
import argparse
import ctypes
import gzip
import json
import time

import numpy as np
import torch
from torch import nn

MEAN, STD = 0.2860, 0.3530


def load_images(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    n, rows, cols = (int.from_bytes(data[i:i + 4], "big") for i in (4, 8, 12))
    pixels = np.frombuffer(data, dtype=np.uint8, offset=16).reshape(n, rows * cols)
    return (torch.from_numpy(pixels.astype(np.float32)) / 255.0 - MEAN) / STD


def load_labels(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    return torch.from_numpy(np.frombuffer(data, dtype=np.uint8, offset=8).astype(np.int64))


class RowSequence(nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        out, _ = self.rnn(x.view(x.size(0), 28, 28))
        return out[:, -1]


def build(name):
    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 512), nn.ReLU(),
                             nn.Dropout(0.2), nn.Linear(512, 10)), False
    if name == "cnn":
        return nn.Sequential(nn.Unflatten(1, (1, 28, 28)), nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3),
                             nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128),
                             nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10)), False
    if name == "rnn":
        return nn.Sequential(RowSequence(nn.RNN(28, 128, nonlinearity="tanh", batch_first=True)),
                             nn.Linear(128, 10)), False
    if name == "lstm":
        return nn.Sequential(RowSequence(nn.LSTM(28, 128, batch_first=True)), nn.Linear(128, 10)), False
    if name == "autoencoder":
        return nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 32), nn.ReLU(), nn.Linear(32, 128),
                             nn.ReLU(), nn.Linear(128, 784), nn.Sigmoid()), True
    raise SystemExit(f"pytorch_reference: model {name!r} is not written here; use mlp, cnn, rnn, lstm, autoencoder")


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
    images = load_images(f"{a.data_dir}/train-images-idx3-ubyte.gz")
    labels = load_labels(f"{a.data_dir}/train-labels-idx1-ubyte.gz")
    net, reconstruction = build(a.model)
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
