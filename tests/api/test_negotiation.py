"""Content negotiation answers the everyday Accept headers up front
(api/negotiation.py) exactly as DRF's own negotiation answers them."""

import itertools

import pytest
from django.http import Http404
from rest_framework import exceptions
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer, StaticHTMLRenderer
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from api.parsing import Negotiation

ACCEPTS = [None, "*/*", "application/json", "application/json; indent=4", "text/html",
           "application/*", "*/*;q=0.5", "", "application/json, text/html", "APPLICATION/JSON",
           "text/plain"]
QUERIES = ["", "format=json", "format=api", "x=1"]
RENDERERS = [(JSONRenderer,), (JSONRenderer, BrowsableAPIRenderer),
             (BrowsableAPIRenderer, JSONRenderer), (StaticHTMLRenderer,)]


def outcome(negotiation, accept, query, renderers, suffix):
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    request = Request(APIRequestFactory().get(f"/api/v1/goals?{query}" if query else
                                              "/api/v1/goals", **headers))
    try:
        renderer, media_type = negotiation.select_renderer(
            request, [cls() for cls in renderers], suffix)
    except (exceptions.NotAcceptable, Http404) as exc:  # 404: a suffix no renderer has
        return type(exc).__name__
    return type(renderer).__name__, media_type


@pytest.mark.parametrize(("accept", "query"), list(itertools.product(ACCEPTS, QUERIES)))
def test_every_accept_header_gets_what_drf_answers(accept, query):
    for renderers, suffix in itertools.product(RENDERERS, (None, "json")):
        ours = outcome(Negotiation(), accept, query, renderers, suffix)
        assert ours == outcome(DefaultContentNegotiation(), accept, query, renderers, suffix)


def test_the_everyday_headers_take_the_short_path(monkeypatch):
    monkeypatch.setattr(DefaultContentNegotiation, "select_renderer",
                        lambda *a, **k: pytest.fail("DRF's negotiation ran"))
    for accept in (None, "*/*", "application/json"):
        assert outcome(Negotiation(), accept, "", RENDERERS[0], None) == (
            "JSONRenderer", "application/json")


def test_the_api_still_refuses_what_it_cannot_render(agent):
    refused = agent.client.get("/api/v1/goals", HTTP_ACCEPT="text/html")
    assert refused.status_code == 406
    assert refused.json()["code"] == "not_acceptable"
    assert agent.client.get("/api/v1/goals", HTTP_ACCEPT="application/json").status_code == 200
