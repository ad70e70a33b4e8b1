"""The active manager as the queue servers' sentinel (`managed_failover = true`; docs/
DESIGN.md "Failover that loses nothing"). One thread of the active manager, every
LEASE_RENEW_S:

    look at every server (ROLE)
    read the authority record (manager/failover/authority.py): the primary and the epoch
    renew the primary's lease (LEASE <epoch> <ms> <echo>), note which replicas are in sync
        and how many confirmations the primary waits for (its own min_sync_replicas,
        from ROLE: the manager's config only says what is expected, settings_check.py)
    tell every other server to FOLLOW the primary in this epoch (a deposed primary too:
        it rewinds to the new primary's history)
    primary silent for promote_after_s, and its last lease surely over: promote the
        replica that was in sync (epoch + 1 in the database first, then PROMOTE); the
        thread wakes at that moment rather than at its next turn

The lease a grant gives runs from the primary's clock echoed in it, that is from a moment
before the reply that carried that echo reached us: the last such reply's arrival plus
lease_s bounds every lease we granted, with no clock offset to cover (DESIGN.md).

A primary asking to go on alone (sync_fallback "async", ROLE says `asking`) gets
`in_sync = false` written first and then `LEASE ... ALONE`, the consent: nothing is
acknowledged alone before the record says so, and no replica is promoted after. A
database without a record, or with one below the servers' epochs (new or restored), gets
one above every epoch they report (manager/failover/takeover.py).

The database decides; the queue servers never vote. A manager that takes over waits a
whole lease from its start before promoting anyone: it cannot know the last grant.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from config.periodic import TurnBoundary
from manager.failover import authority, settings_check, takeover
from manager.failover.authority import Record
from manager.failover.role_view import View, same_server
from manager.failover.server_link import ServerLink
from manager.storage.store import EventKind, NewEvent

log = logging.getLogger(__name__)

# A turn every 0.25 s: a grant's lease runs from the previous turn's echo, so a primary
# holds lease_s - 0.25 s ahead of each renewal (1.0 s with the default 1.25 s lease), and
# the promotion waits only lease_s + margin from the echo (measured, bench/RESULTS.md:
# with 0.5 s turns and the old 1.5 s lease, failover p50 2.63 s and max 3.33 s).
LEASE_RENEW_S = 0.25
# A replica is promoted only once the old primary's lease is over by this much: the lease
# runs from the primary's own clock reading echoed by the manager (no clock offset to
# cover), so the margin covers what remains: clock rate differences (< 0.1 % of 1.25 s),
# a previous manager that lost its lock and has not noticed yet (it checks every
# LOCK_CHECK_S and stops granting at once), and this turn's own lateness.
LEASE_MARGIN_S = 0.5
LOCK_CHECK_S = 0.25  # the active manager's lock is checked this often while it is sentinel
assert LEASE_MARGIN_S >= 2 * LOCK_CHECK_S


class Sentinel:
    def __init__(self, engine: Engine, servers: list[str], *, token: str | None, lease_s: float,
                 promote_after_s: float, sync_mode: bool, note: Callable[[NewEvent], object],
                 stopping: Callable[[], bool], min_sync_replicas: int = 1) -> None:
        self.engine = engine
        self.servers = servers
        self.links = {address: ServerLink(address, token) for address in servers}
        self.lease_ms = int(lease_s * 1000)
        self.lease_s = lease_s
        self.promote_after_s = promote_after_s
        # The confirmations a primary waits for before it acknowledges, as this manager's
        # config says (0: async). Only compared with what the servers report in ROLE and
        # recorded (settings_check.py), and used for a server that reports nothing (an
        # older release): a promotion is judged by the primary's own value (_enforced).
        self.configured_min_sync = min_sync_replicas if sync_mode else 0
        self.reported: dict[str, int | None] = {}  # each server's last <min-sync>
        self.unmanaged: set[str] = set()  # servers whose ROLE said lease `unmanaged`
        self.mismatch_said = ""
        self.note = note
        self.stopping = stopping
        start = time.monotonic()
        # Until then some primary may acknowledge on a grant of ours (our clock). Grants
        # before our start are unknown: count a whole lease from it.
        self.granted_until = start + lease_s
        self.primary_heard = start
        # server -> (its clock in ms from its last LEASE reply, our clock when that came,
        # the epoch it was in then)
        self.echo: dict[str, tuple[int, float, int]] = {}
        # Why promotions were refused since the last one: each reason is said once (no
        # replica answering, then an in-sync one still silent), never once per turn.
        self.refusals_said: set[str] = set()
        self.restart_noted = False
        self.takeover_waiting = ""  # the last "not taking over yet" said (said once)
        # A turn every 0.25 s: an outage is said once, then once a minute, then its end.
        self.database = TurnBoundary("sentinel: reaching the database", log=log, traceback=False,
                                     next_turn=f"no lease renewed; tried again every {LEASE_RENEW_S:g} s")
        self.turns = TurnBoundary("the sentinel's turn", log=log, next_turn=f"the next in {LEASE_RENEW_S:g} s")

    def run(self) -> None:
        log.info("sentinel of the queue servers %s (lease %.2f s, promotion after %.2f s)",
                 ", ".join(self.servers), self.lease_s, self.promote_after_s)
        while not self.stopping():
            started = time.monotonic()
            try:
                self.turn(started)
            except SQLAlchemyError:
                self.database.failed()
            except Exception:  # the thread must go on: the next turn may succeed
                self.turns.failed()
            else:
                self.database.succeeded()
                self.turns.succeeded()
            time.sleep(max(0.0, self.next_turn_at(started) - time.monotonic()))
        for link in self.links.values():
            link.close()

    def turn(self, now: float) -> None:
        views = {address: View.parse(self.links[address].ask(b"ROLE")) for address in self.servers}
        self._check_settings(views)
        record = self._take_over(authority.read(self.engine), views)
        if record is None:
            return
        primary = views.get(record.primary)
        if primary is not None and primary.role == "primary" and primary.epoch <= record.epoch:
            self._forget_clock_of_a_restart(record.primary, primary.epoch)
            if self._restarted(record, primary, views):
                pass  # silent as far as the promotion goes: a replica in sync takes over
            else:
                # Recorded before the grant: the consent to go alone it may carry rests on it.
                record = self._note_sync(record, primary)
                if self._grant(record, alone=primary.sync == "asking" and not record.in_sync):
                    self.primary_heard = time.monotonic()
        self._align(record, views)
        if time.monotonic() >= self.promotion_due():
            self._fail_over(record, views)

    def promotion_due(self) -> float:
        """When the primary will have been silent for promote_after_s and every lease we
        granted will be over by LEASE_MARGIN_S, if it is not heard from meanwhile."""
        return max(self.primary_heard + self.promote_after_s, self.granted_until + LEASE_MARGIN_S)

    def next_turn_at(self, started: float) -> float:
        """The next turn LEASE_RENEW_S after this one began, or at the promotion's moment if
        that comes first (a failover waits for no turn's granularity)."""
        return min(started + LEASE_RENEW_S, max(started, self.promotion_due()))

    def _forget_clock_of_a_restart(self, address: str, epoch: int) -> None:
        """A server goes back to an older epoch only by restarting (its term is not
        persisted), maybe on a rebooted machine whose monotonic clock began again: the clock
        we hold from before may be ahead of its clock now (every grant refused as not a time
        of it until its new uptime passed the old one) or just behind (a lease running past
        what promotion_due counts). Forgotten: the next grant asks for its clock first."""
        echo = self.echo.get(address)
        if echo is not None and epoch < echo[2]:
            del self.echo[address]

    def _restarted(self, record: Record, primary: View, views: dict[str, View | None]) -> bool:
        """The primary lost its epoch (its term is not persisted: it restarted) while a
        replica that may take over follows this epoch: not leased again, since with fsync
        "never" (or a lost disk) it may miss what it acknowledged and the replica holds."""
        if primary.epoch >= record.epoch or not self._candidates(record, views):
            return False
        if not self.restart_noted:
            self.restart_noted = True
            log.warning("queue servers: primary %s restarted (epoch %d, the record's %d): not "
                        "leased again; a replica in sync takes over", record.primary,
                        primary.epoch, record.epoch)
        return True

    def _take_over(self, record: Record | None, views: dict[str, View | None]) -> Record | None:
        """The record to work with: as read, or, when there is none or the servers report a
        later epoch (a new or restored database), one above every epoch they report
        (manager/failover/takeover.py), said in the log with what was found."""
        plan = takeover.plan(record, views)
        if plan is None:
            self.takeover_waiting = ""
            return record
        if plan.record is None:
            if plan.why != self.takeover_waiting:
                self.takeover_waiting = plan.why
                log.warning("queue servers: no primary named in the record yet (%s); found: %s",
                            plan.why, takeover.found(views))
            return None  # a record below the servers' epochs must not lease nor promote
        new = authority.take_over(self.engine, record, plan.record)
        if new is None:
            return authority.read(self.engine)  # another manager wrote first: its record
        log.warning("queue servers: %s is the primary in epoch %d (%s; in sync: %s); found: %s",
                    new.primary, new.epoch, plan.why, "yes" if new.in_sync else "no",
                    takeover.found(views))
        return new

    def _grant(self, record: Record, *, alone: bool = False) -> bool:
        """LEASE to the primary (twice the first time: its clock is not known yet). With
        `alone` (the record says no replica is in sync and the primary asks to go on alone)
        it carries the consent: `LEASE ... ALONE`, valid at the primary for a request made
        before the echo's time (sync_commit.py). The echo of the previous turn may be
        older than the request, so a consent goes twice: the second carries the echo of
        the first's reply, read after this turn's ROLE showed the request. Measured with
        both replicas frozen (test_managed_takeover.py, load 11): asking -> alone 0.78-1.19
        s, most of it the two silent replicas' ROLE timeouts (0.3 s each) in every turn;
        the reply alone 2.0-2.6 s after its PUT with sync_timeout_s 1 s (the timeout is
        checked every 0.5 s)."""
        link = self.links[record.primary]
        consent = b" ALONE" if alone else b""
        for _ in range(2):
            if self.stopping():
                return False
            echo, echo_heard, _ = self.echo.get(record.primary, (0, 0.0, 0))
            # Received or not, it may count, from the echo's arrival (before which the
            # primary read its clock). With no echo yet it grants nothing (authority.py).
            if echo:
                self.granted_until = max(self.granted_until, echo_heard + self.lease_s)
            reply = link.ask(b"LEASE %d %d %d%s" % (record.epoch, self.lease_ms, echo, consent))
            words = (reply or b"").split()
            if len(words) != 3 or words[:2] != [b"200", b"OK"] or not words[2].isdigit():
                if reply is not None:
                    log.warning("queue server %s refused the lease: %r", record.primary, reply[:100])
                return False
            self.echo[record.primary] = (int(words[2]), time.monotonic(), record.epoch)
            if echo and not alone:
                return True
        return True

    def _note_sync(self, record: Record, primary: View) -> Record:
        """The primary's sync state, in-sync replicas and own min_sync_replicas into the
        record, before the grant: what it acknowledges under this lease is judged by them."""
        enforced = self.configured_min_sync if primary.min_sync is None else primary.min_sync
        said = record.min_sync_replicas if primary.min_sync is None else primary.min_sync
        if not enforced:
            if said == record.min_sync_replicas:
                return record
            return authority.note_sync(self.engine, record, record.in_sync, record.sync_replicas,
                                       said) or record
        in_sync = primary.sync not in takeover.ALONE_WORDS
        replicas = tuple(sorted(primary.in_sync))
        if (in_sync == record.in_sync and (replicas == record.sync_replicas or not replicas)
                and said == record.min_sync_replicas):
            return record
        if in_sync != record.in_sync:
            kind = EventKind.QUEUE_SYNC_REGAINED if in_sync else EventKind.QUEUE_SYNC_LOST
            self.note(NewEvent(kind=kind, host=record.primary, message=(
                f"queue server {record.primary}: synchronous replication "
                + ("regained" if in_sync else "lost: recorded before it goes on alone; no replica "
                   "may be promoted while it is alone (one that lacks what it acknowledged)"))))
        return authority.note_sync(self.engine, record, in_sync, replicas or record.sync_replicas,
                                   said) or record

    def _align(self, record: Record, views: dict[str, View | None]) -> None:
        """Every other answering server follows the primary in the record's epoch."""
        for address, view in views.items():
            if address == record.primary or view is None:
                continue
            if view.role == "replica" and view.epoch == record.epoch:
                continue
            reply = self.links[address].ask(b"FOLLOW %s %d" % (record.primary.encode(), record.epoch))
            if reply == b"200 OK" and view.role == "primary":
                self.note(NewEvent(kind=EventKind.QUEUE_SERVER_DEMOTED, host=address, message=(
                    f"queue server {address} (epoch {view.epoch}) follows {record.primary} "
                    f"(epoch {record.epoch}): what it never had confirmed is dropped")))

    def _candidates(self, record: Record, views: dict[str, View | None]) -> list[str]:
        """The replicas that may be promoted: of this epoch, and in sync mode in sync."""
        candidates = [address for address, view in views.items()
                      if address != record.primary and view is not None
                      and view.role == "replica" and view.epoch == record.epoch]
        if not self._enforced(record):
            return candidates
        if not record.in_sync:
            return []
        return [c for c in candidates
                if not record.sync_replicas or any(same_server(c, r) for r in record.sync_replicas)]

    def _fail_over(self, record: Record, views: dict[str, View | None]) -> None:
        if self._enforced(record) and not record.in_sync:
            return self._refuse(record, "the primary had gone on alone (recorded before it "
                                "acknowledged anything alone): a replica may lack what it "
                                "acknowledged; an operator decides")
        candidates = self._candidates(record, views)
        if not candidates:
            return self._refuse(record, "no replica in sync answers")
        silent = self._silent_in_sync(record, candidates)
        if silent:
            return self._refuse(record, (
                f"in-sync replica(s) {', '.join(silent)} silent: a change the primary acknowledged "
                f"once {self._enforced(record)} replica(s) confirmed it may be on them alone; "
                "waiting for them"))
        # The furthest along the dead primary's history: every replica got the same stream
        # in order, and each acknowledged change was confirmed by min_sync_replicas of the
        # in-sync ones, so by one of those answering (_silent_in_sync).
        chosen = max(candidates, key=lambda c: views[c].position)  # type: ignore[union-attr]
        new = authority.promote(self.engine, record, chosen, views[chosen].min_sync)  # type: ignore[union-attr]
        if new is None:
            return None  # the record changed meanwhile: next turn reads it again
        reply = self.links[chosen].ask(b"PROMOTE %d" % new.epoch)
        self.echo.pop(chosen, None)
        self.primary_heard = time.monotonic()
        self._grant(new)
        # The other replicas follow it now, not at the next turn: in sync mode its first
        # acknowledgement waits for one of them to link and confirm.
        self._align(new, views)
        self.refusals_said.clear()
        self.restart_noted = False
        log.warning("queue servers: %s promoted in epoch %d (%s silent for %.1f s): %r",
                    chosen, new.epoch, record.primary, self.promote_after_s, reply)
        self.note(NewEvent(kind=EventKind.QUEUE_SERVER_PROMOTED, host=chosen, message=(
            f"queue server {chosen} is the primary in epoch {new.epoch}; {record.primary} "
            f"was silent for {self.promote_after_s:.1f} s")))
        return None

    def _silent_in_sync(self, record: Record, candidates: list[str]) -> list[str]:
        """The in-sync replicas not answering now, when at least min_sync_replicas of them
        are: then a change the primary acknowledged may have been confirmed by those alone,
        and the furthest answering replica may lack it (seen: a replica frozen for 1 s was
        still listed in sync, the primary acknowledged 207 jobs confirmed by the other one,
        was killed while that one was frozen too, and the lagging one was promoted without
        any of them; the other followed it and dropped them). Unknown (no list recorded yet
        in this epoch): every other configured server counts as in sync."""
        enforced = self._enforced(record)
        if not enforced:
            return []
        in_sync = record.sync_replicas or tuple(a for a in self.servers if a != record.primary)
        silent = [r for r in in_sync if not any(same_server(c, r) for c in candidates)]
        return silent if len(silent) >= enforced else []

    def _enforced(self, record: Record) -> int:
        """The confirmations the primary of `record` waited for before acknowledging (0:
        async), as it reported them; this manager's config only when it never did."""
        return self.configured_min_sync if record.min_sync_replicas is None else record.min_sync_replicas

    def _check_settings(self, views: dict[str, View | None]) -> None:
        """Each server's <min-sync> against the others' and this manager's config, and
        servers not started for managed failover: a change in what disagrees is logged and
        made an event (settings_check.py), once."""
        for address, view in views.items():
            if view is not None:
                self.reported[address] = view.min_sync
                if view.lease == "unmanaged":
                    self.unmanaged.add(address)
                else:
                    self.unmanaged.discard(address)
        found = settings_check.mismatch(self.reported, configured=self.configured_min_sync,
                                        unmanaged=self.unmanaged)
        if found == self.mismatch_said:
            return
        self.mismatch_said = found
        if not found:
            log.warning("queue servers: their settings agree again (min_sync_replicas: %s)", ", ".join(
                f"{a} {settings_check.describe(v or 0)}" for a, v in sorted(self.reported.items())))
            return
        log.error("queue servers: %s", found)
        self.note(NewEvent(kind=EventKind.QUEUE_SETTINGS_MISMATCH, message=found))

    def _refuse(self, record: Record, why: str) -> None:
        if why not in self.refusals_said:
            self.refusals_said.add(why)
            log.error("queue servers: primary %s is silent, not promoting: %s", record.primary, why)
            self.note(NewEvent(kind=EventKind.QUEUE_PROMOTION_REFUSED, host=record.primary,
                               message=f"primary {record.primary} is silent; not promoting: {why}"))


def start(sentinel: Sentinel) -> threading.Thread:
    thread = threading.Thread(target=sentinel.run, name="sentinel", daemon=True)
    thread.start()
    return thread
