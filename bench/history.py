"""History pages at the end of a long goal against its first page.

    python bench/history.py [--quick] [--events N]

Seeds one goal of N events (bench/seed.py; its projection is not rewritten,
the pages only read events) in a temporary SQLite database, then times, in
process through Django's whole stack (middleware, authentication, view,
rendering), in interleaved rounds:

- ``GET /api/v1/goals/{id}/events`` (auditor token): the page after the
  last 100 events against the first page;
- the admin timeline (a logged-in superuser): the oldest page against the
  newest.

Each row's value is the median latency of the far page, its baseline the
first page's; the ratio says how much a long history costs a reader.
"""

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Row, django_setup, emit, median, parser, percentile_ms, reps_of


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--events", type=int, default=None, help="events of the long goal")
    p.add_argument("--requests", type=int, default=None, help="requests per page per round")
    args = p.parse_args()
    reps = reps_of(args)
    events = args.events or (50_000 if args.quick else 1_000_000)
    per_round = args.requests or (10 if args.quick else 20)
    with tempfile.TemporaryDirectory(prefix="wakeledger-bench-") as tmp:
        django_setup(tmp)
        from django.contrib.auth import get_user_model
        from django.test import Client, override_settings
        from django.urls import reverse

        from bench import seed
        from ledger.access import accounts
        from ledger.operators import timeline
        from ledger.operators.commands.accounts import ensure_user

        started = time.perf_counter()
        goal_id = seed.long_goal(seed.template(100), events, fix=False)
        print(f"seeded one goal of {events:,} events in {time.perf_counter() - started:.0f}s",
              file=sys.stderr, flush=True)

        # No collectstatic into the throwaway var/: plain static URLs, whose
        # cost next to the manifest's (a dict lookup) is nil.
        override_settings(STORAGES={
            "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
            "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
        }).enable()
        token = accounts.issue_token(ensure_user("bench-auditor", "auditor"))
        api = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Bearer {token}")
        events_url = f"/api/v1/goals/{goal_id}/events"
        admin = Client(HTTP_HOST="localhost")
        admin.force_login(get_user_model().objects.create_superuser("bench-admin", None, None))
        timeline_url = reverse("admin:ledger_goal_timeline", args=[goal_id])

        def timer(client: Client, url: str, params: dict, samples: list[float]):  # type: ignore[no-untyped-def]
            def run() -> float:
                times = []
                for _ in range(per_round):
                    t0 = time.perf_counter()
                    response = client.get(url, params)
                    times.append(time.perf_counter() - t0)
                    assert response.status_code == 200, (url, response.status_code)
                samples.extend(times)
                return median(times) * 1000
            return run

        rows = []
        cases = (
            ("history: API events page at the end vs the first, one goal of",
             api, events_url, {"after": events - 100}, {"after": 0}, "first page (seq 1-100)"),
            ("history: admin timeline oldest page vs newest, one goal of",
             admin, timeline_url, {"before": timeline.PAGE + 1}, {},
             "newest page (where an operator lands)"),
        )
        for label, client, url, far, first, first_label in cases:
            far_samples: list[float] = []
            first_samples: list[float] = []
            far_run = timer(client, url, far, far_samples)
            first_run = timer(client, url, first, first_samples)
            far_run(), first_run()  # warm up
            far_samples.clear()
            first_samples.clear()
            pairs = []
            for rep in range(reps):
                if rep % 2:
                    a = far_run()
                    b = first_run()
                else:
                    b = first_run()
                    a = far_run()
                pairs.append((a, b))
            rows.append(Row(name=f"{label} {events:,} events",
                            value=median([a for a, _ in pairs]), unit="ms per request (median)",
                            baseline=first_label,
                            baseline_value=median([b for _, b in pairs]),
                            ratio=median([a / b for a, b in pairs]),
                            p50_ms=percentile_ms(far_samples, 50),
                            p99_ms=percentile_ms(far_samples, 99),
                            n=per_round, reps=reps))
    emit(rows, args.out)


if __name__ == "__main__":
    main()
