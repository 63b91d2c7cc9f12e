"""JSON request bodies every view can trust: bounded nesting, and only text the database can store.

``json.loads`` recurses once per level, so a body nested thousands deep ends in ``RecursionError``
(a 500), and it accepts NUL characters and lone surrogates that no PostgreSQL column takes. The
parser measures the depth on the raw text first, without recursion, and checks the decoded data with
``toolhub.storable``, through ``toolhub.json_intake`` as every other path that takes JSON (form fields,
MCP, arguments). It runs when a view reads ``request.data``: after authentication and permissions, so a
body nobody authenticated is never decoded (decoding 2 MB of ``[[],[],...]`` takes a second of CPU), and
a view that never reads its body stores nothing from it.
"""

import json
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import DataAndFiles, JSONParser, MultiPartParser
from rest_framework.utils import json as drf_json

from toolhub.conf import toolhub_settings
from toolhub.json_intake import JSONRefused, RefusalKind, json_loads_checked, json_nesting_depth
from toolhub.middleware import file_part_refusal

__all__ = ["FilelessMultiPartParser", "StorableJSONParser", "json_nesting_depth"]


class FilelessMultiPartParser(MultiPartParser):
    """DRF's multipart parser, refusing any file part: no API view takes a file.

    ``toolhub.middleware`` refuses a POST's file parts before any view (Django parses a POST's form, and DRF reuses
    it); Django leaves a PATCH's or PUT's body unparsed, so this parser is where theirs are seen (review bc: a
    PATCH with a file part was applied).
    """

    def parse(
        self, stream: Any, media_type: str | None = None, parser_context: dict[str, Any] | None = None
    ) -> DataAndFiles:
        parsed = super().parse(stream, media_type, parser_context)
        if parsed.files:
            raise ParseError(file_part_refusal(next(iter(parsed.files))))
        return parsed


class StorableJSONParser(JSONParser):
    """DRF's JSON parser, refusing bodies nested deeper than ``MAX_REQUEST_NESTING`` or holding unstorable text."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict[str, Any] | None = None) -> Any:
        parser_context = parser_context or {}
        raw = stream.read()
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError) as exc:
            raise ParseError(f"JSON parse error - the body is not valid {encoding} text: {exc}") from None
        limit = toolhub_settings().MAX_REQUEST_NESTING

        def decode(body: str) -> Any:
            """DRF's decoding (strict: no NaN); a syntax error worded as DRF words it (with its position).

            Any other ``ValueError`` (an integer past ``sys.get_int_max_str_digits()``, ``NaN``) goes to
            ``json_loads_checked`` to word: DRF put ``int()``'s own text in its answer, which tells the client to call
            ``sys.set_int_max_str_digits()``, a detail of the server nobody outside can act on.
            """
            try:
                return drf_json.loads(body, parse_constant=drf_json.strict_constant if self.strict else None)
            except json.JSONDecodeError as exc:
                raise ParseError(f"JSON parse error - {exc}") from None

        try:
            return json_loads_checked(text, max_depth=limit, loads=decode)
        except JSONRefused as refused:
            advice = "Nothing was done."
            if refused.kind == RefusalKind.STORAGE:
                advice = "Remove it or write it out as text; nothing was done."
            raise ParseError(f"{refused.about('The request body')}. {advice}") from None
