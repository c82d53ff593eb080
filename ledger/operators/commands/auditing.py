"""`ledger` actions: verify, seal, head, key, export: the verifiable log.

The arguments (``add``) and the handlers (``Auditing``, mixed into the command
in ledger/management/commands/ledger.py). Thin: parse, call, print."""

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError

from ledger.eventstore import projection
from ledger.log import cosigning, export, log_audit, sealing, signing
from ledger.models import TreeHead
from ledger.operators.commands.base import Shell, positive
from ledger.operators.progress import Progress
from ledger.services import loghealth
from wakeledger_verify import heads, notes


def add(actions: Any) -> None:
    """verify, seal, head, key, export: the verifiable log."""
    verify = actions.add_parser(
        "verify", help="Recompute every goal's hash chain, check that it ends at the goal "
                       "row's version and head hash; name the first broken link.")
    verify.add_argument("goal_ids", nargs="*", metavar="GOAL_ID")
    verify.add_argument(
        "--against", metavar="HEAD_FILE",
        help="also prove the whole log still extends this head, kept earlier (the JSON "
             "of GET /api/v1/ledger/head or `ledger head`, or a checkpoint note, cosigned or "
             "not: GET /api/v1/ledger/checkpoint, a witness's): exit 1 on any rewrite, "
             "deletion, truncation, insertion or rollback since; the sealer's own record "
             "beside the signing key is held to as well")
    verify.add_argument("--key", action="append", default=[], metavar="PUBKEY_FILE",
                        help="a public key (PEM) to check heads' signatures with, beside "
                             "this server's own; repeatable (keys rotated away)")

    actions.add_parser(
        "seal", help="Put committed events into the verifiable log's tree and sign a "
                     "tree head (the scheduler does it every WAKELEDGER_SEAL_MINUTES).")
    head = actions.add_parser("head", help="Print the newest signed tree head as JSON (keep "
                                           "it: `verify --against` and "
                                           "`wakeledger-verify --head`).")
    head.add_argument("--checkpoint", action="store_true",
                      help="print it as the C2SP checkpoint note instead, with its "
                           "witnesses' cosignatures")
    key = actions.add_parser("key", help="Print the head-signing public key (clean PEM on "
                                         "standard output, its id on standard error) for "
                                         "auditors to pin.")
    key.add_argument("--note", action="store_true",
                     help="print the checkpoints' note verifier key instead "
                          "(<origin>+<key hash>+<base64 key>), for witnesses and Go's "
                          "sumdb/note")
    export = actions.add_parser(
        "export", help="Write a goal's verifiable export: its events, their inclusion "
                       "proofs, the signed head and the public key (wakeledger-verify "
                       "checks it offline).")
    export.add_argument("goal_id", metavar="GOAL_ID")
    export.add_argument("-o", "--output", metavar="FILE",
                        help="the bundle's file (default: standard output)")
    export.add_argument("--from-size", type=positive, action="append", default=[],
                        metavar="N", help="add a consistency proof from an earlier head "
                                          "of N leaves (repeatable)")
    export.add_argument("--no-seal", action="store_true",
                        help="export against the newest head as it is, without sealing")
    export.add_argument("--witness", action="append", default=[], metavar="VKEY_OR_NAME",
                        help="export against the newest head this witness cosigned (its "
                             "note verifier key, its cosignature then checked, or its name; "
                             "repeatable: all of them); by default the newest head")


