"""Results as pandas DataFrames: one row per thing, one column per figure,
units in the column names (ns, ms, seconds, joules, USD), validity beside every
figure (a row's `valid` and `invalid_reasons` travel with it)."""

import pandas as pd

from hetbench.v1 import common_pb2


def _state(enum, value, prefix):
    return enum.Name(value)[len(prefix):].lower()


def _phase(value):
    return _state(common_pb2.Phase, value, "PHASE_")


def _kind(value):
    return _state(common_pb2.DeviceKind, value, "DEVICE_KIND_").replace("_", "-")


def jobs_frame(jobs):
    rows = []
    for j in jobs:
        rows.append({
            "job_id": j.id,
            "name": j.spec.name,
            "state": _state(common_pb2.JobState, j.state, "JOB_STATE_"),
            "models": ",".join(j.spec.models),
            "tasks": len(j.tasks),
            "tasks_succeeded": sum(t.state == common_pb2.TASK_STATE_SUCCEEDED for t in j.tasks),
            "created": pd.to_datetime(j.created_unix_seconds, unit="s", utc=True),
            "finished": pd.to_datetime(j.finished_unix_seconds, unit="s", utc=True) if j.finished_unix_seconds else pd.NaT,
            "error": j.error,
        })
    return pd.DataFrame(rows, columns=["job_id", "name", "state", "models", "tasks", "tasks_succeeded", "created",
                                       "finished", "error"])


def _task_columns(job, t):
    env = t.result.environment
    return {
        "job_id": job.id,
        "task_id": t.id,
        "model": t.model or (job.spec.models[0] if job.spec.models else ""),
        "agent_id": t.agent_id,
        "device_id": t.device_id,
        "device_kind": _kind(t.device_kind),
        "device_model": env.device_model,
        "batch_size": t.batch_size,
        "run": t.run or 1,  # which of the spec's `repeats` runs (1 when the job has one run of each task)
        "task_state": _state(common_pb2.TaskState, t.state, "TASK_STATE_"),
        "simulated": env.simulated,
    }


RESULT_COLUMNS = ["job_id", "task_id", "model", "agent_id", "device_id", "device_kind", "device_model", "batch_size",
                  "run", "task_state", "simulated", "phase", "steps", "items", "p50_ms", "p90_ms", "p99_ms", "mean_ms",
                  "stddev_ms", "iqr_ms", "samples_per_second", "window_seconds", "valid", "invalid_reasons",
                  "energy_joules", "joules_per_sample", "power_source", "usd_per_1000_samples"]


def results_frame(job):
    """One row per task and measured phase (a task without results: one row, phase "")."""
    rows = []
    for t in job.tasks:
        base = _task_columns(job, t)
        if not t.result.phases:
            rows.append({**base, "phase": "", "valid": False, "invalid_reasons": t.error})
            continue
        for p in t.result.phases:
            s = p.stats
            row = {
                **base,
                "phase": _phase(p.phase),
                "steps": s.count,
                "items": s.items,
                "p50_ms": s.p50_ns / 1e6,
                "p90_ms": s.p90_ns / 1e6,
                "p99_ms": s.p99_ns / 1e6,
                "mean_ms": s.mean_ns / 1e6,
                "stddev_ms": s.stddev_ns / 1e6,
                "iqr_ms": s.iqr_ns / 1e6,
                "samples_per_second": s.samples_per_second,
                "window_seconds": s.window_seconds,
                "valid": p.valid,
                "invalid_reasons": "; ".join(p.invalid_reasons),
            }
            for e in t.result.energy:
                if e.phase == p.phase:
                    row.update(energy_joules=e.energy_joules, joules_per_sample=e.joules_per_sample,
                               power_source=_state(common_pb2.PowerSource, e.source, "POWER_SOURCE_"))
                    break
            for c in t.result.cost:
                if c.phase == p.phase and c.usd_per_hour > 0:
                    row["usd_per_1000_samples"] = c.usd_per_1000_samples
            rows.append(row)
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


SERVING_COLUMNS = ["job_id", "task_id", "model", "agent_id", "device_id", "device_kind", "batch_size", "run", "replicas",
                   "scenario", "target_qps", "achieved_qps", "queries_scheduled", "queries_answered", "latency_p50_ms",
                   "latency_p90_ms", "latency_p99_ms", "percentile", "early_stopping_ms", "latency_bound_ms",
                   "over_bound", "issue_delay_p99_us", "samples_per_query", "ttft_p50_ms", "ttft_p99_ms",
                   "tpot_p50_ms", "tpot_p99_ms", "output_tokens_per_second", "goodput", "valid", "invalid_reasons",
                   "simulated"]


def _serving_row(base, s, phase):
    g = s.generative
    row = {
        **base,
        "replicas": max(1, s.replica.replicas),
        "scenario": s.scenario,
        "target_qps": s.target_qps,
        "achieved_qps": s.achieved_qps,
        "queries_scheduled": s.queries_scheduled,
        "queries_answered": s.queries_answered,
        "latency_p50_ms": s.latency_p50_ns / 1e6,
        "latency_p90_ms": s.latency_p90_ns / 1e6,
        "latency_p99_ms": s.latency_p99_ns / 1e6,
        "percentile": s.percentile,
        "early_stopping_ms": s.early_stopping_ns / 1e6,
        "latency_bound_ms": s.latency_bound_ms,
        "over_bound": s.over_bound,
        "issue_delay_p99_us": s.issue_delay_p99_ns / 1e3,
        "samples_per_query": max(1, s.samples_per_query),
        "valid": phase.valid,
        "invalid_reasons": "; ".join(phase.invalid_reasons),
    }
    if s.HasField("generative"):
        row.update(ttft_p50_ms=g.ttft_p50_ns / 1e6, ttft_p99_ms=g.ttft_p99_ns / 1e6, tpot_p50_ms=g.tpot_p50_ns / 1e6,
                   tpot_p99_ms=g.tpot_p99_ns / 1e6, output_tokens_per_second=g.output_tokens_per_second,
                   goodput=g.goodput)
    return row


