"""The Python client against a live coordinator and agent (started by
tests/e2e/python_client_test.sh, which installs the package into a fresh
venv first): submit, wait, the frames against the job as the CLI prints it,
long form with units and sources, samples by page, typed errors, tokens,
and the example script."""

import json
import os
import subprocess
import sys

import pytest

from hetbench import Client, HetbenchError, NotFound, PermissionDenied, Unauthenticated

CLI = os.environ["HETBENCH_CLI"]
HERE = os.path.dirname(os.path.abspath(__file__))

SMALL = {
    "name": "python-client",
    "models": ["mlp"],
    "batch_sizes": [32, 64],
    "train": {"warmup_steps": 2, "min_steps": 20, "min_duration_seconds": 0},
    "inference": {"max_batches": 3},
}


def cli_json(*args):
    out = subprocess.run([CLI, *args, "-o", "json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


@pytest.fixture(scope="module")
def hb():
    with Client() as client:
        yield client


@pytest.fixture(scope="module")
def job(hb):
    job_id = hb.submit(SMALL)
    return hb.wait(job_id, timeout=240)


def test_results_are_the_jobs_figures_one_row_per_task_and_phase(hb, job):
    assert job.state == 3, job.error  # JOB_STATE_SUCCEEDED
    frame = hb.results(job.id)
    assert sorted(frame.phase.unique()) == ["infer", "train"]
    assert len(frame) == 4  # 2 tasks x 2 phases
    for task in cli_json("get", "job", job.id)["tasks"]:
        for phase in task["result"]["phases"]:
            name = phase["phase"][len("PHASE_"):].lower()
            row = frame[(frame.task_id == task["id"]) & (frame.phase == name)]
            assert len(row) == 1
            assert row.p50_ms.iloc[0] == pytest.approx(phase["stats"]["p50_ns"] / 1e6, rel=1e-12)
            assert int(row.steps.iloc[0]) == int(phase["stats"]["count"])
            assert bool(row.valid.iloc[0]) == phase["valid"]
            assert row.invalid_reasons.iloc[0] == "; ".join(phase["invalid_reasons"])
    assert set(frame.batch_size) == {32, 64}
    assert (frame.device_kind == "cpu").all()


def test_long_form_has_units_sources_and_bounds(hb, job):
    long = hb.to_pandas(job.id)
    assert {"metric", "value", "unit", "lo", "hi", "source", "valid"} <= set(long.columns)
    tput = long[long.metric == "samples_per_second"]
    assert set(tput.unit) == {"samples/s"}
    assert set(tput.source) == {"measured"}
    wide = hb.results(job.id)
    for _, r in tput.iterrows():
        w = wide[(wide.task_id == r.task_id) & (wide.phase == r.phase)]
        assert r.value == pytest.approx(w.samples_per_second.iloc[0])
        assert r.lo <= r.hi
    energy = long[long.metric == "energy_per_sample"]
    assert set(energy.unit) <= {"mJ/sample"}
    assert set(energy.source) <= {"measured", "modeled"}


def test_samples_come_by_page_and_whole(hb, job):
    task = job.tasks[0]
    pages = list(hb.iter_samples(task.id, page_size=1))
    assert len(pages) > 1, "one batch per page: several pages"
    assert sum(len(p) for p in pages) == task.result.samples_stored
    frame = hb.samples(task.id)
    assert len(frame) == task.result.samples_stored
    assert set(frame.phase) == {"train", "infer"}
    assert (frame.duration_ns > 0).all()


def test_jobs_and_agents(hb, job):
    jobs = hb.jobs()
    assert job.id in list(jobs.job_id)
    assert jobs[jobs.job_id == job.id].state.iloc[0] == "succeeded"
    assert list(hb.jobs(model="no-such-model").job_id) == []
    assert "py" in list(hb.agents().agent_id)


def test_errors_are_typed_and_name_the_fix(hb):
    with pytest.raises(HetbenchError) as refused:
        hb.submit({"models": ["nope"]})
    assert refused.value.code.name == "INVALID_ARGUMENT"
    assert 'models[0] = "nope": unknown model' in str(refused.value)
    with pytest.raises(HetbenchError) as misspelt:
        hb.submit({"modles": ["mlp"]})
    assert "modles" in str(misspelt.value)
    with pytest.raises(NotFound):
        hb.job("job-999999")


def test_tokens_wrong_agent_and_client():
    server, token, agent_token = (os.environ["HETBENCH_TOKENS_SERVER"], os.environ["HETBENCH_CLIENT_TOKEN"],
                                  os.environ["HETBENCH_AGENT_TOKEN"])
    with pytest.raises(Unauthenticated) as wrong:
        Client(server, token="not-a-token-of-this-coordinator").jobs()
    assert "pass token=" in str(wrong.value)
    with pytest.raises(Unauthenticated):
        Client(server).jobs()
    with pytest.raises(PermissionDenied):
        Client(server, token=agent_token).jobs()
    assert len(Client(server, token=token).jobs()) == 0


def test_a_serving_run_is_a_row_with_its_verdict(hb):
    job_id = hb.submit({"models": ["null"], "batch_sizes": [8],
                        "serving": {"scenario": "server", "target_qps": 500, "latency_bound_ms": 20,
                                    "min_duration_seconds": 0.5, "min_queries": 200}})
    hb.wait(job_id, timeout=120)
    frame = hb.serving(job_id)
    assert len(frame) == 1
    row = frame.iloc[0]
    assert row.scenario == "server" and row.target_qps == 500
    assert row.queries_answered >= 200 and row.latency_p99_ms > 0
    assert bool(row.valid) == cli_json("get", "job", job_id)["tasks"][0]["result"]["phases"][0]["valid"]


def test_the_example_rebuilds_the_study_table(job):
    out = subprocess.run([sys.executable, os.path.join(HERE, "..", "examples", "study_table.py"), job.id],
                         check=True, capture_output=True, text=True).stdout
    lines = out.splitlines()
    assert "speedup" in lines[0] and "valid" in lines[0]
    assert len(lines) == 1 + 4  # 2 tasks x 2 phases
    assert all(" 1.0" in line for line in lines[1:]), "one CPU: each row is its own baseline"
