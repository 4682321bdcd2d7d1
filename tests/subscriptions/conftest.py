"""The store tests' session maker (a fresh, migrated database of each backend)."""

from tests.store.conftest import maker

__all__ = ["maker"]
