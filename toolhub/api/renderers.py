r"""The browsable API as a page must draw it: invisible characters in the shown response written out.

DRF's ``BrowsableAPIRenderer`` prints the JSON answer inside the page as it is: a bidi override or a zero-width
space a model put in a call's arguments reads there as other text (``add\u200b`` as ``add``), as it did in the
admin before ``toolhub.admin_visible``. The page's response panel goes through ``toolhub.visible`` like every
other console page; the JSON renderer, and so every API client, still gets the values as stored. Forms' inputs
(the raw data textarea) are left as they are: what a person submits is what the row holds.
"""

from typing import Any

from rest_framework.renderers import BaseRenderer, BrowsableAPIRenderer

from toolhub.visible import visible_text

__all__ = ["VisibleBrowsableAPIRenderer"]


class VisibleBrowsableAPIRenderer(BrowsableAPIRenderer):
    """DRF's browsable API, its response panel with invisible characters written out (``\u200b``)."""

    def get_content(
        self, renderer: BaseRenderer, data: Any, accepted_media_type: str, renderer_context: dict[str, Any]
    ) -> str:
        return visible_text(super().get_content(renderer, data, accepted_media_type, renderer_context))
