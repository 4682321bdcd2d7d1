"""`python -m bench`: the performance harness.

Starts the real `rl-bot serve` process against the local Slack- and
Together-shaped servers of `bot.simulated` and measures what users feel (ack
latency, time to be told of a change) and what operators pay (Together
requests, database statements, memory, CPU), each as a ratio to its target.
See bench/README.md.
"""
