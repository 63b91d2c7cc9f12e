"""Routes of the core API."""

from django.urls import path

from toolhub.api import governed, views

urlpatterns = [
    path("tools/", views.ToolListView.as_view(), name="tool-list"),
    path("calls/", governed.CallCollectionView.as_view(), name="call-list"),
    path("calls/<uuid:pk>/", governed.CallWaitDetailView.as_view(), name="call-detail"),
    path("calls/<uuid:pk>/result/", views.CallResultView.as_view(), name="call-result"),
    path("calls/<uuid:pk>/artifacts/<int:artifact_id>/", views.CallArtifactView.as_view(), name="call-artifact"),
]
