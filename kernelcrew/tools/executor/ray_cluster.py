"""The Ray executor: each evaluation is a Ray task on a node that has the backend.

Nodes say what they can do with custom resources: `cpu_bench` (1 per machine) for the
cpu backend, `GPU` (1 per device, Ray's own) for cuda. A compile or a correctness check
asks for 1 CPU and a sliver (`SHARE`) of that resource, so the checks of an iteration run
in parallel over the nodes; a race asks for the whole of it, so it runs alone on its
machine (cpu) or device (cuda): no check and no other race share the machine or device
while it is timed, and the candidate and the kernel it races are timed by one task on
one node.

The executor places every task itself (hard node affinity, the least busy node that has
the resource), so it knows where a task was when it was lost: a task lost to a dead node
or worker is sent to another node, at most `MAX_ATTEMPTS` times in all, and then becomes
an infrastructure error (never a verdict). A cluster without a node that has the resource
raises `ExecutorError`, which stops the run with its best kernel on disk.

Only this module imports Ray, and only the `ray` executor imports this module.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
import time
from typing import Any

import ray
from ray import exceptions as rex
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from kernelcrew.errors import ExecutorError, InputError
from kernelcrew.kernels.formats import format_for
from kernelcrew.tools.executor.base import (
    Attempt,
    EvalResult,
    Evaluation,
    NodeUnfit,
    OnResult,
    RunSetup,
)
from kernelcrew.tools.executor.workbench import workbench_for

ADDRESS_ENV = "KERNELCREW_RAY_ADDRESS"
MAX_ATTEMPTS = 3  # per evaluation, over the nodes
SHARE = 0.01  # the part of a node's bench resource a compile or check holds
POLL_S = 2.0  # how often a wait checks that the cluster is still there
LOCAL_OBJECT_STORE = 100 * 2**20  # a Ray started for the run holds only small objects

_lock = threading.Lock()
_inflight: dict[str, int] = {}  # node id -> tasks this process placed there and awaits
_turn = itertools.count()
_joined: dict[str, str | None] = {}  # the cluster this process joined


def resource_for(backend: str) -> str:
    """The Ray resource a race holds whole: a GPU for device code (kernels.formats), the
    machine's `cpu_bench` for kernels that run on its CPUs."""
    return "GPU" if format_for(backend).code == "device" else "cpu_bench"


def connect(address: str | None) -> str:
    """Join the cluster at `address` (or KERNELCREW_RAY_ADDRESS), or start a Ray for this
    process when there is none; once per process. Returns what it connected to."""
    address = address or os.environ.get(ADDRESS_ENV) or None
    with _lock:
        if ray.is_initialized():
            if address and _joined.get("address") not in (None, address):
                raise InputError(f"this process already uses the Ray cluster at "
                                 f"{_joined['address']}; one process joins one cluster "
                                 f"(asked for {address})")
            return _joined.get("where", "the running Ray")
        kw: dict[str, Any] = {"logging_level": "ERROR", "log_to_driver": False,
                              "include_dashboard": False}
        if address:
            try:
                ray.init(address=address, **kw)
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise InputError(f"cannot join the Ray cluster at {address!r}: "
                                 f"{str(e).splitlines()[0][:200]}; check --ray-address or "
                                 f"{ADDRESS_ENV} (ray status shows the head's address)"
                                 ) from None
            _joined.update(address=address, where=address)
            return address
        ray.init(num_cpus=os.cpu_count() or 1, resources={"cpu_bench": 1},
                 object_store_memory=LOCAL_OBJECT_STORE, **kw)
        _joined.update(address=None, where="a local Ray started for this run")
        return _joined["where"]


def _nodes(resource: str) -> list[dict]:
    try:
        nodes = ray.nodes()
    except Exception as e:  # noqa: BLE001 - any failure to reach the cluster's control store
        raise ExecutorError(f"the Ray cluster is gone: {type(e).__name__}: {e}") from None
    return [n for n in nodes if n.get("Alive") and n.get("Resources", {}).get(resource, 0) > 0]


@ray.remote(max_retries=0)
def _run_on_node(setup: dict, evaluation: dict) -> dict:
    node = ray.get_runtime_context().get_node_id()
    t0 = time.time()
    bench = workbench_for(RunSetup.model_validate(setup))
    res = bench.run(Evaluation.model_validate(evaluation))
    res.node, res.host = node, socket.gethostname()
    res.started, res.finished = t0, time.time()
    return res.model_dump(mode="json")


# what Ray raises when the infrastructure lost a task (not an error of the task's code)
_LOST = tuple(getattr(rex, n) for n in (
    "WorkerCrashedError", "NodeDiedError", "ObjectLostError", "OwnerDiedError",
    "TaskUnschedulableError", "LocalRayletDiedError", "RaySystemError", "OutOfMemoryError",
    "ObjectFetchTimedOutError", "ObjectReconstructionFailedError", "TaskCancelledError",
    "ReferenceCountingAssertionError") if hasattr(rex, n))


