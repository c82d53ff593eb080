"""The HTTP baseline: a bare DRF view that validates a small body and inserts
one row in one transaction. Same server, same middleware and settings as the
product; no authentication, no fencing, no events.
"""

from django.db import connection, transaction
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

TABLE = "bench_bare"
CREATE = (f"CREATE TABLE IF NOT EXISTS {TABLE} (id INTEGER PRIMARY KEY, current_step TEXT, "
          "progress_pct INTEGER, body TEXT)")


class BareSerializer(serializers.Serializer):
    current_step = serializers.CharField(max_length=500)
    progress_pct = serializers.IntegerField(min_value=0, max_value=100)


class BareInsertView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    def post(self, request: Request) -> Response:
        serializer = BareSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {TABLE} (current_step, progress_pct, body) "
                           "VALUES (%s, %s, %s)",
                           [serializer.validated_data["current_step"],
                            serializer.validated_data["progress_pct"], request.body.decode()])
            row_id = cursor.lastrowid
        return Response({"id": row_id}, status=201)
