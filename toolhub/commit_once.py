"""One after-commit action per key and transaction, however many changes of that transaction ask for it.

An operator's bulk action (resolving by hand every compensation of a rollback: each reopens it and finishes it again)
asks for the same follow-up once per row; sent once per row, it is one broker message (or, eager, one run of the work
in the request) for each, where one does it all.
"""

from collections.abc import Callable, Hashable

from django.db import transaction

__all__ = ["on_commit_once"]


class _Keyed:
    """An after-commit action that says which follow-up it is, so a second request for it finds it pending."""

    def __init__(self, key: Hashable, action: Callable[[], object]) -> None:
        self.key = key
        self.action = action
        self.__qualname__ = f"on_commit_once({key!r})"  # how Django's log names a failed robust action

    def __call__(self) -> None:
        self.action()


def on_commit_once(key: Hashable, action: Callable[[], object]) -> None:
    """Run ``action`` once the current transaction commits (robust: its failure is logged), unless ``key``'s is due.

    Due means pending in this transaction: registered earlier and not dropped by a savepoint's rollback. A pending one
    is dropped later only by rolling back a savepoint that is active now, which drops one registered now as well (the
    active savepoints are a stack, this one on top), so it runs exactly when this one would. Outside a transaction
    ``action`` runs at once, as ``transaction.on_commit`` does.
    """
    connection = transaction.get_connection()
    if connection.in_atomic_block and any(
        isinstance(pending, _Keyed) and pending.key == key for _, pending, _ in connection.run_on_commit
    ):
        return
    transaction.on_commit(_Keyed(key, action), robust=True)
