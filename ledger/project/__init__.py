"""The Django project: settings, URLs, WSGI and gunicorn, and what a deployment configures
(environment readers, var/, log redaction, the site's base URL, the dispatchers)."""
