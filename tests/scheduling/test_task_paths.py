"""The task paths the ledger writes into django-q2's rows
(``ledger.services.schedules``) name functions the scheduler defines: a
path that resolves to nothing would only fail in a worker, after the row
was due."""

import pytest
from django.utils.module_loading import import_string

from ledger.services import schedules


@pytest.mark.parametrize("path", schedules.TASK_PATHS)
def test_every_task_path_the_ledger_writes_resolves_to_a_scheduler_function(path):
    assert path.startswith("scheduling.")
    assert callable(import_string(path))
