"""What the master sends for the batch of a slot that died holding it (pure).

The rules (docs/DESIGN.md, "A crash costs only its job"):
- outcomes the handler decided before the death (the slot's outcome notes,
  slot/outcome_notes.py, and its batch page, slot/done_map.py) are honoured: replies put
  (under the key the slot's own PUT named, slot/reply_key.py), DONE, LATER, job.fail() as failed, the jobs a retarget gave back with `LATER ... FRONT`
  (as the slot would have); jobs whose handle_job() returned, or all of them once handle()
  returned, are DONE;
- the jobs left unresolved, when the death may be a job's doing (a crash, a signal, killed
  hung or over memory):
  - the death names its job when the batch ran in order (the default handle(): handle_job
    per job) and the slot crashed or hung: the job the page says was running. Or when
    exactly one job was left without an outcome.
    That job is charged: FAIL ... SOLO (its attempt counts; it runs alone from then on).
    The jobs after it never started: they go back with `LATER ... FRONT` (no attempt
    charged, at the head of their queue in their order: they keep their place in line, and
    the charged job's retry comes after the jobs that were waiting);
  - otherwise the death cannot name its job: they all go back with `LATER ... SOLO` (their
    hand-out taken back, no attempt charged) and each runs alone, so the next death names
    its job;
- a slot killed only because it missed its stop deadline blames nobody: its unresolved jobs
  go back with a plain LATER;
- a slot killed because a job of its batch was cancelled blames nobody either: the
  cancelled job is dead on the queue server already (no request for it), its other
  unresolved jobs go back with a plain LATER, except, when the batch ran in order, those
  after the running job, which never started: `LATER ... FRONT`, keeping their place.
"""
from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from master.lifecycle import Lease
from queue_server.protocol.retry import RetryPolicy
from slot.done_map import HANDLED
from slot.outcome_notes import NotedOutcome, NoteError, NoteKind, parse
from slot.outcomes import Failure, failure
from slot.reply_key import Reply


@dataclass(frozen=True, slots=True)
class Replies:
    """Answers to synchronous calls, put in the handler's output queue under each caller's item,
    each under the key the slot's own PUT named (slot/reply_key.py) when `keyed`."""

    queue: str
    ttl_s: float | None
    # Out of the repr: a refused PUT logs the request, and job data stays out of the logs.
    replies: tuple[Reply, ...] = field(repr=False)
    # The slot fetched with KEYS (its jobs have attempts): it keyed its PUTs, and the queue
    # server takes PUT ... KEY. False: a server older than keys, sent as before.
    keyed: bool = True


@dataclass(frozen=True, slots=True)
class Done:
    ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Later:
    ids: tuple[int, ...]
    delay_s: float | None = None
    # Given back by the master: handed out alone next time (LATER ... SOLO).
    solo: bool = False
    # Given back at the head of the queue, in this order (LATER ... FRONT): never started.
    front: bool = False


@dataclass(frozen=True, slots=True)
class Fail:
    failures: tuple[Failure, ...]


Request = Replies | Done | Later | Fail


@dataclass(frozen=True, slots=True)
class Settlement:
    requests: tuple[Request, ...]
    # The key of the job charged with the death, if one was.
    blamed_key: str | None
    honoured: int
    given_back: int
    charged: int
    # Outcome lines that did not parse (logged by the caller).
    bad_notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ReplyTo:
    queue: str
    ttl_s: float | None


