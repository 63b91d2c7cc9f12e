"""Every Celery task has time limits, and no limit cuts a tool or a model call still within its own budget."""

from agents_app.models import MAX_MODEL_DEADLINE_SECONDS
from toolhub import tool
from toolhub.celery import app
from toolhub.tools.registry import registry


def _project_tasks() -> dict:
    app.loader.import_default_modules()  # what a worker does at start: autodiscover every app's tasks
    return {
        name: task for name, task in app.tasks.items() if name.split(".")[0] in {"toolhub", "approvals", "agents_app"}
    }


def test_every_task_has_a_soft_and_a_hard_time_limit() -> None:
    tasks = _project_tasks()

    assert {"toolhub.tasks.execute_tool_call_task", "agents_app.tasks.advance_run_task"} <= set(tasks)
    for name, task in tasks.items():
        assert task.soft_time_limit, name
        assert task.time_limit and task.time_limit > task.soft_time_limit, name


def test_the_execute_task_outlasts_the_longest_tool_timeout() -> None:
    @tool(risk="low", timeout=5000)
    def very_long_import(path: str) -> str:
        """Import a huge file.

        Args:
            path: The file.
        """
        return path

    execute = _project_tasks()["toolhub.tasks.execute_tool_call_task"]
    with registry.temporarily(very_long_import):
        assert execute.soft_time_limit > 5000
        assert execute.time_limit > execute.soft_time_limit
    assert execute.soft_time_limit < 5000


def test_the_agent_step_outlasts_the_longest_provider_deadline() -> None:
    advance = _project_tasks()["agents_app.tasks.advance_run_task"]

    assert advance.soft_time_limit > MAX_MODEL_DEADLINE_SECONDS
    assert advance.time_limit > advance.soft_time_limit
