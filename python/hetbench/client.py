"""The Client: calls, paging and waiting; frames.py turns results into DataFrames."""

import os
import time
import uuid

import grpc
from google.protobuf import json_format

from hetbench.v1 import common_pb2, coordinator_pb2, coordinator_pb2_grpc
from hetbench import frames

_TERMINAL = {
    common_pb2.JOB_STATE_SUCCEEDED,
    common_pb2.JOB_STATE_FAILED,
    common_pb2.JOB_STATE_CANCELLED,
}


class HetbenchError(RuntimeError):
    """A call the coordinator refused or could not answer: its gRPC code
    (`code`, a grpc.StatusCode, None for a spec refused before sending) and the
    coordinator's message, which names the field and the fix."""

    def __init__(self, what, error, hint=""):
        self.code = error.code() if hasattr(error, "code") else None
        detail = error.details() if hasattr(error, "details") else str(error)
        name = self.code.name if self.code is not None else "INVALID_ARGUMENT"
        super().__init__(f"{what}: {name}: {detail}{hint}")


class NotFound(HetbenchError):
    """No such job or task."""


class Unauthenticated(HetbenchError):
    """No token, or not one of this coordinator's."""


class PermissionDenied(HetbenchError):
    """A token of another role (an agent's) for the client API."""


class Unavailable(HetbenchError):
    """The coordinator cannot be reached (or is a standby)."""


_TYPED = {
    grpc.StatusCode.NOT_FOUND: (NotFound, ""),
    grpc.StatusCode.UNAUTHENTICATED: (
        Unauthenticated, "; pass token=\"...\" (a client token from the coordinator's --token-file) to Client()"),
    grpc.StatusCode.PERMISSION_DENIED: (
        PermissionDenied, "; this is an agent's token: pass a client token to Client()"),
    grpc.StatusCode.UNAVAILABLE: (
        Unavailable, "; is hetbench-server running there? Client(server=...) or HETBENCH_SERVER names it"),
}


class Client:
    """One coordinator. `server` as the CLI's --server (default HETBENCH_SERVER,
    else 127.0.0.1:50051); `token` a client bearer token; `ca_file` the CA
    that signs the coordinator's TLS certificate (TLS when given)."""

    def __init__(self, server=None, token=None, ca_file=None, timeout=30.0):
        self.server = server or os.environ.get("HETBENCH_SERVER") or "127.0.0.1:50051"
        self.timeout = timeout
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        if ca_file:
            with open(ca_file, "rb") as f:
                creds = grpc.ssl_channel_credentials(root_certificates=f.read())
            self._channel = grpc.secure_channel(self.server, creds)
        else:
            self._channel = grpc.insecure_channel(self.server)
        self._stub = coordinator_pb2_grpc.CoordinatorStub(self._channel)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, what, method, request):
        try:
            return method(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            kind, hint = _TYPED.get(e.code(), (HetbenchError, ""))
            raise kind(what, e, hint) from None

    # ---- jobs

    def submit(self, spec, request_id=None):
        """Submits a spec (a dict in the spec's protobuf JSON field names, e.g.
        {"models": ["mlp"], "batch_sizes": [32]}, or a JobSpec); returns the job
        id. The coordinator fills the defaults and refuses bad input, naming
        the field; the request id makes a retry idempotent."""
        if isinstance(spec, dict):
            try:
                spec = json_format.ParseDict(spec, common_pb2.JobSpec())
            except json_format.ParseError as e:
                raise HetbenchError("submit", e) from None
        request = coordinator_pb2.SubmitJobRequest(spec=spec, request_id=request_id or uuid.uuid4().hex)
        return self._call("submit", self._stub.SubmitJob, request).job_id

    def job(self, job_id):
        """The job with every task's result (all task pages)."""
        request = coordinator_pb2.GetJobRequest(job_id=job_id, task_page_size=1024)
        job = self._call(f"get job {job_id[:80]}", self._stub.GetJob, request)
        while job.next_task_page_token:
            request.task_page_token = job.next_task_page_token
            page = self._call(f"get job {job_id[:80]}", self._stub.GetJob, request)
            job.tasks.extend(page.tasks)
            job.next_task_page_token = page.next_task_page_token
        return job

    def wait(self, job_id, timeout=None, poll_seconds=0.5):
        """Polls until the job ends; returns it. TimeoutError after `timeout` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            request = coordinator_pb2.GetJobRequest(job_id=job_id, view=coordinator_pb2.JOB_VIEW_SUMMARY)
            if self._call(f"get job {job_id[:80]}", self._stub.GetJob, request).state in _TERMINAL:
                return self.job(job_id)
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"{job_id} still running after {timeout} s")
            time.sleep(poll_seconds)

    def cancel(self, job_id):
        return self._call(f"cancel {job_id[:80]}", self._stub.CancelJob, coordinator_pb2.CancelJobRequest(job_id=job_id))

    def iter_jobs(self, state=None, model=None, device_kind=None, page_size=200):
        """Every job, newest first, a page at a time (listed jobs carry task
        states, not results: job() has those). `state` and `device_kind` as
        the CLI spells them ("succeeded", "cpu")."""
        request = coordinator_pb2.ListJobsRequest(page_size=page_size, model=model or "")
        if state:
            request.state = common_pb2.JobState.Value(f"JOB_STATE_{state.upper()}")
        if device_kind:
            request.device_kind = common_pb2.DeviceKind.Value(f"DEVICE_KIND_{device_kind.upper().replace('-', '_')}")
        while True:
            page = self._call("list jobs", self._stub.ListJobs, request)
            yield from page.jobs
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token

    # ---- frames

    def jobs(self, state=None, model=None, device_kind=None):
        """Every job as a DataFrame (one row per job)."""
        return frames.jobs_frame(self.iter_jobs(state, model, device_kind))

    def results(self, job_id):
        """One row per task and measured phase: timing, throughput, validity,
        energy and cost; units in the column names."""
        return frames.results_frame(self.job(job_id))

    def serving(self, job_id):
        """One row per serving task (and per merged replicated run)."""
        return frames.serving_frame(self.job(job_id))

    def iter_samples(self, task_id, page_size=64):
        """A task's stored samples a page at a time: each page a DataFrame
        (phase, start_ns, duration_ns, items) of up to `page_size` batches."""
        request = coordinator_pb2.GetTaskDataRequest(
            task_id=task_id, kind=coordinator_pb2.GetTaskDataRequest.KIND_SAMPLES, page_size=page_size)
        while True:
            data = self._call(f"samples of {task_id[:80]}", self._stub.GetTaskData, request)
            yield frames.samples_frame(task_id, data.samples)
            if not data.next_page_token:
                return
            request.page_token = data.next_page_token

    def samples(self, task_id):
        """Every stored sample of a task, all pages in one DataFrame."""
        return frames.concat(list(self.iter_samples(task_id, page_size=256)))

    def to_pandas(self, job_id):
        """The job's results in long form: one row per task, phase and metric
        (value, unit, the p25/p75 bounds where the metric has them, and its
        source: measured, modeled or simulated), validity on every row."""
        return frames.long_frame(self.job(job_id))

    def agents(self):
        """Every agent's devices, one row per device."""
        response = self._call("list agents", self._stub.ListAgents, coordinator_pb2.ListAgentsRequest())
        return frames.agents_frame(response.agents)
