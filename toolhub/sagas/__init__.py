"""Sagas: completed steps of a run (or of an explicit saga id) and their persisted, retried compensations.

A compensable step that succeeds is recorded with a sequence number; a rollback compensates the
recorded steps newest first, one after another, each as its own governed ``ToolCall`` (kind
``compensation``) executed by a worker, retried with backoff at times stored in the database, and
escalated to operators (``needs_attention``) when it cannot be done. Nothing is dropped silently:
every state change is an audit event written in the same transaction.
"""
