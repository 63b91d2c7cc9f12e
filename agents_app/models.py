"""Agents (model settings, prompt, tools, limits) and their persisted runs."""

import uuid

from django.conf import settings
from django.db import models


class Provider(models.TextChoices):
    OPENAI = "openai", "OpenAI-compatible endpoint"
    SCRIPTED = "scripted", "Scripted (deterministic)"


class Agent(models.Model):
    """An LLM with a system prompt and the tools it may use.

    The API key is never stored: ``api_key_env`` names the environment variable that holds it.
    """

    name = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    provider = models.CharField(max_length=16, choices=Provider.choices, default=Provider.SCRIPTED)
    base_url = models.URLField(blank=True)
    model_name = models.CharField(max_length=200, blank=True)
    api_key_env = models.CharField(max_length=100, blank=True)
    script = models.JSONField(default=list, blank=True, help_text="Turns of the scripted model.")
    system_prompt = models.TextField(blank=True)
    tools = models.JSONField(default=list, blank=True, help_text="Names of the tools this agent may call.")
    max_tool_calls = models.PositiveIntegerField(default=10)
    compensate_on_error = models.BooleanField(default=False)
    parallel_tool_calls = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class RunStatus(models.TextChoices):
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class StopReason(models.TextChoices):
    NONE = "", "-"
    ANSWERED = "answered"
    IMMEDIATE_RETURN = "immediate_return", "ended by a tool's immediate return"
    MAX_TOOL_CALLS = "max_tool_calls"
    MODEL_ERROR = "model_error"
    CANCELLED = "cancelled"


class AgentRun(models.Model):
    """One conversation of an agent, persisted so that it resumes on any worker after any restart."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="runs")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="agent_runs")
    tenant = models.CharField(max_length=100, blank=True, db_index=True)
    context = models.JSONField(default=dict, blank=True)
    input = models.TextField()
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.RUNNING, db_index=True)
    stop_reason = models.CharField(max_length=32, choices=StopReason.choices, blank=True)
    error = models.TextField(blank=True)
    retryable = models.BooleanField(default=False)
    messages = models.JSONField(default=list, blank=True)
    output = models.TextField(blank=True)
    turn = models.PositiveIntegerField(default=0, help_text="Number of model turns taken.")
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    step_lease_until = models.DateTimeField(
        null=True, blank=True, help_text="Set while one worker talks to the model for this run."
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.agent.name} run {self.id} ({self.status})"
