"""Routes of the core API."""

from django.urls import path

from toolhub.api import views

urlpatterns = [
    path("tools/", views.ToolListView.as_view(), name="tool-list"),
    path("tools/export/<str:provider>/", views.ToolExportView.as_view(), name="tool-export"),
    path("calls/", views.CallListView.as_view(), name="call-list"),
    path("calls/<uuid:pk>/", views.CallDetailView.as_view(), name="call-detail"),
    path("calls/<uuid:pk>/result/", views.CallResultView.as_view(), name="call-result"),
    path("calls/<uuid:pk>/artifacts/<int:artifact_id>/", views.CallArtifactView.as_view(), name="call-artifact"),
]