def settle(
    lease: Lease,
    notes: Iterable[bytes],
    *,
    reason: str,
    blame: bool,
    ordered: bool = False,
    running: int | None = None,
    done_positions: Iterable[int] = (),
    gone: frozenset[int] = frozenset(),
    policy: RetryPolicy | None,
    reply_to: ReplyTo | None,
    rng: random.Random,
) -> Settlement:
    """The requests that settle `lease` after its slot died. `blame`: the death may be a job's
    doing (not a kill for a missed stop deadline); `ordered`: it names the first job left
    undecided; from the slot's shared page (slot/done_map.py): `running`, the id of the job
    its handle_job loop ran (or HANDLED: handle() had returned), and `done_positions`, the
    jobs (by position in the lease) marked DONE. `gone`: lease ids cancelled on the queue
    server (dead there already): no request is sent for them."""
    attempts = dict(lease.jobs)
    decided, bad = _decided(notes, attempts)
    for position in done_positions:  # the DONE bits (slot/done_map.py)
        if 0 <= position < len(lease.jobs):
            job_id = lease.jobs[position][0]
            decided.setdefault(job_id, NotedOutcome(NoteKind.DONE, job_id))
    ids = [job_id for job_id, _ in lease.jobs]
    # handle() returned (the death came during the acknowledgement), or handle_job returned
    # for the jobs before the one running: DONE, their outcome when nothing else was decided.
    finished = ids if running == HANDLED else ids[: ids.index(running)] if ordered and running in attempts else []
    for job_id in finished:
        decided.setdefault(job_id, NotedOutcome(NoteKind.DONE, job_id))
    if ordered and running not in attempts:
        ordered = False  # it died before its handler ran: no job is named by the order
    for job_id in gone:
        decided.pop(job_id, None)
    replies: list[Reply] = []
    done: list[int] = []
    later: dict[float | None, list[int]] = defaultdict(list)
    failures: list[Failure] = []
    front: set[int] = set()  # given back by a retarget, or never started (named below)
    for outcome in decided.values():
        match outcome.kind:
            case NoteKind.REPLY if reply_to is not None and outcome.item is not None:
                replies.append(Reply(outcome.job_id, outcome.item, outcome.reply or b""))
                done.append(outcome.job_id)
            case NoteKind.DONE | NoteKind.REPLY:
                done.append(outcome.job_id)
            case NoteKind.LATER:
                later[outcome.delay_s].append(outcome.job_id)
            case NoteKind.GIVEN_BACK:
                front.add(outcome.job_id)
            case NoteKind.FAIL:
                failures.append(failure(outcome.job_id, outcome.error or "failed",
                                        attempt=attempts[outcome.job_id], policy=policy, rng=rng,
                                        give_up=outcome.dead))
    unresolved = [job_id for job_id in ids if job_id not in decided and job_id not in gone]
    blamed_key = None
    given_back = unresolved
    named = bool(blame and unresolved and (ordered or len(unresolved) == 1))
    if named:
        job_id, given_back = unresolved[0], unresolved[1:]
        failures.append(failure(job_id, reason, attempt=attempts[job_id], policy=policy, rng=rng,
                                solo=True))
        blamed_key = dict(zip((j for j, _ in lease.jobs), lease.keys, strict=False)).get(job_id)
    requests: list[Request] = []
    if replies and reply_to is not None:
        keyed = all(attempts[reply.job_id] is not None for reply in replies)
        requests.append(Replies(reply_to.queue, reply_to.ttl_s, tuple(replies), keyed))
    if done:
        requests.append(Done(tuple(done)))
    requests += [Later(tuple(postponed), delay_s) for delay_s, postponed in later.items()]
    if named:
        front.update(given_back)
    elif ordered and not blame:  # a cancel: the jobs after the running one never started
        started = ids.index(running)  # type: ignore[arg-type]  # in attempts (checked above)
        front.update(set(ids[started + 1:]).intersection(given_back))
    if front:
        # Never started (given back by a retarget, or after the job named): back as they
        # were, in their place in line, in the lease's order, in one request.
        requests.append(Later(tuple(job_id for job_id in ids if job_id in front), front=True))
    back = [job_id for job_id in given_back if job_id not in front]
    if back and not named:
        # Each alone at the end, to name the next death (blame); plain LATER otherwise.
        requests.append(Later(tuple(back), solo=blame))
    if failures:
        requests.append(Fail(tuple(failures)))
    return Settlement(
        requests=tuple(requests), blamed_key=blamed_key, honoured=len(decided),
        given_back=len(given_back), charged=len(unresolved) - len(given_back), bad_notes=tuple(bad),
    )


def _decided(notes: Iterable[bytes], attempts: dict[int, int | None]) -> tuple[dict[int, NotedOutcome], list[str]]:
    """The first outcome noted per job of the lease (a job resolves once)."""
    decided: dict[int, NotedOutcome] = {}
    bad: list[str] = []
    for line in notes:
        try:
            outcome = parse(line)
        except NoteError as exc:
            bad.append(str(exc))
            continue
        if outcome.job_id in attempts:
            decided.setdefault(outcome.job_id, outcome)
    return decided, bad
