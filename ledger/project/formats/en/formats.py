"""Dates and times as the admin shows them: UTC to the second, like the
timeline (Django's English default was "Dec. 2, 2026, 12:46 a.m.", a minute's
precision in a 12-hour clock). Found through FORMAT_MODULE_PATH."""

DATETIME_FORMAT = "Y-m-d H:i:s e"
SHORT_DATETIME_FORMAT = "Y-m-d H:i:s e"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"
