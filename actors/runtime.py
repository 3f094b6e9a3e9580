"""The runtime: starts the pipeline actors in dependency order, stops them in reverse.

Only one runtime runs per data directory (the node lock). On start, every
document left mid-pipeline goes back to Pending and the drain sweep admits
Pending rows; on stop, admission closes, in-flight documents get up to the
drain deadline to finish, and whatever is left stays non-terminal for the
next start.

On a store many nodes share (PostgreSQL), the runtime joins the store's
nodes first, resets only the documents its own data directory held, and
claims work under leases (:class:`actors.admission.SharedAdmission`); on
stop it gives its leases back, so the other nodes carry on at once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol, cast

import pykka

from actors.admission import Admission, AdmissionState, SharedAdmission
from actors.chunker import Chunker
from actors.embedder import Embedder
from actors.events import (
    Admit,
    AdmitResult,
    FlushStatus,
    GetAdmissionState,
    ScanForStale,
    StopAdmitting,
    SweepPending,
)
from actors.extractor import Extractor
from actors.indexer import Indexer
from actors.prewarm_manager import PrewarmManager, request_warm
from actors.reindexer import Reindexer
from actors.relay import NodeEventRelay
from actors.stage import PipelineContext
from actors.status_writer import NodeStatusWriter
from kbtui.errors import KbtuiError
from kbtui.extract import shutdown_extraction
from kbtui.ports import NodeLockHandle

log = logging.getLogger(__name__)


ACTOR_STOP_TIMEOUT_S = 3.0


class NodeAlreadyRunning(KbtuiError):
    pass


class Companion(Protocol):
    """Something that runs beside the pipeline and feeds it Pending rows (the source watcher)."""

    def start(self, wake: Callable[[], None]) -> None: ...

    def stop(self) -> None: ...


class Runtime:
    """The running ingestion pipeline of one node."""

    def __init__(
        self,
        context: PipelineContext,
        *,
        listeners: Sequence[pykka.ActorRef] = (),
        warmers: dict[str, Callable[[], None]] | None = None,
        companions: Sequence[Companion] = (),
    ) -> None:
        self.context = context
        self.companions = list(companions)
        self._companions_started: list[Companion] = []
        self.warmers = {"embedder": self._warm_embedder, **(warmers or {})}
        self.config = context.config
        self.external_listeners = list(listeners)
        self._started: list[pykka.ActorRef] = []
        self._lock: NodeLockHandle | None = None
        self._joined = False
        self._ticker: threading.Thread | None = None
        self._ticker_stop = threading.Event()
        self._hurry = threading.Event()
        self.admission: pykka.ActorRef | None = None
        self.prewarm: pykka.ActorRef | None = None
        self.reindexer: pykka.ActorRef | None = None
        self.status_writer: pykka.ActorRef | None = None

    # ------------------------------------------------------------ life cycle

    def start(self) -> Runtime:
        self._lock = self.context.store.lock_node()
        if self._lock is None:
            raise NodeAlreadyRunning("another kbtui node is already running for this data directory")
        resume = getattr(self.context.embedder, "resume", None)
        if resume is not None:
            resume()
        try:
            with self.context.store.session():
                self._join()
        except BaseException:
            self._lock.release()  # nothing started yet
            self._lock = None
            raise
        try:
            with self.context.store.session():
                reset = self.context.store.catalog.reset_non_terminal()
            if reset:
                log.info("reset %d interrupted document(s) to Pending", reset)
            self._start_actors()
            for companion in self.companions:
                companion.start(self.sweep_now)
                self._companions_started.append(companion)
        except BaseException:
            self.stop(drain_timeout_s=0)
            raise
        self._ticker = threading.Thread(target=self._tick, name="kbtui-ticker", daemon=True)
        self._ticker.start()
        log.info("pipeline started")
        return self

    def _join(self) -> None:
        """On a store many nodes share, register as one of its pipeline nodes
        (refused when the live ones embed with another model)."""
        coordination = self.context.store.coordination
        if coordination is None:
            return
        embedder = self.context.embedder
        identity = embedder.identity.canonical() if getattr(embedder, "identity_confident", True) else None
        coordination.join(role="pipeline", model_identity=identity, lease_s=self.config.node_lease_s)
        self._joined = True

    def _leave(self) -> None:
        coordination = self.context.store.coordination
        if coordination is None or not self._joined:
            return
        self._joined = False
        try:
            with self.context.store.session():
                coordination.leave()
        except Exception as exc:  # noqa: BLE001 - a server that is down: the leases run out by themselves
            log.warning("could not give back this node's leases (%s); other nodes take them when they expire",
                        type(exc).__name__)

    def _start_actors(self) -> None:
        ctx, cfg = self.context, self.config

        def started(ref: pykka.ActorRef) -> pykka.ActorRef:
            self._started.append(ref)
            return ref

        # Listeners first, so they see every event; then the stages from the
        # end of the pipeline to its start, so each can be handed its successor.
        self.status_writer = started(NodeStatusWriter.start(cfg.home))
        if ctx.store.coordination is not None:  # a store many nodes share: their events and ours
            started(NodeEventRelay.start(ctx.store.coordination))
        self._started.extend(self.external_listeners)
        self.prewarm = started(PrewarmManager.start(self.warmers))
        indexer = started(Indexer.start(ctx))
        embedder = started(Embedder.start(ctx, indexer))
        chunker = started(Chunker.start(ctx, embedder))
        # One extractor actor per extraction worker process, so neither waits on the other.
        extractors = [
            started(Extractor.start(ctx, chunker)) for _ in range(max(1, cfg.extraction.worker_processes))
        ]
        coordination = ctx.store.coordination
        admission: pykka.ActorRef
        if coordination is None:
            admission = Admission.start(
                ctx.store.catalog, extractors, capacity=cfg.admission_queue_capacity, max_in_flight=cfg.max_in_flight
            )
        else:
            admission = SharedAdmission.start(
                ctx.store.catalog, coordination, extractors, capacity=cfg.admission_queue_capacity,
                max_in_flight=cfg.max_in_flight,
            )
        self.admission = started(admission)
        self.reindexer = started(Reindexer.start(ctx, self.admission, batch=cfg.admission_queue_capacity))
        request_warm(self.prewarm, "embedder")
        self.admission.tell(SweepPending())

    def _warm_embedder(self) -> None:
        self.context.embedder.embed_query("warm up")

    def _tick(self) -> None:
        next_scan = time.monotonic() + self.config.reindex_interval_s
        while not self._ticker_stop.wait(self.config.drain_sweep_interval_s):
            try:
                _started(self.admission).tell(SweepPending())
                _started(self.status_writer).tell(FlushStatus())
                if self.config.reindex_interval_s > 0 and time.monotonic() >= next_scan:
                    _started(self.reindexer).tell(ScanForStale())
                    next_scan = time.monotonic() + self.config.reindex_interval_s
            except pykka.ActorDeadError:
                return

    def stop(self, *, drain_timeout_s: float | None = None) -> None:
        """Stop admitting, drain in-flight documents up to the deadline, stop actors."""
        timeout = self.config.shutdown_drain_timeout_s if drain_timeout_s is None else drain_timeout_s
        # Companions first: nothing new is written while the pipeline drains.
        while self._companions_started:
            self._companions_started.pop().stop()
        self._ticker_stop.set()
        if self.admission is not None and self.admission.is_alive():
            try:
                self.admission.ask(StopAdmitting(), timeout=5)
                deadline = time.monotonic() + timeout
                while time.monotonic() < deadline and not self._hurry.is_set() and self.state().in_flight > 0:
                    self._hurry.wait(0.05)
            except (pykka.ActorDeadError, pykka.Timeout):
                pass
        self.context.stopping.set()
        # Inference in progress stops now rather than at the end of its batch:
        # its thread must be done before the process exits.
        interrupt = getattr(self.context.embedder, "interrupt", None)
        if interrupt is not None:
            interrupt()
        try:
            # An actor stuck in a long call (a hung provider) must not hold up
            # the exit: ask all to stop, then wait a bounded time in total.
            futures = []
            for ref in reversed(self._started):
                if ref in self.external_listeners:
                    continue  # their owner stops them
                try:
                    futures.append(ref.stop(block=False))
                except pykka.ActorDeadError:
                    continue
            # Kill the extraction workers: an actor blocked on a long parse returns at once.
            shutdown_extraction()
            deadline = time.monotonic() + ACTOR_STOP_TIMEOUT_S
            for future in futures:
                try:
                    future.get(timeout=max(0.0, deadline - time.monotonic()))
                except pykka.Timeout:
                    log.warning("an actor is still busy at shutdown; its document stays queued")
        finally:
            self._started.clear()
            self._leave()
            if self._lock is not None:
                self._lock.release()
                self._lock = None
        log.info("pipeline stopped")

    def hurry(self) -> None:
        """Cut a :meth:`stop` in progress short: stop waiting for in-flight
        documents (they stay where they are and resume at the next start).
        Thread-safe; never waits."""
        self._hurry.set()

    def in_flight(self) -> int:
        """Documents inside the stages now (0 once the pipeline is gone)."""
        try:
            return self.state().in_flight if self.admission is not None else 0
        except (pykka.ActorDeadError, pykka.Timeout):
            return 0

    def __enter__(self) -> Runtime:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ requests from outside the actors

    def admit(self, document_id: str) -> AdmitResult:
        """Offer a Pending document to the pipeline (never blocks on a full queue)."""
        return cast(AdmitResult, _started(self.admission).ask(Admit(document_id), timeout=10))

    def sweep_now(self) -> None:
        """Have admission look for Pending rows now (a tell: never waits)."""
        if self.admission is not None:
            with contextlib.suppress(pykka.ActorDeadError):
                self.admission.tell(SweepPending())

    def state(self) -> AdmissionState:
        return cast(AdmissionState, _started(self.admission).ask(GetAdmissionState(), timeout=10))

    @property
    def running(self) -> bool:
        return self.admission is not None and self.admission.is_alive() and not self.context.stopping.is_set()

    def request_warm(self, target: str) -> None:
        """Ask for a background warm of ``target`` (e.g. "reranker"); never waits."""
        if self.prewarm is not None and target in self.warmers:
            request_warm(self.prewarm, target)

    def request_stale_scan(self) -> None:
        _started(self.reindexer).tell(ScanForStale())


def _started(actor: pykka.ActorRef | None) -> pykka.ActorRef:
    """An actor of a started pipeline (a request before start is a bug)."""
    if actor is None:
        raise RuntimeError("the pipeline has not been started")
    return actor
