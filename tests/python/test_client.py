"""The Python client (client/python/hetbench_client) against a live coordinator
and agent (tests/e2e/python_client_test.sh starts them): submit, wait, the
frames against the job as the coordinator returns it, paging of samples and
jobs, and a refused spec raising with the field named."""

import json
import os
import subprocess
import unittest

from hetbench_client import Client, HetbenchError

CLI = os.environ["HETBENCH_CLI"]

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


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.hb = Client()
        cls.job_id = cls.hb.submit(SMALL)
        cls.job = cls.hb.wait(cls.job_id, timeout=240)

    def test_results_are_the_jobs_figures_one_row_per_task_and_phase(self):
        self.assertEqual(self.job.state, 3, self.job.error)  # JOB_STATE_SUCCEEDED
        frame = self.hb.results(self.job_id)
        self.assertEqual(sorted(frame["phase"].unique()), ["infer", "train"])
        self.assertEqual(len(frame), 4)  # 2 tasks x 2 phases
        cli = cli_json("get", "job", self.job_id)
        for task in cli["tasks"]:
            for phase in task["result"]["phases"]:
                name = phase["phase"][len("PHASE_"):].lower()
                row = frame[(frame.task_id == task["id"]) & (frame.phase == name)]
                self.assertEqual(len(row), 1)
                self.assertAlmostEqual(row.p50_ms.iloc[0], phase["stats"]["p50_ns"] / 1e6, places=9)
                self.assertEqual(int(row.steps.iloc[0]), int(phase["stats"]["count"]))
                self.assertEqual(bool(row.valid.iloc[0]), phase["valid"])
                self.assertEqual(row.invalid_reasons.iloc[0], "; ".join(phase["invalid_reasons"]))
        self.assertEqual(set(frame.batch_size), {32, 64})
        self.assertTrue((frame.device_kind == "cpu").all())

    def test_samples_are_every_stored_sample(self):
        task = self.job.tasks[0]
        frame = self.hb.samples(task.id)
        self.assertEqual(len(frame), task.result.samples_stored)
        self.assertEqual(set(frame.phase), {"train", "infer"})
        self.assertTrue((frame.duration_ns > 0).all())

    def test_jobs_and_agents(self):
        jobs = self.hb.jobs()
        self.assertIn(self.job_id, list(jobs.job_id))
        self.assertEqual(jobs[jobs.job_id == self.job_id].state.iloc[0], "succeeded")
        self.assertEqual(list(self.hb.jobs(model="no-such-model").job_id), [])
        agents = self.hb.agents()
        self.assertIn("py", list(agents.agent_id))

    def test_a_refused_spec_raises_naming_the_field(self):
        with self.assertRaises(HetbenchError) as refused:
            self.hb.submit({"models": ["nope"]})
        self.assertEqual(refused.exception.code.name, "INVALID_ARGUMENT")
        self.assertIn('models[0] = "nope": unknown model', str(refused.exception))
        with self.assertRaises(HetbenchError) as unknown:
            self.hb.submit({"modles": ["mlp"]})
        self.assertIn("modles", str(unknown.exception))
        with self.assertRaises(HetbenchError) as missing:
            self.hb.job("job-999999")
        self.assertEqual(missing.exception.code.name, "NOT_FOUND")

    def test_a_serving_run_is_a_row_with_its_verdict(self):
        job_id = self.hb.submit({"models": ["null"], "batch_sizes": [8],
                                 "serving": {"scenario": "server", "target_qps": 500, "latency_bound_ms": 20,
                                             "min_duration_seconds": 0.5, "min_queries": 200}})
        self.hb.wait(job_id, timeout=120)
        frame = self.hb.serving(job_id)
        self.assertEqual(len(frame), 1)
        row = frame.iloc[0]
        self.assertEqual(row.scenario, "server")
        self.assertEqual(row.target_qps, 500)
        self.assertGreaterEqual(row.queries_answered, 200)
        self.assertGreater(row.latency_p99_ms, 0)
        cli = cli_json("get", "job", job_id)
        self.assertEqual(bool(row.valid), cli["tasks"][0]["result"]["phases"][0]["valid"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
