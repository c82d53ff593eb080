"""Factories that build goals the only legitimate way: through store commands.

A Goal row made with ``Goal.objects.create`` would be a projection of no
events; these go through ``store.start`` / ``store.execute`` so the event
history and the projection always agree.
"""

import uuid

import factory

from ledger import store
from ledger.domain import Finish, RecordCheckpoint, StartGoal
from ledger.models import Goal


class GoalFactory(factory.Factory):
    class Meta:
        model = StartGoal

    goal_id = factory.LazyFunction(lambda: str(uuid.uuid4()))
    workspace = factory.Sequence(lambda n: f"/srv/repos/project-{n}")
    goal_key = factory.Sequence(lambda n: f"issue-{n}")
    objective = factory.Faker("sentence", nb_words=8)
    done_criteria = ("tests pass", "PR opened")
    next_actions = ("read the issue", "write a failing test")
    agent = "agent-1"

    @classmethod
    def _create(cls, model_class, *args, checkpoints: int = 0, finish: str | None = None,
                **kwargs) -> Goal:
        command = model_class(**kwargs)
        outcome = store.start(command, actor=command.agent or "agent-1")
        goal_id = outcome.state.goal_id
        for step in range(1, checkpoints + 1):
            store.execute(goal_id, RecordCheckpoint(
                current_step=f"step {step}",
                progress_pct=min(100, step * 10),
                completed=(f"did step {step}",),
                next_actions=(f"step {step + 1}",),
            ), actor=command.agent)
        if finish:
            store.execute(goal_id, Finish(status=finish, summary="finished"), actor=command.agent)
        return Goal.objects.get(pk=goal_id)
