"""The product's URLs plus the bare baseline view (bench-only, see bench/settings.py)."""

from django.urls import path

from bench.bare import BareInsertView
from ledger.project.urls import handler404, handler500  # noqa: F401
from ledger.project.urls import urlpatterns as product

urlpatterns = [path("bench/bare", BareInsertView.as_view()), *product]
