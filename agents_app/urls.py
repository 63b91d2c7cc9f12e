"""Routes of the agents API."""

from django.urls import path

from agents_app import api

urlpatterns = [
    path("agents/", api.AgentListCreateView.as_view(), name="agent-list"),
    path("agents/<int:pk>/", api.AgentDetailView.as_view(), name="agent-detail"),
    path("runs/", api.RunListCreateView.as_view(), name="run-list"),
    path("runs/<uuid:pk>/", api.RunDetailView.as_view(), name="run-detail"),
    path("runs/<uuid:pk>/retry/", api.RunRetryView.as_view(), name="run-retry"),
    path("runs/<uuid:pk>/cancel/", api.RunCancelView.as_view(), name="run-cancel"),
    path("runs/<uuid:pk>/rollback/", api.RunRollbackView.as_view(), name="run-rollback"),
]
