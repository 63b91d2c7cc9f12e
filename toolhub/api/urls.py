"""Routes of the core API."""

from django.urls import path

from toolhub.api import governed, views
from toolhub.sagas import api as sagas

urlpatterns = [
    path("tools/", views.ToolListView.as_view(), name="tool-list"),
    path("tools/export/<str:provider>/", views.ToolExportView.as_view(), name="tool-export"),
    path("calls/", governed.CallCollectionView.as_view(), name="call-list"),
    path("calls/<uuid:pk>/", governed.CallWaitDetailView.as_view(), name="call-detail"),
    path("calls/<uuid:pk>/result/", views.CallResultView.as_view(), name="call-result"),
    path("calls/<uuid:pk>/cancel/", views.CallCancelView.as_view(), name="call-cancel"),
    path("calls/<uuid:pk>/artifacts/<int:artifact_id>/", views.CallArtifactView.as_view(), name="call-artifact"),
    path("sagas/", sagas.SagaListView.as_view(), name="saga-list"),
    path("sagas/<str:saga_id>/", sagas.SagaDetailView.as_view(), name="saga-detail"),
    path("sagas/<str:saga_id>/rollback/", sagas.SagaRollbackView.as_view(), name="saga-rollback"),
]
