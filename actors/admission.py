"""Admission: a bounded, idempotent, non-blocking queue in front of the pipeline.

The database is the queue of record: a document is always a Pending row
before it is admitted, so a Busy answer or a crash loses nothing. The queue
holds at most ``capacity`` documents and at most ``max_in_flight`` are inside
the stages at once; a slot frees when a terminal status or a release event
arrives, and a drain sweep then admits Pending rows (including rows another
process wrote) while there is room.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from pykka import ActorRef

from actors.events import (
    Accepted,
    AdmissionChanged,
    Admit,
    AdmitResult,
    AlreadyQueued,
    Busy,
    DocumentReleased,
    DocumentStatusChanged,
    ExtractDocument,
    GetAdmissionState,
    NotAdmitting,
    StopAdmitting,
    SweepPending,
)
from actors.listener import EventListener, publish
from kbtui.ports import Catalog, Coordination
from store.errors import StoreError, is_database_error
from store.records import Status

log = logging.getLogger(__name__)

RETRY_AFTER_S = 5.0
_TERMINAL = {Status.INDEXED.value, Status.FAILED.value}


@dataclass(frozen=True)
class AdmissionState:
    queue_depth: int
    queue_capacity: int
    in_flight: int
    accepted: int
    rejected: int
    admitting: bool
    paused_for_s: float


class Admission(EventListener):
    def __init__(self, catalog: Catalog, extractors: Sequence[ActorRef], *, capacity: int, max_in_flight: int) -> None:
        super().__init__()
        self.catalog = catalog
        self.extractors = itertools.cycle(extractors)
        self.capacity = capacity
        self.max_in_flight = max_in_flight
        self.queue: deque[str] = deque()
        self.queued: set[str] = set()
        self.in_flight: set[str] = set()
        self.accepted = 0
        self.rejected = 0
        self.admitting = True
        self.paused_until = 0.0
        # Documents whose stage could not record its outcome (the store was
        # unusable): back to Pending at the next sweep that can write.
        self.stranded: set[str] = set()
        self.store_failing = False
        self.store_retry_at = 0.0

    # ------------------------------------------------------------ commands

    def on_command(self, message: object) -> object:
        if isinstance(message, Admit):
            result = self._admit(message.document_id)
            self._dispatch()
            self._announce()
            return result
        if isinstance(message, SweepPending):
            self._sweep()
            return None
        if isinstance(message, GetAdmissionState):
            return self._state()
        if isinstance(message, StopAdmitting):
            self.admitting = False
            return self._state()
        return super().on_command(message)

    def _admit(self, document_id: str) -> AdmitResult:
        if not self.admitting:
            return NotAdmitting(document_id)
        if document_id in self.queued or document_id in self.in_flight:
            return AlreadyQueued(document_id)
        if len(self.queue) >= self.capacity:
            self.rejected += 1
            return Busy(document_id, RETRY_AFTER_S)
        self.queue.append(document_id)
        self.queued.add(document_id)
        self.accepted += 1
        return Accepted(document_id)

    def _dispatch(self) -> None:
        if not self.admitting or time.monotonic() < self.paused_until:
            return
        while self.queue and len(self.in_flight) < self.max_in_flight:
            document_id = self.queue.popleft()
            self.queued.discard(document_id)
            self.in_flight.add(document_id)
            next(self.extractors).tell(ExtractDocument(document_id))

    def _sweep(self) -> None:
        """Admit Pending rows while the queue has room (the drain sweep)."""
        if self.admitting and time.monotonic() >= self.store_retry_at:
            try:
                self._admit_pending()
            except Exception as exc:  # noqa: BLE001 - _store_failed re-raises all but store conditions
                self._store_failed(exc)
            else:
                if self.store_failing:
                    log.info("the drain sweep reads the store again")
                self.store_failing = False
        self._dispatch()
        self._announce()

    def _store_failed(self, exc: Exception) -> None:
        if not (isinstance(exc, StoreError) or is_database_error(exc)):
            raise exc
        if not self.store_failing:
            log.warning("the drain sweep cannot read the store (%s); retrying", type(exc).__name__)
        self.store_failing = True
        # Not at every tick: a server that is down takes seconds to refuse each time.
        self.store_retry_at = time.monotonic() + RETRY_AFTER_S

    def _admit_pending(self) -> None:
        if self.stranded:
            self.catalog.mark_pending(sorted(self.stranded))
            self.stranded.clear()
        room = self.capacity - len(self.queue)
        if room > 0:
            known = len(self.queue) + len(self.in_flight)
            for document_id in self.catalog.pending_document_ids(limit=room + known):
                if document_id in self.queued or document_id in self.in_flight:
                    continue
                if isinstance(self._admit(document_id), Busy):
                    break

    # ------------------------------------------------------------ events

    def on_document_status_changed(self, event: DocumentStatusChanged) -> None:
        if event.status in _TERMINAL and event.document_id in self.in_flight:
            self.in_flight.discard(event.document_id)
            self._sweep()

    def on_document_released(self, event: DocumentReleased) -> None:
        if event.reason == "storage_error":
            self.stranded.add(event.document_id)
        if event.retry_after_s:
            self.paused_until = max(self.paused_until, time.monotonic() + event.retry_after_s)
        if event.document_id in self.in_flight:
            self.in_flight.discard(event.document_id)
            self._sweep()

    # ------------------------------------------------------------ reporting

    def _state(self) -> AdmissionState:
        return AdmissionState(
            queue_depth=len(self.queue),
            queue_capacity=self.capacity,
            in_flight=len(self.in_flight),
            accepted=self.accepted,
            rejected=self.rejected,
            admitting=self.admitting,
            paused_for_s=max(0.0, self.paused_until - time.monotonic()),
        )

    def _announce(self) -> None:
        state = self._state()
        publish(
            AdmissionChanged(
                queue_depth=state.queue_depth,
                queue_capacity=state.queue_capacity,
                in_flight=state.in_flight,
                accepted=state.accepted,
                rejected=state.rejected,
                paused_for_s=state.paused_for_s,
            )
        )


class SharedAdmission(Admission):
    """Admission on a store many nodes share (:class:`kbtui.ports.Coordination`).

    The queue is the knowledge base's: its Pending rows, whichever node added
    them. Its bound (``capacity``) holds for the whole base: an add is Busy
    while more than ``capacity`` documents wait unclaimed, on every node
    alike. This node claims only what its stages can start now (up to
    ``max_in_flight``), so idle nodes find work and none hoards it, and it
    renews the leases of what it holds every third of the lease.
    """

    def __init__(
        self, catalog: Catalog, coordination: Coordination, extractors: Sequence[ActorRef], *, capacity: int,
        max_in_flight: int,
    ) -> None:
        super().__init__(catalog, extractors, capacity=capacity, max_in_flight=max_in_flight)
        self.coordination = coordination
        self.waiting = 0  # unclaimed Pending documents of the whole base, at the last count
        self.next_heartbeat = 0.0

    def _admit(self, document_id: str) -> AdmitResult:
        if not self.admitting:
            return NotAdmitting(document_id)
        if document_id in self.in_flight:
            return AlreadyQueued(document_id)
        try:
            self.waiting = self.coordination.waiting(self.capacity + 1)
        except Exception as exc:  # noqa: BLE001 - as in _sweep; the row stays Pending for a later claim
            self._store_failed(exc)
            return Accepted(document_id)
        if self.waiting > self.capacity:
            self.rejected += 1
            return Busy(document_id, RETRY_AFTER_S)
        return Accepted(document_id)  # counted when claimed: an add and a sweep may race for it

    def _dispatch(self) -> None:
        now = time.monotonic()
        if not self.admitting or now < self.paused_until or now < self.store_retry_at:
            return
        free = self.max_in_flight - len(self.in_flight)
        if free <= 0:
            return
        try:
            claimed = self.coordination.claim(free)
        except Exception as exc:  # noqa: BLE001 - as in _sweep
            self._store_failed(exc)
            return
        self.accepted += len(claimed)  # this node's intake: what it took from the base's queue
        for document_id in claimed:
            self.in_flight.add(document_id)
            next(self.extractors).tell(ExtractDocument(document_id))

    def _admit_pending(self) -> None:
        if self.stranded:
            # Their outcome could not be written: give the leases back, if still ours.
            self.coordination.release(sorted(self.stranded))
            self.stranded.clear()
        if time.monotonic() >= self.next_heartbeat:
            self.coordination.heartbeat(sorted(self.in_flight), in_flight=len(self.in_flight))
            self.next_heartbeat = time.monotonic() + self.coordination.lease_s / 3
        self.waiting = self.coordination.waiting(self.capacity + 1)

    def _state(self) -> AdmissionState:
        state = super()._state()
        return AdmissionState(
            queue_depth=min(self.waiting, self.capacity),
            queue_capacity=state.queue_capacity,
            in_flight=state.in_flight,
            accepted=state.accepted,
            rejected=state.rejected,
            admitting=state.admitting,
            paused_for_s=state.paused_for_s,
        )
