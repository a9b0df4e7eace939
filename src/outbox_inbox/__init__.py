"""The inbox: consumers that apply each outbox event's effect once, in order per aggregate.

Core (boto3 only): `Envelope`/`envelope_of` (every shape consumers receive), `Inbox` (effect + processed
event + last applied seq in one transaction), `InboxConsumer` (one message, one outcome, gaps wait).
Also `outbox_inbox.batch.handle_sqs_batch` (partial batch responses); with Powertools (the functions' layer):
`outbox_inbox.external.IdempotentCall` (effects outside DynamoDB).
"""

from outbox_inbox.consumer import ConsumerSettings, InboxConsumer
from outbox_inbox.envelope import Envelope, envelope_of
from outbox_inbox.errors import GapNotFilledError, InboxError, MalformedEnvelopeError
from outbox_inbox.inbox import Effect, GapTimeout, Inbox, InboxSettings, Ordering, Outcome, Result, no_effect

__all__ = [
    "ConsumerSettings",
    "Effect",
    "Envelope",
    "GapNotFilledError",
    "GapTimeout",
    "Inbox",
    "InboxConsumer",
    "InboxError",
    "InboxSettings",
    "MalformedEnvelopeError",
    "Ordering",
    "Outcome",
    "Result",
    "envelope_of",
    "no_effect",
]
