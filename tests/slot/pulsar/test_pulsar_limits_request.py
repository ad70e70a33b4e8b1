"""A manager's config reload reaches the pulsar (issue 27 point 4): the limits frame sets every
limiter as the reloaded file has it, with a real pulsar on a real socket; a pulsar that does
not answer leaves its limits and the manager says how to apply them."""
from __future__ import annotations

from collections.abc import Callable, Mapping

import zmq
from served import Served, free_endpoint, serve  # noqa: F401 (fixture)

from config.models import ClusterConfig, PulsarConfig, QueueConfig, RateLimitConfig
from manager.reloading.pulsar_limits import limits_changed, send_limits
from slot.pulsar.protocol import ErrorReply, LimitsRequest, decode_reply

Serve = Callable[[Mapping[str, RateLimitConfig]], Served]


def cluster(endpoint: str, **limits: RateLimitConfig | None) -> ClusterConfig:
    return ClusterConfig(pulsar=PulsarConfig(listen=endpoint),
                         queues={name: QueueConfig(rate_limit=limit) for name, limit in limits.items()})


def test_a_reload_sets_added_changed_and_removed_limiters(serve: Serve) -> None:
    served = serve({"mail": RateLimitConfig(permits=10), "sms": RateLimitConfig(permits=3)})
    old = cluster(served.endpoint, mail=RateLimitConfig(permits=10), sms=RateLimitConfig(permits=3))
    new = cluster(served.endpoint, mail=RateLimitConfig(permits=20), push=RateLimitConfig(permits=5),
                  plain=None)
    assert limits_changed(old, new) and not limits_changed(old, old)
    sent = send_limits(new)
    assert sent.error is None
    assert sent.changes == ["mail: 10 per 1 s -> 20 per 1 s (margin 0.02)", "push: added, 5 per 1 s",
                            "sms: removed"]
    assert served.service.limits == {"mail": RateLimitConfig(permits=20), "push": RateLimitConfig(permits=5)}
    assert sorted(served.service.limiters) == ["mail", "push"]
    assert send_limits(new).changes == []  # the same limits again: nothing changes


def test_a_pulsar_that_does_not_answer_keeps_its_limits_and_the_manager_says_how() -> None:
    sent = send_limits(cluster(free_endpoint(), mail=RateLimitConfig(permits=20)))
    assert sent.changes == [] and sent.error is not None
    assert "no reply from the pulsar" in sent.error and "kill -HUP" in sent.error


def test_a_limits_frame_with_a_bad_limiter_name_changes_nothing(serve: Serve) -> None:
    served = serve({"mail": RateLimitConfig(permits=10)})
    frame = LimitsRequest(id=1, limits={"mail": RateLimitConfig(permits=1)}).encode()
    bad = frame.replace(b'"mail"', b'"mail box"')
    context = zmq.Context.instance()
    with context.socket(zmq.DEALER) as dealer:
        dealer.connect(served.endpoint)
        dealer.send(bad)
        assert dealer.poll(10_000), "no answer from the pulsar"
        reply = decode_reply(dealer.recv())
    assert isinstance(reply, ErrorReply) and "bad pulsar request frame" in reply.message
    assert served.service.limits == {"mail": RateLimitConfig(permits=10)}