def serving_frame(job):
    """One row per serving task; a replicated run adds a row for the union of
    its replicas (task_id the gang's, agent_id empty) after its last replica."""
    rows = []
    for t in job.tasks:
        serve = [p for p in t.result.phases if p.phase == common_pb2.PHASE_SERVE]
        if not serve:
            continue
        s = t.result.serving
        rows.append(_serving_row(_task_columns(job, t), s, serve[0]))
        if s.HasField("merged") and t.gang.rank + 1 == t.gang.world_size:
            base = {**_task_columns(job, t), "task_id": t.gang.id, "agent_id": "", "device_id": ""}
            merged = _serving_row(base, s.merged.serving, s.merged.phase)
            merged["replicas"] = s.merged.replicas
            rows.append(merged)
    return pd.DataFrame(rows, columns=SERVING_COLUMNS)


def samples_frame(task_id, batches):
    """Every stored sample, in batch order: durations in ns on the task's axis."""
    phase, start, duration, items, seq = [], [], [], [], []
    for b in batches:
        n = len(b.duration_ns)
        phase += [_phase(b.phase)] * n
        seq += [b.seq] * n
        start += list(b.start_ns)
        duration += list(b.duration_ns)
        items += list(b.items)
    return pd.DataFrame({"task_id": task_id, "batch_seq": seq, "phase": phase, "start_ns": start,
                         "duration_ns": duration, "items": items},
                        columns=["task_id", "batch_seq", "phase", "start_ns", "duration_ns", "items"])


def agents_frame(agents):
    rows = []
    for a in agents:
        busy = set(a.busy_device_ids)
        for d in a.devices:
            rows.append({"agent_id": a.agent_id, "hostname": a.hostname, "device_id": d.id,
                         "device_kind": _kind(d.kind), "device_model": d.model, "busy": d.id in busy,
                         "simulated": d.simulated, "labels": dict(a.labels)})
    return pd.DataFrame(rows, columns=["agent_id", "hostname", "device_id", "device_kind", "device_model", "busy",
                                       "simulated", "labels"])


def concat(pages):
    """Pages of samples_frame as one frame (an empty one with its columns when none)."""
    pages = [p for p in pages if len(p)]
    if not pages:
        return samples_frame("", [])
    return pd.concat(pages, ignore_index=True)


LONG_COLUMNS = ["job_id", "task_id", "model", "device_kind", "device_model", "executor", "batch_size", "run", "phase",
                "metric", "value", "unit", "lo", "hi", "source", "valid", "invalid_reasons"]


def long_frame(job):
    """One row per task, phase and metric. `lo`/`hi`: the figure at the p75/p25
    step (throughput) or the p25/p75 step (time), else empty; `source`:
    measured, modeled or simulated (energy: the sensor's source)."""
    rows = []
    for t in job.tasks:
        env = t.result.environment
        base = {"job_id": job.id, "task_id": t.id, "model": t.model or (job.spec.models[0] if job.spec.models else ""),
                "device_kind": _kind(t.device_kind), "device_model": env.device_model,
                "executor": env.executor or t.executor, "batch_size": t.batch_size, "run": t.run or 1}
        timing_source = "simulated" if env.simulated else "measured"
        for p in t.result.phases:
            s = p.stats
            common = {**base, "phase": _phase(p.phase), "valid": p.valid, "invalid_reasons": "; ".join(p.invalid_reasons)}

            def add(metric, value, unit, source, lo=None, hi=None):
                rows.append({**common, "metric": metric, "value": value, "unit": unit, "lo": lo, "hi": hi,
                             "source": source})

            per_sample = s.items / s.count if s.count else 0
            if s.samples_per_second > 0:
                slow, fast = s.p75_ns, s.p25_ns
                add("samples_per_second", s.samples_per_second, "samples/s", timing_source,
                    per_sample / (slow * 1e-9) if slow > 0 and per_sample else None,
                    per_sample / (fast * 1e-9) if fast > 0 and per_sample else None)
            add("step_time_p50", s.p50_ns / 1e6, "ms", timing_source, s.p25_ns / 1e6, s.p75_ns / 1e6)
            add("step_time_p99", s.p99_ns / 1e6, "ms", timing_source)
            for e in t.result.energy:
                if e.phase == p.phase and e.joules_per_sample > 0:
                    source = _state(common_pb2.PowerSource, e.source, "POWER_SOURCE_")
                    add("energy_per_sample", e.joules_per_sample * 1e3, "mJ/sample",
                        "modeled" if source == "modeled" else ("simulated" if env.simulated else "measured"))
                    break
            for c in t.result.cost:
                if c.phase == p.phase and c.usd_per_1000_samples > 0:
                    add("cost_per_1000_samples", c.usd_per_1000_samples, "USD/1000 samples",
                        f"{timing_source} time x rate ({c.rate_source})")
    return pd.DataFrame(rows, columns=LONG_COLUMNS)
