"""Work beyond one process: DBOS as the durable engine (`chatagent[dbos]`) for turns, flows, crews and batch work.

    from chatagent.workers import Jobs, QueueLimits, Workers
    Workers(url, agents={"assistant": bot}).serve_forever()        # in each worker process (`chatagent worker`)
    job = Jobs(url).turn("assistant", [{"role": "user", "content": "hi"}], user="alice")   # from anywhere
    job.wait(timeout=60).messages

See `engine` (the workflows and the worker), `client` (submitting and following jobs), `jobs` (what a job is and
where it stands), `liveness` (dead workers' jobs recovered), `batch` (one function over many items on the
workers), and docs/scale.md. dbos is imported on first use, not with this package.
"""

from typing import TYPE_CHECKING

from chatagent.utils.lazy import lazy_exports

_EXPORTS = {
    "Workers": "chatagent.workers.engine",
    "QueueLimits": "chatagent.workers.engine",
    "Jobs": "chatagent.workers.client",
    "Job": "chatagent.workers.client",
    "JobStatus": "chatagent.workers.client",
    "JobTimeout": "chatagent.workers.client",
    "JobSpec": "chatagent.workers.jobs",
}

if TYPE_CHECKING:
    from chatagent.workers.client import Job, Jobs, JobStatus, JobTimeout
    from chatagent.workers.engine import QueueLimits, Workers
    from chatagent.workers.jobs import JobSpec

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["Job", "JobSpec", "JobStatus", "JobTimeout", "Jobs", "QueueLimits", "Workers"]
