"""Requests the API refuses before any view reads them."""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

from api.problems import PROBLEM_CONTENT_TYPE, problem


class RefuseChunkedBodies:
    """``Transfer-Encoding: chunked`` under /api/ is a 411 problem.

    Django reads a body only as far as Content-Length says; a chunked request
    has none, so its body was read as empty and a POST ran as if sent ``{}``
    (a checkpoint "without fields" refused for the wrong reason, or an empty
    call that succeeded). Every client we know of can send a length."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        encoding = request.META.get("HTTP_TRANSFER_ENCODING", "")
        if "chunked" in encoding.lower() and request.path.startswith("/api/"):
            body = problem("length_required", "Send the body with a Content-Length; "
                           "Transfer-Encoding: chunked is not read.")
            return JsonResponse(body, status=body["status"], content_type=PROBLEM_CONTENT_TYPE)
        return self.get_response(request)
