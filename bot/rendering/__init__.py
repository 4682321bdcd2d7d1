"""Slack messages for training sessions: pure functions, no I/O.

Every value that came from Together or from a user is made inert (`text`), so
an API field such as `<!channel>` can never ping or forge a link, and every
message stays inside Block Kit's limits whatever the API returns (`blocks`):
text is cut with "…" and long lists end with "and N more". The card is in
`card`, thread and alert messages in `notifications`, answers to people in
`replies`; `terminal` prints a message for `rl-bot show`. This face names what
the rest of the bot sends, as `rendering.<builder>`.
"""

from bot.rendering.blocks import (
    CHART,
    HOME_PERSONAL,
    HOME_UNSUBSCRIBE,
    REFRESH,
    STOP,
    SUBSCRIBE,
    UNSUBSCRIBE,
    WANDB,
    Message,
)
from bot.rendering.card import STOPPABLE, card
from bot.rendering.notifications import (
    SessionLine,
    StatusChange,
    checkpoint_message,
    digest_message,
    oncall_alert,
    operator_alert,
    transition_message,
)
from bot.rendering.replies import (
    HomeSubscription,
    ListedSubscription,
    help_message,
    home_view,
    muted_message,
    notice,
    stop_requested_message,
    subscription_list,
    unmuted_message,
    unsubscribed_message,
)
from bot.rendering.text import code_span, escape, truncate
from bot.rendering.words import (
    error_code_words,
    registration_words,
    session_type_words,
    slack_date,
    status_emoji,
    status_words,
)

__all__ = [
    "CHART",
    "HOME_PERSONAL",
    "HOME_UNSUBSCRIBE",
    "REFRESH",
    "STOP",
    "STOPPABLE",
    "SUBSCRIBE",
    "UNSUBSCRIBE",
    "WANDB",
    "HomeSubscription",
    "ListedSubscription",
    "Message",
    "SessionLine",
    "StatusChange",
    "card",
    "checkpoint_message",
    "code_span",
    "digest_message",
    "error_code_words",
    "escape",
    "help_message",
    "home_view",
    "muted_message",
    "notice",
    "oncall_alert",
    "operator_alert",
    "registration_words",
    "session_type_words",
    "slack_date",
    "status_emoji",
    "status_words",
    "stop_requested_message",
    "subscription_list",
    "transition_message",
    "truncate",
    "unmuted_message",
    "unsubscribed_message",
]
