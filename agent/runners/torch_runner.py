#!/usr/bin/env python3
"""hetbench's external runner: the shared models of the zoo in PyTorch.

The agent starts this script for devices LibTorch's C++ API cannot drive
(Cloud TPUs, through PyTorch/XLA) and for the Python side of C++-vs-Python
comparisons on a CPU. Protocol (proto/hetbench/v1/runner.proto):

  stdin   one RunnerTask as JSON (proto3 JSON mapping, original field names)
  stdout  one RunnerEvent per line: {"progress": ...}, {"samples": ...},
          finally {"result": ...} (or {"error": "..."} and a non-zero exit)
  --probe prints one RunnerProbe line and exits

Times are time.monotonic_ns() (CLOCK_MONOTONIC, the agent's steady clock)
relative to the task's task_start_ns, so the agent's power readings line up.
SIGTERM stops the work at the next step: what ran is reported and the agent
marks the task cancelled (it sends SIGKILL if this takes too long).

The models mirror agent/models/models.cc layer for layer, built in the same
order after torch.manual_seed(seed), so parameter shapes (the architecture
fingerprint) match the C++ executor's; the training loop mirrors
agent/executors/torch_executor.cc (warm-up, measured steps until min_steps and
min_duration_seconds, capped by max_steps; then inference over the test set).
"""

import gzip
import hashlib
import json
import os
import platform
import signal
import struct
import sys
import time

MODELS = ("mlp", "cnn", "rnn", "lstm", "autoencoder")
MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST training-set pixel statistics (agent/data/fashion_mnist.cc)
PHASE_TRAIN, PHASE_INFER = "PHASE_TRAIN", "PHASE_INFER"

_stop = False


def _on_term(signum, frame):  # noqa: ARG001 (signal handler signature)
    global _stop
    _stop = True


def emit(event):
    sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def fail(message, code=2):
    emit({"error": message})
    sys.exit(code)


def fnv1a64(text):
    """FNV-1a 64 (common/hash.h) of a short string."""
    h = 0xCBF29CE484222325
    for b in text.encode():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def architecture_fingerprint(model, parameters):
    """Same string as ArchitectureFingerprint() in agent/models/workload.cc."""
    shapes = ";".join("x".join(str(d) for d in p.shape) for p in parameters)
    count = sum(p.numel() for p in parameters)
    return "%s/params=%d/shapes=%016x" % (model, count, fnv1a64(shapes))


# ---------------------------------------------------------------- models


def build_model(torch, name):
    nn = torch.nn

    class RowSequence(nn.Module):
        """The 28 image rows as a sequence; the last step's output goes on."""

        def __init__(self, rnn):
            super().__init__()
            self.rnn = rnn

        def forward(self, x):
            out, _ = self.rnn(x.view(x.size(0), 28, 28))
            return out[:, -1]

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
    raise ValueError("model \"%s\" is not implemented by the Python runner; it runs %s (the C++ executor runs "
                     "the whole zoo)" % (name, ", ".join(MODELS)))


# ---------------------------------------------------------------- data


def read_idx_gz(path):
    import numpy as np

    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise RuntimeError("dataset file %s cannot be read (%s); install dataset-fashion-mnist or set the agent's "
                           "--data-dir" % (path, e))
    if len(raw) < 4 or raw[0:3] != b"\x00\x00\x08":
        raise RuntimeError("%s: not an IDX file of unsigned bytes" % path)
    ndims = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndims)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndims)
    if data.size != int(np.prod(dims)):
        raise RuntimeError("%s: header promises %d bytes, file has %d" % (path, int(np.prod(dims)), data.size))
    return data.reshape(dims), hashlib.sha256(raw).hexdigest()


def load_fashion_mnist(torch, data_dir):
    out, digests = {}, []
    for split in ("train", "t10k"):
        images, h1 = read_idx_gz(os.path.join(data_dir, "%s-images-idx3-ubyte.gz" % split))
        labels, h2 = read_idx_gz(os.path.join(data_dir, "%s-labels-idx1-ubyte.gz" % split))
        x = torch.from_numpy(images.reshape(images.shape[0], -1).astype("float32"))
        x = (x / 255.0 - MEAN) / STD
        out[split] = (x, torch.from_numpy(labels.astype("int64")))
        digests += [h1, h2]
    return out["train"], out["t10k"], hashlib.sha256("".join(digests).encode()).hexdigest()[:16]


