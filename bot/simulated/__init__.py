"""Local Slack-, Together- and W&B-shaped HTTP services, shared by the tests and `rl-bot demo`."""

from .signing import block_action_body, post_signed, sign, slash_command_body
from .slack import FakeSlack, SlackCall, SlackFault
from .together import (
    FakeTogether,
    TogetherFault,
    TogetherRequest,
    make_model_resource,
    make_old_shape_session,
    make_session,
    refusing_port,
)

__all__ = [
    "FakeSlack",
    "FakeTogether",
    "SlackCall",
    "SlackFault",
    "TogetherFault",
    "TogetherRequest",
    "block_action_body",
    "make_model_resource",
    "make_old_shape_session",
    "make_session",
    "post_signed",
    "refusing_port",
    "sign",
    "slash_command_body",
]
