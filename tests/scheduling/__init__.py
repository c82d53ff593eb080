"""django-q2 glue (scheduling/): wakes, watchdog and one-off schedules, the
wake loop, dispatchers, maintenance."""
