"""Date formats of the console (``FORMAT_MODULE_PATH``): a moment reads to the second, with its time zone.

Audit events, calls and decisions often fall within one minute, and their readers are not all in the
server's zone; Django's English default ("Dec. 5, 2026, 5:34 a.m.") says neither.
"""
