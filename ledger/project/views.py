"""The site's root: people are sent to the admin, programs get the addresses."""

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.templatetags.static import static
from django.urls import reverse
from django.views.decorators.http import require_safe


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    """`/`: a browser (it asks for text/html) goes to the admin's index, which
    sends a visitor to its login first; anything else (curl, an agent) gets a
    JSON index of where things are, so the bare host is never a dead end."""
    if "text/html" in request.headers.get("Accept", ""):
        return HttpResponseRedirect(reverse("admin:index"))
    where = {name: request.build_absolute_uri(reverse(view)) for name, view in (
        ("admin", "admin:index"), ("api", "api:goals"), ("docs", "api:docs"),
        ("schema", "api:schema"), ("skill", "api:skill"), ("health", "api:health"))}
    where["api"] = where["api"].removesuffix("goals")
    return JsonResponse({"service": "wake-ledger", **where})


@require_safe
def favicon(request: HttpRequest) -> HttpResponse:
    """`/favicon.ico`, which browsers ask for on every page outside the admin
    (the API docs, the JSON index): the admin's own icon, an SVG."""
    return HttpResponseRedirect(static("ledger/favicon.svg"))
