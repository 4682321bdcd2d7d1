"""Subscriptions: a channel following a session in the thread of its root card.

`options` holds what a thread was asked to do (`ThreadOptions`), `service`
subscribes, unsubscribes and ends, `listing` says what a channel follows, and
`thread` leaves side messages in a thread. The SQL is in `bot.store.queries`;
what a subscription still owes Slack is the outbox's (`bot.outbox.queue`).
"""
