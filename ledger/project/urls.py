from django.contrib import admin
from django.urls import include, path

from ledger.access.accounts import LockoutAuthenticationForm
from ledger.project.views import favicon, home

# Repeated failed logins lock a username out from one address (ledger/access/accounts.py).
admin.site.login_form = LockoutAuthenticationForm

urlpatterns = [
    # First: nearly every request is an agent's API call, and Django tries the
    # patterns in order (no two of these overlap, so the order means nothing else).
    path("api/v1/", include("api.urls")),
    path("", home, name="home"),
    path("favicon.ico", favicon, name="favicon"),
    path("admin/", admin.site.urls),
    path("", include("api.metrics")),  # /metrics, for Prometheus (docs/metrics.md)
    # /mcp and the OAuth endpoints and metadata hosted connectors discover.
    path("", include("api.mcp.urls")),
]

handler404 = "api.errors.not_found_view"
handler500 = "api.errors.server_error_view"