# ---------------------------------------------------------------- probe


def probe():
    info = {"python": platform.python_version(), "models": list(MODELS)}
    try:
        import torch
    except Exception as e:  # noqa: BLE001 (any import failure means: cannot run)
        info["error"] = "PyTorch is not importable by %s: %s" % (sys.executable, e)
        emit(info)
        return
    info["torch_version"] = torch.__version__
    try:
        import torch_xla.core.xla_model as xm

        info["xla_available"] = True
        dev = xm.xla_device()
        info["xla_device"] = "%s (%s)" % (dev, xm.xla_device_hw(dev))
    except Exception:  # noqa: BLE001 (no torch_xla, or no XLA device)
        info["xla_available"] = False
    emit(info)


# ---------------------------------------------------------------- task


def pick_device(torch, task):
    """The task's device, a function that waits for its queued work, and its hardware ("TPU", "CPU")."""
    if task.get("torch_device") == "xla":
        import torch_xla.core.xla_model as xm

        device = xm.xla_device()

        def sync():
            xm.mark_step()
            xm.wait_device_ops()

        return device, sync, str(xm.xla_device_hw(device))

    def no_sync():
        pass

    return torch.device("cpu"), no_sync, "CPU"


def run(task):
    import torch

    assign = task.get("assign", {})
    spec = assign.get("spec", {})
    train, infer_spec = spec.get("train", {}), spec.get("inference", {})
    model_name = assign.get("model") or (spec.get("models") or [spec.get("model", "mlp")])[0]
    bs = int(assign.get("batch_size", 0))
    start_ns = int(task.get("task_start_ns", 0))
    per_line = int(task.get("max_samples_per_line", 1000))
    torch.set_num_threads(max(int(task.get("threads", 1)), 1))

    def rel(t):
        return t - start_ns

    xla = task.get("torch_device") == "xla"
    device, sync, _ = pick_device(torch, task)

    t0 = time.monotonic_ns()
    (x_train, y_train), (x_test, y_test), data_digest = load_fashion_mnist(torch, task.get("data_dir", ""))
    load_seconds = (time.monotonic_ns() - t0) * 1e-9

    pre_start = time.monotonic_ns()
    seed = int(spec.get("seed", 0))
    torch.manual_seed(seed)
    try:
        net, reconstruction = build_model(torch, model_name)
    except ValueError as e:
        fail(str(e))
    params = list(net.parameters())
    weights = hashlib.sha256()
    for p in params:
        weights.update(p.detach().contiguous().numpy().tobytes())
    arch = architecture_fingerprint(model_name, params)
    n_params = sum(p.numel() for p in params)
    net.to(device)
    opt = torch.optim.Adam(net.parameters(), lr=float(train.get("learning_rate", 1e-3)))

    def loss_of(out, x, y):
        if reconstruction:
            return torch.nn.functional.mse_loss(out, x * STD + MEAN)
        return torch.nn.functional.cross_entropy(out, y)

    n_train = x_train.size(0)
    if bs <= 0 or bs > n_train:
        fail("batch size %d is outside 1..%d (the training set of %s)" % (bs, n_train, model_name))
    warmup = int(train.get("warmup_steps", 0))
    if int(train.get("min_steps", 0)) > 0:
        min_steps = int(train["min_steps"])
    else:
        steps = -(-float(train.get("epochs", 1.0)) * n_train // bs)  # ceil, as EffectiveMinSteps
        min_steps = max(1, int(steps) - warmup)
    max_steps = int(train.get("max_steps", 1000000))
    min_duration_ns = int(float(train.get("min_duration_seconds", 0)) * 1e9)

    pending = {"phase": PHASE_TRAIN, "start_ns": [], "duration_ns": [], "items": []}
    last_flush = [time.monotonic_ns()]

    def record(phase, a, b, items):
        if pending["phase"] != phase and pending["start_ns"]:
            flush()
        pending["phase"] = phase
        pending["start_ns"].append(rel(a))
        pending["duration_ns"].append(b - a)
        pending["items"].append(items)
        if len(pending["start_ns"]) >= per_line or time.monotonic_ns() - last_flush[0] > 250e6:
            flush()

    def flush():
        if pending["start_ns"]:
            emit({"samples": dict(pending)})
        pending.update(start_ns=[], duration_ns=[], items=[])
        last_flush[0] = time.monotonic_ns()

    last_progress = [0]

    def progress(phase, step, total):
        now = time.monotonic_ns()
        if now - last_progress[0] > 250e6:
            emit({"progress": {"phase": phase, "step": step, "total_steps": total}})
            last_progress[0] = now

    result = {"windows": []}
    # ---- training
    net.train()
    perm = torch.randperm(n_train)
    pos = steps_total = measured = seen = 0
    measure_start = first_start = last_end = 0
    loss = None
    warmup_start = time.monotonic_ns()
    result["preprocess_seconds"] = (warmup_start - pre_start) * 1e-9
    while not _stop:
        measuring = steps_total >= warmup
        if measuring:
            if measured == 0:
                measure_start = time.monotonic_ns()
            # The window validity judges: first measured step's start to the last one's end.
            enough = measured >= min_steps and last_end - first_start >= min_duration_ns
            if enough or measured >= max_steps:
                break
        if pos + bs > n_train:
            perm = torch.randperm(n_train)
            pos = 0
        idx = perm[pos:pos + bs]
        x, y = x_train.index_select(0, idx), y_train.index_select(0, idx)
        pos += bs
        if xla:
            x, y = x.to(device), y.to(device)
            sync()
        a = time.monotonic_ns()
        opt.zero_grad()
        loss = loss_of(net(x), x, y)
        loss.backward()
        opt.step()
        sync()
        b = time.monotonic_ns()
        steps_total += 1
        seen += bs
        if measuring:
            record(PHASE_TRAIN, a, b, bs)
            if measured == 0:
                first_start = a
            last_end = b
            measured += 1
            progress(PHASE_TRAIN, measured, min_steps)
    train_end = time.monotonic_ns()
    flush()
    if measured > 0:
        result["windows"].append({"phase": PHASE_TRAIN, "start_ns": rel(measure_start), "end_ns": rel(train_end)})
        result["train_seconds"] = (train_end - measure_start) * 1e-9
    warmup_ns = (measure_start if measured > 0 else train_end) - warmup_start
    result["train_steps_total"] = steps_total
    result["epochs_seen"] = seen / n_train
    if loss is not None:
        result["final_train_loss"] = float(loss.item())

    # ---- inference over the test set
    correct = scored = 0
    sq_err, values = 0.0, 0
    if not _stop:
        net.eval()
        n_test = x_test.size(0)
        batches_all = -(-n_test // bs)
        max_batches = int(infer_spec.get("max_batches", 0))
        batches = min(max_batches, batches_all) if max_batches > 0 else batches_all
        with torch.no_grad():
            iw = time.monotonic_ns()
            for i in range(int(infer_spec.get("warmup_batches", 0))):
                lo = (i % batches_all) * bs
                net(x_test[lo:lo + bs].to(device))
            sync()
            warmup_ns += time.monotonic_ns() - iw
            infer_start = time.monotonic_ns()
            done = 0
            for bi in range(batches):
                if _stop:
                    break
                lo, hi = bi * bs, min(bi * bs + bs, n_test)
                x, y = x_test[lo:hi].to(device), y_test[lo:hi].to(device)
                sync()
                a = time.monotonic_ns()
                out = net(x)
                sync()
                b = time.monotonic_ns()
                record(PHASE_INFER, a, b, hi - lo)
                if reconstruction:
                    sq_err += float(((out - (x * STD + MEAN)) ** 2).sum())
                    values += out.numel()
                else:
                    correct += int((out.argmax(1) == y).sum())
                    scored += hi - lo
                done += hi - lo
                progress(PHASE_INFER, bi + 1, batches)
            infer_end = time.monotonic_ns()
            flush()
            if done > 0:
                result["windows"].append({"phase": PHASE_INFER, "start_ns": rel(infer_start),
                                          "end_ns": rel(infer_end)})
            result["evaluate_seconds"] = (infer_end - infer_start) * 1e-9
    result["warmup_seconds"] = warmup_ns * 1e-9
    if values > 0:
        result["test_mse"] = sq_err / values
    elif scored > 0:
        result["test_accuracy"] = correct / scored
    result["data_load_seconds"] = load_seconds
    result["dataset_train_size"] = n_train
    result["min_train_steps"] = min(min_steps, max_steps)  # the coordinator judges the train phase by it
    result["dataset_test_size"] = x_test.size(0)
    blas = "unknown"
    for line in torch.__config__.show().splitlines():
        if "BLAS_INFO=" in line:
            blas = line.split("BLAS_INFO=")[1].split(",")[0]
    result["environment"] = {
        "torch_version": torch.__version__,
        "blas": "%s (as PyTorch reports it)" % blas,
        "threads": torch.get_num_threads(),
        "seed": str(seed),
        "parameter_count": str(n_params),
        "model_fingerprint": "%s/params=%d/init=sha256:%s/data=sha256:%s" % (
            model_name, n_params, weights.hexdigest()[:16], data_digest),
        "architecture_fingerprint": arch,
        "executor": "python",
        "torch_device": str(device),
    }
    if _stop:
        result["input_note"] = "stopped by the agent (SIGTERM) after %d measured training steps" % measured
    emit({"result": result})


# ---------------------------------------------------------------- validation


def float_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def validate(task):
    """The validation suite of `hetbench validate` on this runner's device (TPUs: agent/validation/suite.cc
    runs one test per runner start, validate.tests naming it, and kills a runner past its box).

    Mirrors the agent's LibTorch suite: matmul (a float32 64x64 product against float64, then n x n
    products), memory bandwidth (a copy), and training (the loss of the first 8 steps is the
    fingerprint, float32 bits) and inference of the zoo's mlp and cnn on fixed-seed synthetic batches.
    The fingerprint is comparable between devices of one SKU (same runner, same seed), not with
    LibTorch's (another generator draws the data).
    """
    import torch

    assign = task.get("assign", {})
    spec = assign.get("spec", {})
    v = spec.get("validate", {})
    standard = v.get("level") == "standard"
    box = float(v.get("time_box_seconds", 8))
    reps = max(int(v.get("repetitions", 8)), 1)
    seed = int(spec.get("seed", 0))
    bs = int(assign.get("batch_size", 0)) or 128
    torch.set_num_threads(max(int(task.get("threads", 1)), 1))
    device, sync, hw = pick_device(torch, task)
    deadline = [0.0]

    def expired():
        return _stop or time.monotonic() >= deadline[0]

    def timed_reps(op, items, t):
        """Once untimed, units for 10 ms to size a repetition, then `reps` of them (as TimedReps in C++)."""
        op()
        sync()
        t0, units = time.monotonic(), 0
        while True:
            op()
            units += 1
            sync()
            if time.monotonic() - t0 >= 0.01:
                break
            if expired():
                return False
        per_unit = (time.monotonic() - t0) / units
        rep_s = min(max(box / (4.0 * reps), 0.02), 0.25)
        per_rep = max(1, int(round(rep_s / max(per_unit, 1e-9))))
        values = t.setdefault("values", [])
        for _ in range(reps):
            if expired():
                return False
            t0 = time.monotonic()
            for _ in range(per_rep):
                op()
            sync()
            values.append(items * per_rep / max(time.monotonic() - t0, 1e-9))
        return True

    def timed_out(t):
        return {"outcome": "TEST_OUTCOME_TIMED_OUT",
                "reason": "%d of %d repetitions done" % (len(t.get("values", [])), reps)}

    def matmul():
        gen = torch.Generator().manual_seed(seed)
        a, b = torch.randn(64, 64, generator=gen, dtype=torch.float64), torch.randn(64, 64, generator=gen,
                                                                                 dtype=torch.float64)
        ref = a @ b
        got = (a.float().to(device) @ b.float().to(device)).cpu().double()
        err = float((got - ref).abs().max() / ref.abs().max())
        if not err <= 1e-4:
            return {"outcome": "TEST_OUTCOME_FAILED",
                    "reason": "wrong result: a float32 64x64 product is off by %.3g relative to float64 "
                              "(at most 1e-4)" % err}
        n = (8192 if standard else 4096) if hw == "TPU" else (1024 if standard else 512)
        x, y = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
        t = {"detail": "%dx%d float32 products on %s (%s)" % (n, n, device, hw)}
        return t if timed_reps(lambda: x @ y, 2.0 * n ** 3 * 1e-9, t) else timed_out(t)

    def memory_bandwidth():
        nbytes = (256 if standard else 64) << 20
        src = torch.ones(nbytes // 4, device=device)
        dst = torch.empty(nbytes // 4, device=device)
        t = {"detail": "copy of %d MiB (read + write counted)" % (nbytes >> 20)}
        return t if timed_reps(lambda: dst.copy_(src), 2.0 * nbytes * 1e-9, t) else timed_out(t)

    def model_test(name, train):
        torch.manual_seed(seed)
        net, reconstruction = build_model(torch, name)
        gen = torch.Generator().manual_seed(seed + 1)
        xs = torch.rand(8, bs, 784, generator=gen).to(device)
        ys = torch.randint(0, 10, (8, bs), generator=gen).to(device)
        net.to(device)
        step = [0]
        if not train:
            net.eval()
            t = {"detail": "%s eval, batch %d, no autograd" % (name, bs)}

            def forward():
                with torch.no_grad():
                    net(xs[step[0] % 8])
                step[0] += 1

            return t if timed_reps(forward, bs, t) else timed_out(t)
        net.train()
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)

        def one_step():
            i = step[0] % 8
            step[0] += 1
            out = net(xs[i])
            loss = (torch.nn.functional.mse_loss(out, xs[i]) if reconstruction
                    else torch.nn.functional.cross_entropy(out, ys[i]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        t = {"loss_bits": []}
        for s in range(8):
            loss = float(one_step().item())
            if loss != loss or loss in (float("inf"), float("-inf")):
                return {"outcome": "TEST_OUTCOME_FAILED", "reason": "wrong result: the loss is %g at step %d" % (loss, s)}
            t["loss_bits"].append(float_bits(loss))
            if expired():
                return timed_out(t)
        t["detail"] = ("%s, Adam 1e-3, batch %d; fingerprint: the loss of its first 8 steps from seed %d "
                       "(the Python runner's data)" % (name, bs, seed))
        return t if timed_reps(one_step, bs, t) else timed_out(t)

    suite = {"matmul": matmul, "memory_bandwidth": memory_bandwidth,
             "train_mlp": lambda: model_test("mlp", True), "infer_mlp": lambda: model_test("mlp", False),
             "train_cnn": lambda: model_test("cnn", True), "infer_cnn": lambda: model_test("cnn", False)}
    tests = []
    for name in v.get("tests", []):
        deadline[0] = time.monotonic() + box
        start = time.monotonic()
        if name not in suite:
            t = {"outcome": "TEST_OUTCOME_SKIPPED", "reason": "the Python runner has no test \"%s\"" % name[:64]}
        else:
            try:
                t = suite[name]()
            except Exception as e:  # noqa: BLE001 (the test's own failure, reported as its outcome)
                t = {"outcome": "TEST_OUTCOME_FAILED", "reason": ("error: %s: %s" % (type(e).__name__, e))[:1000]}
        t.setdefault("outcome", "TEST_OUTCOME_MEASURED")
        t.update(name=name, seconds=time.monotonic() - start, time_box_seconds=box)
        tests.append(t)
    emit({"result": {"validation": {"tests": tests}, "environment": {
        "torch_version": torch.__version__, "threads": torch.get_num_threads(), "executor": "python",
        "torch_device": "%s (%s)" % (device, hw)}}})


def main():
    if "--probe" in sys.argv[1:]:
        probe()
        return
    if len(sys.argv) == 3 and sys.argv[1] == "--fingerprint":  # --fingerprint MODEL: checked against the C++ zoo
        import torch

        net, _ = build_model(torch, sys.argv[2])
        params = list(net.parameters())
        emit({"architecture_fingerprint": architecture_fingerprint(sys.argv[2], params)})
        return
    signal.signal(signal.SIGTERM, _on_term)
    try:
        task = json.loads(sys.stdin.read())
    except ValueError as e:
        fail("stdin is not a RunnerTask in JSON: %s" % e)
    try:
        if task.get("assign", {}).get("spec", {}).get("validate", {}).get("level"):
            validate(task)
        else:
            run(task)
    except SystemExit:
        raise
    except Exception as e:  # noqa: BLE001 (reported to the agent, which fails the task with it)
        fail("%s: %s" % (type(e).__name__, e))


if __name__ == "__main__":
    main()
