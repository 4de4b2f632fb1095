"""The reference study's table from a live job: per model, phase, device and
batch, the median time per sample, samples/s and the speedup over the baseline
device kind, with each phase's verdict beside it (an INVALID phase's speedup is
no verdict). Usage: python3 study_table.py JOB_ID [baseline kind, default cpu]"""

import sys

from hetbench import Client

job_id = sys.argv[1]
baseline = sys.argv[2] if len(sys.argv) > 2 else "cpu"
df = Client().results(job_id).dropna(subset=["samples_per_second"])
df["ms_per_sample"] = df.p50_ms / df.batch_size
key = ["model", "phase", "batch_size"]
base = df[df.device_kind == baseline].groupby(key).samples_per_second.first()
df["speedup"] = df.samples_per_second / df.set_index(key).index.map(base)
columns = key + ["device_kind", "device_id", "ms_per_sample", "samples_per_second", "speedup", "valid"]
print(df[columns].sort_values(key + ["device_kind"]).to_string(index=False))
