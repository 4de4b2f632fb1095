"""hetbench for notebooks: the coordinator's gRPC API as pandas DataFrames.

    from hetbench import Client
    hb = Client("127.0.0.1:50051")               # token=..., ca_file=... with TLS and tokens
    job_id = hb.submit({"models": ["mlp"], "batch_sizes": [32, 64]})
    hb.wait(job_id)
    hb.results(job_id)                           # one row per task and phase
    hb.serving(job_id)                           # one row per serving task (and merged replicas)
    hb.samples(hb.job(job_id).tasks[0].id)       # every stored sample of a task
    hb.to_pandas(job_id)                         # long form: task x phase x metric, unit, source
    hb.jobs(model="mlp")                         # every job, newest first (all pages)

Install from the repository, offline (docs/python.md):
    python3 -m venv --system-site-packages venv
    venv/bin/pip install --no-build-isolation --no-index ./python
The API's modules (hetbench.v1.*_pb2) are generated from proto/ at install
time. Debian packages: python3-grpcio, python3-protobuf, python3-pandas.
"""

from hetbench.client import (Client, HetbenchError, NotFound, PermissionDenied, Unauthenticated,
                             Unavailable)

__all__ = ["Client", "HetbenchError", "NotFound", "PermissionDenied", "Unauthenticated", "Unavailable"]
