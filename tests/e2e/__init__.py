"""End to end with real processes: live servers, qcluster, gunicorn, the CLI
and outside programs, browsers, crashes, the soak."""
