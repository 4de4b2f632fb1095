"""hetbench for notebooks: the coordinator's gRPC API as pandas DataFrames.

    from hetbench_client import Client
    hb = Client("127.0.0.1:50051")               # token=..., ca_file=... with TLS and tokens
    job_id = hb.submit({"models": ["mlp"], "batch_sizes": [32, 64]})
    hb.wait(job_id)
    hb.results(job_id)                           # one row per task and phase
    hb.serving(job_id)                           # one row per serving task (and merged replicas)
    hb.samples(hb.job(job_id).tasks[0].id)       # every stored sample of a task
    hb.jobs(model="mlp")                         # every job, newest first (all pages)

The generated protobuf and gRPC modules (hetbench.v1.*_pb2) are built by
CMake into build/python beside a copy of this package: put build/python on
PYTHONPATH. Debian packages: python3-grpcio, python3-protobuf, python3-pandas.
"""

from hetbench_client.client import Client, HetbenchError

__all__ = ["Client", "HetbenchError"]
