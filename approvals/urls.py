"""Routes of the approvals API."""

from django.urls import path

from approvals import api

urlpatterns = [
    path("approvals/", api.ApprovalListView.as_view(), name="approval-list"),
    path("approvals/<int:pk>/", api.ApprovalDetailView.as_view(), name="approval-detail"),
    path("approvals/<int:pk>/approve/", api.ApproveView.as_view(), name="approval-approve"),
    path("approvals/<int:pk>/reject/", api.RejectView.as_view(), name="approval-reject"),
]
