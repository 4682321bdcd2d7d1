"""Alembic's scripts, installed as `bot.migrations` (pyproject.toml maps this folder
into the package), so a wheel migrates as a checkout does; Alembic loads env.py
and versions/ by path."""
