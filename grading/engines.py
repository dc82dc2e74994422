"""The engines that grade a batch: each yields an Outcome per notebook as it finishes, and the driver
(grading/grade.py) records them one at a time (grading/reports.py).

* ``run_local``: threads of the driver's process, ``--jobs`` at a time; each notebook is graded by
  processes of its own (worker.grade_one).
* ``run_ray``: Ray tasks, on a local Ray or the cluster at ``$RAY_ADDRESS``; each task carries its
  notebook's bytes and returns its Outcome, the template travelling once through Ray's object store.
"""

from __future__ import annotations

import os
import queue
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from grading.handin import learner_id
from grading.worker import GRADING_STATE, Outcome, failure_note, grade_one, pack

Task = tuple[str, bytes]  # (file name as handed in, its bytes)


def run_local(
    assignment: str, tasks: list[Task], template: Path, options: dict, jobs: int
) -> Iterator[Outcome]:
    """Threads of this process, ``jobs`` at a time; each notebook is graded by its own processes."""
    slots: queue.SimpleQueue[int] = queue.SimpleQueue()
    for slot in range(jobs):
        slots.put(slot)

    def work(task: Task) -> Outcome:
        slot = slots.get()
        try:
            return grade_one(assignment, *task, template, slot=slot, **options)
        except Exception as e:  # grade_one never raises; if it did, it costs this learner alone
            return Outcome(learner_id(Path(task[0]).name), Path(task[0]), notes=[failure_note(e)])
        finally:
            slots.put(slot)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for future in as_completed([pool.submit(work, task) for task in tasks]):
            yield future.result()


def _grade_task(assignment: str, task: Task, template: bytes, slot: int, options: dict) -> Outcome:
    """grade_one as a Ray task, its parameters all positional: the typing of ``ray.remote`` knows only
    positional ones, and grade_one's options are keyword-only."""
    return grade_one(assignment, *task, template, slot=slot, **options)


def run_ray(
    assignment: str, tasks: list[Task], template: Path, options: dict, jobs: int
) -> Iterator[Outcome]:
    """Ray tasks: a local Ray with ``jobs`` CPUs, or the cluster at $RAY_ADDRESS (one task per CPU).

    The packed template is put in Ray's object store once; each task carries its notebook's bytes and
    returns its Outcome, so a worker needs nothing of this machine's files. The grading package itself
    travels as a runtime_env module; the workers' Python needs the course's requirements.
    """
    import ray
    from ray.exceptions import RayError, RayTaskError

    runtime_env = {
        "py_modules": [str(Path(__file__).resolve().parent)],
        "excludes": [f"{name}/" if "." not in name else name for name in GRADING_STATE],
    }
    address = os.environ.get("RAY_ADDRESS")
    if address:
        try:
            ray.init(address=address, runtime_env=runtime_env, log_to_driver=False)
        except (ConnectionError, RuntimeError) as e:
            hint = ""
            if "auth" in str(e).lower():
                hint = (
                    "; the cluster uses token authentication: set RAY_AUTH_MODE=token and give its token "
                    "(~/.ray/auth_token or RAY_AUTH_TOKEN)"
                )
            raise SystemExit(f"could not connect to the Ray cluster at RAY_ADDRESS={address}{hint}") from e
        jobs = max(1, int(ray.cluster_resources().get("CPU", jobs)))
    else:  # address="local": a fresh Ray of our own, even when another is running on this machine
        ray.init(
            address="local",
            num_cpus=jobs,
            runtime_env=runtime_env,
            include_dashboard=False,
            log_to_driver=False,
        )
    try:
        nodes = sum(1 for node in ray.nodes() if node.get("Alive"))
        print(f"Ray: {nodes} node(s), {jobs} notebook(s) at a time", flush=True)
        remote = ray.remote(num_cpus=1)(_grade_task)
        shipped = ray.put(pack(template))
        waiting, free = list(reversed(tasks)), list(range(jobs))
        running: dict[ray.ObjectRef[Outcome], tuple[int, Task]] = {}
        while waiting or running:
            while waiting and free:  # at most one task per slot, so a slot is unique among running ones
                slot, task = free.pop(0), waiting.pop()
                running[remote.remote(assignment, task, shipped, slot, options)] = (slot, task)
            (ref,), _ = ray.wait(list(running), num_returns=1)
            slot, (source, _) = running.pop(ref)
            free.append(slot)
            try:
                outcome = ray.get(ref)
            except RayTaskError as e:  # grade_one raised all the same (it never should): this learner's note
                outcome = Outcome(learner_id(Path(source).name), Path(source), notes=[failure_note(e)])
            except RayError as e:  # the worker or its node died, after Ray's own retries: say so
                outcome = Outcome(
                    learner=learner_id(Path(source).name),
                    source=Path(source),
                    notes=[
                        f"the Ray worker grading this notebook failed ({type(e).__name__}); "
                        "scored 0: grade this learner again."
                    ],
                )
            yield outcome
    finally:
        ray.shutdown()


#: The engines that grade a batch's notebooks, by the name ``--engine`` gives.
ENGINES = {"local": run_local, "ray": run_ray}
