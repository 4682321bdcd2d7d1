"""What a database failure means to the code that called the store: the database
went away (retrying row by row would only fail again) or refused what was
written (it would refuse it again), so services classify failures without
knowing SQLAlchemy's exceptions.
"""

from __future__ import annotations

from sqlalchemy.exc import (
    DBAPIError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    SQLAlchemyError,
)

#: any failure of the database layer: what a read that may fail is guarded by
DatabaseError = SQLAlchemyError
#: the database refused a row as a duplicate of one stored (a unique key): what a
#: second replica or a double click writing the same thing meets
Duplicate = IntegrityError


def database_gone(exc: BaseException) -> bool:
    """The database could not be reached or went away (as opposed to refusing what
    was written): retrying the rows one by one would only fail again, one by one."""
    if isinstance(exc, OSError | TimeoutError):
        return True
    return isinstance(exc, DBAPIError) and (
        exc.connection_invalidated or isinstance(exc, OperationalError | InterfaceError)
    )


def from_database(exc: BaseException) -> bool:
    """The database driver raised it (a refusal or a lost connection), as opposed
    to a bug or an unforeseen value in the code around it."""
    return isinstance(exc, DBAPIError)


def database_lost(exc: BaseException) -> bool:
    """The driver raised it and the database is gone: stop, do not retry apart."""
    return isinstance(exc, DBAPIError) and database_gone(exc)


def refused_by_database(exc: BaseException) -> bool:
    """The database refused what was written (a constraint, a value): it would again."""
    return isinstance(exc, DBAPIError) and not database_gone(exc)


def failure_name(exc: BaseException) -> str:
    """The name of what failed: the driver's own exception, when the database raised it."""
    orig = exc.orig if isinstance(exc, DBAPIError) else None
    return type(orig).__name__ if orig is not None else type(exc).__name__
