#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ledger.project.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    from ledger.project import refusal

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as error:
        # A refused setting: one paragraph, not a traceback (ledger/project/refusal.py).
        if refusal.wanted(sys.argv):
            raise
        refusal.refuse(error, f"manage.py {sys.argv[1] if len(sys.argv) > 1 else ''}".strip())


if __name__ == "__main__":
    main()
