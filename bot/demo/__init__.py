"""`rl-bot demo`: the real bot against the simulated Slack, Together and W&B, in a browser.

The only part of the package that imports `bot.simulated`; the running bot never does.
"""
