import os
import sys

from django.core.exceptions import ImproperlyConfigured
from django.core.wsgi import get_wsgi_application

from ledger.project import refusal

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ledger.project.settings")

try:
    application = get_wsgi_application()
except ImproperlyConfigured as error:
    if refusal.wanted():
        raise
    refusal.tell(error, "gunicorn")
    # Gunicorn's "the application failed to load": it stops instead of booting
    # a new worker that would refuse the same setting again, for ever.
    sys.exit(4)
