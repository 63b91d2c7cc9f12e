"""Project URLs: the admin (operators' and auditors' UI), the REST API and its OpenAPI schema."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

api_v1 = [
    path("", include("toolhub.api.urls")),
    path("", include("agents_app.urls")),
    path("", include("approvals.urls")),
]

urlpatterns = [
    # Reversed (not "/admin/"): the redirect stays below the script prefix when served under one (--root-path).
    path("", RedirectView.as_view(pattern_name="admin:index", permanent=False)),
    path("admin/", admin.site.urls),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # A page, not an API: DRF's OPTIONS answer (metadata) has no template to render it with, a 500 (review j).
    # The split view serves its script as a file (?script), so the page runs under script-src 'self'.
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(url_name="schema", http_method_names=["get", "head"]),
        name="swagger-ui",
    ),
]

# Requests under /api/ get JSON from Django's own error pages too (toolhub.api.error_pages).
handler400 = "toolhub.api.error_pages.bad_request_page"
handler404 = "toolhub.api.error_pages.not_found_page"
handler500 = "toolhub.api.error_pages.server_error_page"
