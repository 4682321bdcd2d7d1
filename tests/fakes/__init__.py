"""The tests of the Slack-, Together- and W&B-shaped services, and the Socket Mode double.

The services themselves live in `bot.simulated`, because `rl-bot demo` runs on them too.
"""
