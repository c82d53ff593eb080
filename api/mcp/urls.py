from django.urls import path

from api.mcp.views import mcp_endpoint

urlpatterns = [
    path("mcp", mcp_endpoint, name="mcp"),
]