class Auditing(Shell):
    def handle_verify(self, goal_ids: list[str], against: str | None, key: list[str],
                      **_: Any) -> None:
        if against:
            kept, keys = self._read_head(against), self._keys(key)
        ids = self._ids(goal_ids)
        bar = Progress(len(ids), "verify", self.stderr._out)
        broken, events = 0, 0
        for report in projection.verify(ids, progress=bar.advance):
            events += report.events
            if report.broken:
                broken += 1
                self.stdout.write(self.style.ERROR(
                    f"goal {report.goal_id}: chain broken at seq {report.broken.seq} "
                    f"({report.broken.why})"))
        bar.close()
        # Never "verified" while the log's alarm stands (docs/integrity.md).
        problems = loghealth.log_problems()
        if problems:
            self.stdout.write(f"checked {len(ids)} goal(s), {events} event(s): {broken} broken "
                              "chain(s); NOT verified: the log's alarm is raised")
            for problem in problems:
                self.stdout.write(self.style.ERROR(f"log: {problem}"))
        else:
            self.stdout.write(f"verified {len(ids)} goal(s), {events} event(s): {broken} broken")
        findings = self._verify_log(kept, keys) if against else []
        if broken or findings or problems:
            parts = [f"{broken} broken chain(s)"] if broken else []
            parts += [f"{len(findings)} problem(s) in the log"] if findings else []
            parts += ["the log's alarm is raised"] if problems else []
            raise CommandError(", ".join(parts), returncode=1)

    def _verify_log(self, kept: dict[str, Any] | str, keys: list[Any]) -> list[str]:
        try:
            report = log_audit.audit(kept, keys)
        except ValueError as error:
            raise CommandError(str(error)) from None
        for finding in report.findings:
            self.stdout.write(self.style.ERROR(f"log: {finding}"))
        for note in report.notes:
            self.stdout.write(f"log: note: {note}")
        verdict = "does NOT extend" if report.findings else "extends"
        self.stdout.write(f"log: {report.tree_size} leaves, root {report.root}; {verdict} the "
                          f"kept head of {report.kept_size} leaves; "
                          f"{report.heads_checked} stored head(s) checked")
        return report.findings

    @staticmethod
    def _read_head(path: str) -> dict[str, Any] | str:
        """A kept head: the JSON of GET /ledger/head, or a checkpoint note (GET
        /ledger/checkpoint, a witness's state, cosigned or not)."""
        try:
            text = Path(path).read_text(encoding="utf-8")
            if not text.lstrip().startswith("{"):
                notes.parse_checkpoint(notes.split(text)[0])
                return text
            head = json.loads(text)
        except notes.NoteError as error:
            raise CommandError(f"{path} is not a tree head or a checkpoint: {error}") from None
        except (OSError, ValueError) as error:
            raise CommandError(f"cannot read the head file {path}: {error}") from None
        problem = heads.head_shape_error(head)
        if problem:
            raise CommandError(f"{path} is not a tree head: {problem}")
        return head

    @staticmethod
    def _keys(paths: list[str]) -> list[Any]:
        keys = []
        own = Path(settings.WAKELEDGER_SIGNING_KEY_FILE)
        if own.exists():
            keys.append(signing.signer(own).private_key.public_key())
        for path in paths:
            try:
                keys.append(heads.load_public_key(Path(path).read_text(encoding="utf-8")))
            except (OSError, ValueError) as error:
                raise CommandError(f"{path} is not an Ed25519 public key (PEM): "
                                   f"{error}") from None
        return keys

    def handle_seal(self, **_: Any) -> None:
        try:
            result = sealing.seal()
        except sealing.HorizonBusy as busy:
            raise CommandError(f"nothing sealed: {busy}; try again") from None
        except sealing.LogInconsistent as alarm:
            loghealth.tell()  # a person is told, not only this terminal
            raise CommandError(f"ALARM: no head signed: {alarm}", returncode=3) from None
        loghealth.tell()
        if result.head is None:
            self.stdout.write(f"sealed {result.appended} event(s); the tree has "
                              f"{result.size} leaves, as the newest head says")
            return
        self.stdout.write(f"sealed {result.appended} event(s); signed head: size "
                          f"{result.head.size}, root {result.head.root}, key "
                          f"{result.head.key_id}")
        if settings.WAKELEDGER_HEAD_WITNESS_URL:
            self.stdout.write(f"witness {'took' if result.witnessed else 'did NOT take'} the "
                              "head")
        if settings.WAKELEDGER_TLOG_WITNESSES:  # the push runs after the commit, not here
            self.stdout.write(f"the scheduler sends it to {len(settings.WAKELEDGER_TLOG_WITNESSES)}"
                              " C2SP witness(es) by add-checkpoint")

    def handle_head(self, checkpoint: bool, **_: Any) -> None:
        heads_ = TreeHead.objects.order_by("-id")
        head = (heads_.exclude(checkpoint="") if checkpoint else heads_).first()
        if head is None:
            raise CommandError("no signed head yet: run `ledger seal`")
        if checkpoint:
            self.stdout.write(cosigning.cosigned(head), ending="")
            return
        self.stdout.write(json.dumps(head.as_dict(), indent=2))

    def handle_key(self, note: bool, **_: Any) -> None:
        key = signing.signer()
        if note:
            self.stdout.write(key.note_verifier().text())
            return
        # Only the PEM on standard output: `ledger key > server.pem` is a key file.
        self.stderr.write(f"key id: {key.key_id}")
        self.stdout.write(key.public_pem.rstrip())

    def handle_export(self, goal_id: str, output: str | None, from_size: list[int],
                      no_seal: bool, witness: list[str], **_: Any) -> None:
        [pk] = self._valid([goal_id])
        try:
            witnesses = [export.witness(text) for text in witness]
        except notes.NoteError as error:
            raise CommandError(f"--witness: {error}") from None
        if not no_seal:
            try:
                sealing.seal()
            except sealing.HorizonBusy as busy:
                self.stderr.write(f"not sealed ({busy}); exporting against the newest head")
            except sealing.LogInconsistent as alarm:  # the bundle still proves what it holds
                self.stderr.write(f"ALARM: not sealed ({alarm}); exporting against the newest "
                                  "head")
        try:
            data = export.bundle(pk, from_sizes=from_size, cosigned_by=witnesses)
        except export.NothingToExport as error:
            raise CommandError(str(error)) from None
        text = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        if output is None:
            self.stdout.write(text, ending="")
            return
        Path(output).write_text(text, encoding="utf-8")
        self.stdout.write(f"wrote {output}: goal {pk}, {len(data['events'])} event(s), head "
                          f"of {data['head']['size']} leaves; check it with "
                          f"`wakeledger-verify {output}`")
