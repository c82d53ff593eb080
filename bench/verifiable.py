"""The verifiable log: sealing, serving proofs, exporting and
verifying offline.

    python bench/verifiable.py [--quick] [--events N] [--goal-events M]

Seeds a temporary SQLite database with one goal of M events written through
the store (a valid chain, so the verifier can check it) and copies of a
100-event goal up to N events in all (bench/seed.py), then measures:

- seal: events entering the tree per second, one seal over the whole log
  (a first seal after an upgrade; the scheduled seal of a minute's events
  is the same work on fewer);
- inclusion proofs served per second (ledger.log.merkle_store.inclusion, what
  GET /api/v1/ledger/proof/inclusion computes), random events;
- export of the M-event goal: seconds, and the bundle's size in MB;
- wakeledger-verify of that bundle: events checked per second (chain link,
  leaf hash and inclusion proof each, plus one signature);
- ``ledger verify --against`` a head of the whole log: events per second
  (every leaf recomputed from its event, the tree rebuilt, stored subtrees and
  heads checked).

The append path is not touched by the log (bench/append.py measures it).
"""

import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Row, django_setup, emit, median, parser, reps_of


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--events", type=int, default=None, help="events in the log in all")
    p.add_argument("--goal-events", type=int, default=None, help="events of the exported goal")
    args = p.parse_args()
    reps = reps_of(args)
    total = args.events or (20_000 if args.quick else 100_000)
    goal_events = args.goal_events or 10_000
    with tempfile.TemporaryDirectory(prefix="wakeledger-bench-") as tmp:
        django_setup(tmp)
        from bench import seed
        from ledger.log import export, log_audit, merkle_store, sealing, signing
        from ledger.models import Event, LogLeaf
        from wakeledger_verify import bundle

        started = time.perf_counter()
        goal = seed.template(goal_events)
        source = seed.template(100)
        seed.clone_goals(source, max(0, (total - goal_events - 100) // 100))
        events = Event.objects.count()
        print(f"seeded {events} events in {time.perf_counter() - started:.0f}s",
              file=sys.stderr, flush=True)

        t0 = time.perf_counter()
        result = sealing.seal()
        seal_seconds = time.perf_counter() - t0
        assert result.size == events

        ids = list(Event.objects.values_list("id", flat=True))
        rng = random.Random(23)  # noqa: S311 (which events to prove, not a secret)
        proof_times = []
        for _ in range(reps * 20):
            position = LogLeaf.objects.get(event_id=rng.choice(ids)).position
            t = time.perf_counter()
            merkle_store.inclusion(position, result.size)
            proof_times.append(time.perf_counter() - t)

        export_times, verify_times = [], []
        for _ in range(reps):
            t = time.perf_counter()
            data = export.bundle(goal)
            text = json.dumps(data, indent=1, sort_keys=True)
            export_times.append(time.perf_counter() - t)
            t = time.perf_counter()
            checked = bundle.check(json.loads(text)).events
            verify_times.append(time.perf_counter() - t)
        assert checked == goal_events
        size_mb = len(text.encode()) / 1e6

        # verify --against: every leaf recomputed from its event, the tree rebuilt.
        kept, key = result.head.as_dict(), signing.signer().private_key.public_key()
        t = time.perf_counter()
        audit = log_audit.audit(kept, [key])
        audit_seconds = time.perf_counter() - t
        assert not audit.findings, audit.findings

    proof_s = median(proof_times)
    rows = [
        Row("log seal (first seal of the whole log)", events / seal_seconds, "events/s",
            "-", None, None, None, None, events, 1),
        Row("inclusion proof served (stored subtrees)", 1 / proof_s, "proofs/s", "-", None,
            None, proof_s * 1000, sorted(proof_times)[int(len(proof_times) * 0.99) - 1] * 1000,
            events, len(proof_times)),
        Row(f"export a {goal_events:,}-event goal", median(export_times), "s", "-", None, None,
            None, None, goal_events, reps),
        Row(f"bundle size, {goal_events:,}-event goal", size_mb, "MB", "-", None, None, None,
            None, goal_events, 1),
        Row("wakeledger-verify (chain + proof per event)", goal_events / median(verify_times),
            "events/s", "-", None, None, None, None, goal_events, reps),
        Row("ledger verify --against (whole log recomputed)", events / audit_seconds,
            "events/s", "-", None, None, None, None, events, 1),
    ]
    emit(rows, args.out)


if __name__ == "__main__":
    main()
