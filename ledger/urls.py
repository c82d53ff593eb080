from django.contrib import admin
from django.urls import include, path

from ledger.views import home

urlpatterns = [
    path("", home, name="home"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("api.urls")),
]

handler404 = "api.errors.not_found_view"
handler500 = "api.errors.server_error_view"
