"""The sagas sub-app: depends on the toolhub core, which never imports it."""

from django.apps import AppConfig


class SagasConfig(AppConfig):
    name = "toolhub.sagas"
    label = "sagas"
    verbose_name = "Sagas and compensations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from toolhub.dashboard import dashboard_figure
        from toolhub.sagas import checks, receivers  # noqa: F401 - registers the checks and the settle receiver
        from toolhub.sagas.dashboard import sagas_attention_figures

        dashboard_figure(sagas_attention_figures)