class RayExecutor:
    name = "ray"

    def __init__(self, setup: RunSetup, *, address: str | None = None,
                 max_attempts: int = MAX_ATTEMPTS) -> None:
        self.where = connect(address)
        self.resource = resource_for(setup.backend)
        self.max_attempts = max_attempts
        if not _nodes(self.resource):
            raise InputError(
                f"no node of the Ray cluster ({self.where}) declares the resource "
                f"{self.resource!r}, so none can run {setup.backend} evaluations; start each "
                + ("machine's node with --resources='{\"cpu_bench\": 1}'"
                   if self.resource == "cpu_bench" else "GPU node with its GPUs visible")
                + " (docs/cluster.md)")
        self.setup_ref = ray.put(setup.model_dump())
        self.host = socket.gethostname()

    # -- placement ------------------------------------------------------------------
    def _options(self, stage: str, node_id: str) -> dict:
        strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
        amount = 1 if stage == "race" else SHARE
        if self.resource == "GPU":
            return {"num_cpus": 1, "num_gpus": amount, "scheduling_strategy": strategy}
        return {"num_cpus": 1, "resources": {self.resource: amount},
                "scheduling_strategy": strategy}

    def _pick(self, avoid: set[str]) -> dict:
        nodes = _nodes(self.resource)
        if not nodes:
            raise ExecutorError(f"the Ray cluster ({self.where}) has no live node with the "
                                f"resource {self.resource!r} left")
        fresh = [n for n in nodes if n["NodeID"] not in avoid] or nodes
        turn = next(_turn)
        with _lock:
            def load(n: dict) -> tuple[float, int]:
                cap = max(n["Resources"].get(self.resource, 1), n["Resources"].get("CPU", 1))
                return (_inflight.get(n["NodeID"], 0) / cap,
                        (fresh.index(n) - turn) % len(fresh))
            node = min(fresh, key=load)
            _inflight[node["NodeID"]] = _inflight.get(node["NodeID"], 0) + 1
        return node

    def _done(self, node_id: str) -> None:
        with _lock:
            _inflight[node_id] = max(0, _inflight.get(node_id, 0) - 1)

    def _submit(self, e: Evaluation, attempts: list[Attempt]) -> tuple[Any, dict]:
        node = self._pick({a.node for a in attempts})
        ref = _run_on_node.options(**self._options(e.stage, node["NodeID"])).remote(
            self.setup_ref, e.model_dump())
        return ref, node

    # -- the batch --------------------------------------------------------------------
    def evaluate(self, batch: list[Evaluation], on_result: OnResult | None = None
                 ) -> list[EvalResult]:
        results: dict[str, EvalResult] = {}
        pending: dict[Any, tuple[Evaluation, dict, list[Attempt]]] = {}

        def finish(r: EvalResult) -> None:
            r.executor = self.name
            results[r.key] = r
            if on_result is not None:
                on_result(r)

        def lost(e: Evaluation, node: dict, attempts: list[Attempt], why: str) -> None:
            attempts = [*attempts, Attempt(node=node["NodeID"],
                                           host=node.get("NodeManagerHostname", ""),
                                           error=why[:300])]
            if len(attempts) >= self.max_attempts:
                finish(EvalResult(key=e.key, stage=e.stage, attempts=attempts,
                                  infra_error=f"{len(attempts)} attempts lost by the cluster; "
                                              f"last: {why[:200]}"))
                return
            ref, n = self._submit(e, attempts)
            pending[ref] = (e, n, attempts)

        try:
            for e in batch:
                ref, node = self._submit(e, [])
                pending[ref] = (e, node, [])
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_S)
                if not ready:
                    self._check_pending(pending, lost)
                    continue
                ref = ready[0]
                e, node, attempts = pending.pop(ref)
                self._done(node["NodeID"])
                try:
                    data = ray.get(ref)
                except rex.RayTaskError as err:  # the task's own code raised
                    cause = err.cause if getattr(err, "cause", None) is not None else err
                    if isinstance(cause, NodeUnfit):
                        lost(e, node, attempts, f"NodeUnfit: {cause}")
                        continue
                    raise cause from None
                except _LOST as err:
                    lost(e, node, attempts, f"{type(err).__name__}: "
                                            f"{str(err).strip().splitlines()[0] if str(err) else ''}")
                    continue
                r = EvalResult.model_validate(data)
                r.attempts = attempts
                finish(r)
        except BaseException:
            for ref, (_e, node, _a) in pending.items():
                self._done(node["NodeID"])
                _cancel(ref)
            raise
        return [results[e.key] for e in batch]

    def _check_pending(self, pending: dict, lost: Any) -> None:
        """A task placed on a node that died while it waited is lost: Ray raises for it
        in time, but a cluster that went away as a whole never answers."""
        alive = {n["NodeID"] for n in _nodes(self.resource)}
        if not alive:
            raise ExecutorError(f"the Ray cluster ({self.where}) has no live node with the "
                                f"resource {self.resource!r} left")
        for ref, (e, node, attempts) in list(pending.items()):
            if node["NodeID"] not in alive:
                pending.pop(ref)
                self._done(node["NodeID"])
                _cancel(ref)
                lost(e, node, attempts, "NodeDiedError: the node left the cluster")

    def candidate_slots(self, requested: int) -> int:
        """More candidates per iteration when more machines or devices are free."""
        try:
            free = ray.available_resources().get(self.resource, 0.0)
        except Exception:  # noqa: BLE001 - no answer: no more than asked
            return requested
        return max(requested, int(free + 1e-6))

    def close(self) -> None:
        pass


def _cancel(ref: Any) -> None:
    try:
        ray.cancel(ref, force=True)
    except Exception:  # noqa: BLE001, S110 - the task's node or the cluster may be gone
        pass


def shutdown() -> None:
    """End this process's Ray connection (and a Ray it started)."""
    if ray.is_initialized():
        ray.shutdown()
    _joined.clear()
