"""Bench-only settings: the production settings, plus bench/urls.py.

Only ``bench/http_checkpoint.py`` serves with it: the bare DRF insert view it
mounts is the HTTP baseline and must never be part of the product's URLs.
"""

from ledger.project.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
