from django.apps import AppConfig
from django.db.models.signals import post_migrate


class SchedulingConfig(AppConfig):
    name = "scheduling"
    verbose_name = "Scheduling"

    def ready(self) -> None:
        from ledger.log import sealing as ledger_sealing
        from ledger.operators import doctor
        from scheduling import dispatch, maintenance, sealing, watchdogs

        # A bad dispatcher configuration stops start-up, not the first wake.
        dispatch.configured()
        # The head webhook, for every seal (the task and `ledger seal`).
        ledger_sealing.register_witness(sealing.push_witness)
        post_migrate.connect(watchdogs.ensure_sweeper, sender=self,
                             dispatch_uid="scheduling.ensure_sweeper")
        post_migrate.connect(maintenance.ensure_prune_schedule, sender=self,
                             dispatch_uid="scheduling.ensure_prune_schedule")
        post_migrate.connect(doctor.ensure_repair, sender=self,
                             dispatch_uid="scheduling.ensure_repair")
        post_migrate.connect(sealing.ensure_seal_schedule, sender=self,
                             dispatch_uid="scheduling.ensure_seal_schedule")
