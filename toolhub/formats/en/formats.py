"""English formats of the console: ISO-like moments to the second, with the time zone's abbreviation."""

#: A moment as every page of the console shows it, e.g. "2026-12-05 05:34:19 UTC".
DATETIME_FORMAT = "Y-m-d H:i:s T"
SHORT_DATETIME_FORMAT = DATETIME_FORMAT
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = DATE_FORMAT
TIME_FORMAT = "H:i:s"
