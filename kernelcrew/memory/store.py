"""Shared vector memory of reflections, backed by Chroma (local directory or server)."""

from __future__ import annotations

import builtins
import json
import os
import threading
import warnings
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TypedDict, cast
from urllib.parse import urlsplit

import chromadb
import httpx
import platformdirs
from chromadb.api import ClientAPI
from chromadb.api.models.Collection import Collection
from chromadb.api.shared_system_client import SharedSystemClient
from chromadb.api.types import Documents, Embeddable, EmbeddingFunction
from chromadb.config import Settings
from chromadb.errors import ChromaError, NotFoundError
from filelock import FileLock
from filelock import Timeout as LockTimeout

from .embedding import (
    EmbeddingUnavailable,
    default_embedding,
    describe_spec,
    embedding_by_name,
    embedding_from_spec,
    embedding_spec,
    option_name,
    situation_text,
)
from .reflection import FAILED_OUTCOMES, HELPED_OUTCOMES, Reflection

COLLECTION = "reflections"
ENV_MEMORY_DIR = "KERNELCREW_MEMORY_DIR"
LOCK_NAME = ".write.lock"
LOCK_TIMEOUT_S = 60.0
# Collection metadata key holding `embedding_spec(...)` of the function that built it.
EMBEDDING_META_KEY = "kernelcrew_embedding"

# Filters `list` accepts, each an exact match on the reflection's metadata.
FILTER_FIELDS = (
    "operator",
    "family",
    "backend",
    "device",
    "bottleneck",
    "change_kind",
    "author",
    "accepted",
    "run_id",
)


class MemoryUnavailable(RuntimeError):
    """The memory store cannot be reached or used; the message is a one-line reason."""


class MemoryConfigError(MemoryUnavailable):
    """The store was built with a different embedding function than the one requested, or
    the requested (or recorded) one cannot be used here."""


class MemoryUnavailableWarning(RuntimeWarning):
    """A run continues without memory."""


class ChangeKindStats(TypedDict):
    tried: int  # reflections recorded for this change kind
    accepted: int  # of which the verifier accepted
    helped: int  # of which beat the incumbent (accepted, or faster but outdone that iteration)
    failed: int  # of which were slower, incorrect or did not compile
    mean_speedup: float  # arithmetic mean over all tried (failed attempts count as 0)


class Memory(Protocol):
    """What the agents use; both `MemoryStore` and `NullMemory` provide it."""

    available: bool

    def add(self, reflection: Reflection) -> None: ...

    def add_many(self, reflections: list[Reflection]) -> None: ...

    def count(self) -> int: ...

    def list(self, limit: int | None = None, **filters: Any) -> list[Reflection]: ...

    def search(
        self,
        query_situation: Mapping[str, Any] | str,
        k: int = 5,
        family: str | None = None,
        backend: str | None = None,
    ) -> builtins.list[tuple[Reflection, float]]: ...

    def change_kind_stats(
        self, family: str | None = None, backend: str | None = None
    ) -> dict[str, ChangeKindStats]: ...

    def export_markdown(self) -> str: ...


def default_memory_dir() -> Path:
    """`$KERNELCREW_MEMORY_DIR`, else `<user data dir>/kernelcrew/memory`."""
    env = os.environ.get(ENV_MEMORY_DIR)
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("kernelcrew")) / "memory"


def _settings() -> Settings:
    # A fresh object each time: chromadb's client factories mutate the settings passed in.
    return Settings(anonymized_telemetry=False)


def _reason(exc: BaseException) -> str:
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first_line}" if first_line else type(exc).__name__


# Failures of the store itself (as opposed to bugs in the caller): chromadb's errors,
# its ValueErrors (bad collection state; pydantic's ValidationError on damaged
# metadata), disk errors and a dropped server connection.
_STORE_ERRORS = (ChromaError, ValueError, OSError, httpx.HTTPError)


def _forget_unstarted_system(path: Path) -> None:
    """Drop the System chromadb cached for `path` if it never started.

    chromadb caches a System per directory before starting it. When starting fails
    (a damaged chroma.sqlite3), the unstarted System stays cached and every later
    client for that directory fails with "'RustBindingsAPI' object has no attribute
    'bindings'" instead of the real reason. No client holds a reference to it then.
    """
    systems = getattr(SharedSystemClient, "_identifier_to_system", None)
    refcounts = getattr(SharedSystemClient, "_identifier_to_refcount", None)
    unused = isinstance(refcounts, dict) and refcounts.get(str(path), 0) == 0
    if isinstance(systems, dict) and unused:
        systems.pop(str(path), None)


def _stored_spec(collection: Collection) -> str:
    """The `embedding_spec` a collection was built with (metadata, else Chroma's config)."""
    stored = (collection.metadata or {}).get(EMBEDDING_META_KEY)
    if isinstance(stored, str):
        return stored
    persisted = collection.configuration_json.get("embedding_function") or {}
    return json.dumps({"name": persisted.get("name"), "config": persisted.get("config")},
                      sort_keys=True)


def _where(filters: Mapping[str, Any]) -> dict[str, Any] | None:
    # Chroma's `where` takes one top-level key: several conditions go under "$and".
    clauses = [{key: value} for key, value in filters.items() if value is not None]
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def _reflection(document: str, metadata: Mapping[str, Any]) -> Reflection:
    # Documents are `situation_text(...)`: tags, " | ", then the reflection text.
    _, sep, text = document.partition(" | ")
    return Reflection.from_metadata(text if sep else document, dict(metadata))


def _situation(reflection: Reflection) -> str:
    return situation_text(
        reflection.text,
        operator=reflection.operator,
        family=reflection.family,
        backend=reflection.backend,
        bottleneck=reflection.bottleneck,
        change_kind=reflection.change_kind,
    )


class MemoryStore:
    """Reflections in a Chroma collection, shared between runs and processes.

    A local directory is opened with a fresh `PersistentClient` per operation under a
    file lock: a long-lived client does not see vectors other processes add (its HNSW
    index is in memory), and unserialised writers lose vectors from the index.
    """

    available = True

    def __init__(
        self,
        *,
        embedding: EmbeddingFunction[Documents] | None,
        path: Path | None = None,
        client: ClientAPI | None = None,
        location: str,
    ) -> None:
        """Use `MemoryStore.open`; this only stores what it is given (None: the store's
        own embedding, chosen when it is first opened)."""
        # chromadb types collections over Embeddable (text or images); ours embed text.
        self._embedding = cast("EmbeddingFunction[Embeddable] | None", embedding)
        self._path = path
        self._http = client
        self.location = location
        self._thread_lock = threading.RLock()
        self._file_lock = FileLock(str(path / LOCK_NAME)) if path is not None else None

    # -- opening ---------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | Path | None = None,
        url: str | None = None,
        embedding: EmbeddingFunction[Documents] | str | None = None,
    ) -> MemoryStore:
        """Open (creating if needed) the store at `path` or on the Chroma server at `url`.

        `embedding` is a function, a name (`hashed`, `minilm`) or None / `auto`: the one
        the store was built with, and for a new store `default_embedding()`.
        Raises `MemoryUnavailable` (one-line reason) or `MemoryConfigError`.
        """
        if path is not None and url is not None:
            raise ValueError("MemoryStore.open: give either path or url, not both")
        if embedding == "auto":
            embedding = None
        elif isinstance(embedding, str):
            try:
                embedding = embedding_by_name(embedding)
            except EmbeddingUnavailable as exc:
                raise MemoryConfigError(str(exc)) from None
        if url is not None:
            store = cls(embedding=embedding, client=_http_client(url), location=url)
        else:
            root = Path(path).expanduser() if path is not None else default_memory_dir()
            try:
                root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise MemoryUnavailable(
                    f"memory store at {root} cannot be created: {_reason(exc)}"
                ) from exc
            store = cls(embedding=embedding, path=root, location=str(root))
        with store._collection(check=True):
            pass
        return store

    @classmethod
    def open_or_none(
        cls,
        path: str | Path | None = None,
        url: str | None = None,
        embedding: EmbeddingFunction[Documents] | str | None = None,
    ) -> MemoryStore | NullMemory:
        """Like `open`, but on failure warn and return a `NullMemory` (never raises)."""
        try:
            return cls.open(path=path, url=url, embedding=embedding)
        except MemoryUnavailable as exc:
            warnings.warn(
                f"kernelcrew memory disabled for this run: {exc}",
                MemoryUnavailableWarning,
                stacklevel=2,
            )
            return NullMemory(reason=str(exc))

    @contextmanager
    def _collection(self, *, check: bool = False) -> Iterator[Collection]:
        """Yield the collection, serialised and freshly loaded for a local directory."""
        if self._http is not None:
            with self._translate_errors():
                yield self._get_collection(self._http, check=check)
            return
        assert self._path is not None and self._file_lock is not None
        # Reads take the lock too: writers rewrite the HNSW files a reader would load.
        with self._thread_lock, self._translate_errors():
            try:
                self._file_lock.acquire(timeout=LOCK_TIMEOUT_S)
            except LockTimeout as exc:
                raise MemoryUnavailable(
                    f"memory store at {self._path}: lock {self._path / LOCK_NAME} "
                    f"held by another process for over {LOCK_TIMEOUT_S:.0f} s"
                ) from exc
            try:
                try:
                    client = chromadb.PersistentClient(path=str(self._path), settings=_settings())
                except BaseException:
                    _forget_unstarted_system(self._path)
                    raise
                try:
                    yield self._get_collection(client, check=check)
                finally:
                    # Closing the last client drops the cached system, so the next
                    # operation reloads what other processes wrote.
                    client.close()  # type: ignore[attr-defined]  # Client, typed as ClientAPI
            finally:
                self._file_lock.release()

    @contextmanager
    def _translate_errors(self) -> Iterator[None]:
        try:
            yield
        except MemoryUnavailable:
            raise
        except EmbeddingUnavailable as exc:
            raise MemoryConfigError(f"memory store at {self.location}: {exc}") from None
        except _STORE_ERRORS as exc:
            raise MemoryUnavailable(
                f"memory store at {self.location} unusable: {_reason(exc)}"
            ) from exc
        except BaseException as exc:
            # A Rust panic in chromadb's bindings arrives as pyo3's PanicException,
            # which derives from BaseException rather than Exception.
            if type(exc).__name__ != "PanicException":
                raise
            raise MemoryUnavailable(
                f"memory store at {self.location} unusable: {_reason(exc)}"
            ) from exc

    @property
    def embedding(self) -> EmbeddingFunction[Embeddable]:
        """The embedding this store is opened with (known once `open` returned)."""
        assert self._embedding is not None, "use MemoryStore.open"
        return self._embedding

    def _own_embedding(self, client: ClientAPI) -> EmbeddingFunction[Embeddable]:
        """The embedding the existing collection records, else the default for a new one."""
        try:
            existing = client.get_collection(COLLECTION, embedding_function=None)
        except NotFoundError:
            existing = None
        found = embedding_from_spec(_stored_spec(existing)) if existing is not None else None
        return cast("EmbeddingFunction[Embeddable]", found or default_embedding())

    def _get_collection(self, client: ClientAPI, *, check: bool) -> Collection:
        if self._embedding is None:
            self._embedding = self._own_embedding(client)
        spec = embedding_spec(self._embedding)
        if not check:
            return client.get_collection(COLLECTION, embedding_function=self._embedding)
        # embedding_function=None here: chromadb would reject a different function by
        # name before we could say what to do about it.
        found = client.get_or_create_collection(
            COLLECTION,
            embedding_function=None,
            configuration={"hnsw": {"space": "cosine"}, "embedding_function": self._embedding},
            metadata={EMBEDDING_META_KEY: spec},
        )
        stored = _stored_spec(found)
        if json.loads(stored) != json.loads(spec):
            built, wanted = describe_spec(stored), describe_spec(spec)
            own = option_name(stored)  # what --memory-embedding calls the store's own
            reopen = f"open it with --memory-embedding {own}, " if own else ""
            raise MemoryConfigError(
                f"memory store at {self.location} was built with embedding {built}, "
                f"but {wanted} was requested; vectors from different embeddings cannot be "
                f"compared. Fix: {reopen}use a new --memory-dir, or run `kernelcrew memory "
                "export` and recreate the store with the new embedding."
            )
        return client.get_collection(COLLECTION, embedding_function=self._embedding)

    # -- writing ---------------------------------------------------------------------

    def add(self, reflection: Reflection) -> None:
        """Add a reflection; adding the same id again replaces it."""
        self.add_many([reflection])

    def add_many(self, reflections: list[Reflection]) -> None:
        """Add several reflections in one locked write."""
        if not reflections:
            return
        latest = {r.id: r for r in reflections}  # Chroma rejects duplicate ids in one call
        with self._collection() as col:
            col.upsert(
                ids=list(latest),
                documents=[_situation(r) for r in latest.values()],
                metadatas=[r.to_metadata() for r in latest.values()],  # type: ignore[misc]
            )
            # An upsert that returned is not proof of a write: read the ids back.
            found = set(col.get(ids=list(latest), include=[])["ids"])
        missing = [i for i in latest if i not in found]
        if missing:
            raise MemoryUnavailable(
                f"memory store at {self.location}: {len(missing)} of {len(latest)} "
                "reflection(s) not found after writing them"
            )

    # -- reading ---------------------------------------------------------------------

    def list(self, limit: int | None = None, **filters: Any) -> list[Reflection]:
        """Reflections matching exact-value `filters` (see FILTER_FIELDS), oldest first."""
        unknown = set(filters) - set(FILTER_FIELDS)
        if unknown:
            raise TypeError(
                f"MemoryStore.list: unknown filter(s) {sorted(unknown)}; "
                f"use {', '.join(FILTER_FIELDS)}"
            )
        with self._collection() as col:
            got = col.get(where=_where(filters), include=["documents", "metadatas"])
        items = [
            _reflection(doc, meta)
            for doc, meta in zip(got["documents"] or [], got["metadatas"] or [])
        ]
        items.sort(key=lambda r: (r.created, r.id))
        return items if limit is None else items[:limit]

    def count(self) -> int:
        """Number of stored reflections."""
        with self._collection() as col:
            return col.count()

    def search(
        self,
        query_situation: Mapping[str, Any] | str,
        k: int = 5,
        family: str | None = None,
        backend: str | None = None,
    ) -> builtins.list[tuple[Reflection, float]]:
        """The `k` reflections most relevant to a situation, with cosine similarity.

        `query_situation` is a situation string or a mapping with `text` and any of
        operator, family, backend, bottleneck, change_kind. Results from the same family
        and backend come first, then the same backend, then anything; each tier is
        ranked by similarity.
        """
        if isinstance(query_situation, str):
            query = query_situation
        else:
            fields = dict(query_situation)
            family = family if family is not None else fields.get("family")
            backend = backend if backend is not None else fields.get("backend")
            query = situation_text(
                str(fields.get("text", "")),
                operator=fields.get("operator"),
                family=fields.get("family"),
                backend=fields.get("backend"),
                bottleneck=fields.get("bottleneck"),
                change_kind=fields.get("change_kind"),
            )
        if k <= 0:
            return []
        tiers: list[dict[str, Any] | None] = []
        if family and backend:
            tiers.append(_where({"family": family, "backend": backend}))
        elif family:
            tiers.append(_where({"family": family}))
        if backend:
            tiers.append(_where({"backend": backend}))
        tiers.append(None)

        results: list[tuple[Reflection, float]] = []
        seen: set[str] = set()
        with self._collection() as col:
            total = col.count()
            for where in tiers:
                if len(results) >= k or total == 0:
                    break
                # Ask for enough to fill k after dropping what earlier tiers returned.
                n = min(total, k + len(seen))
                got = col.query(
                    query_texts=[query],
                    n_results=n,
                    where=where,
                    include=["documents", "metadatas", "distances"],
                )
                for rid, doc, meta, dist in zip(
                    got["ids"][0],
                    (got["documents"] or [[]])[0],
                    (got["metadatas"] or [[]])[0],
                    (got["distances"] or [[]])[0],
                ):
                    if rid in seen or len(results) >= k:
                        continue
                    seen.add(rid)
                    results.append((_reflection(doc, meta), 1.0 - float(dist)))
        return results

    def change_kind_stats(
        self, family: str | None = None, backend: str | None = None
    ) -> dict[str, ChangeKindStats]:
        """How each kind of change fared before, optionally within a family/backend."""
        with self._collection() as col:
            got = col.get(
                where=_where({"family": family, "backend": backend}), include=["metadatas"]
            )
        tried: dict[str, int] = defaultdict(int)
        accepted: dict[str, int] = defaultdict(int)
        helped: dict[str, int] = defaultdict(int)
        failed: dict[str, int] = defaultdict(int)
        speedups: dict[str, float] = defaultdict(float)
        for meta in got["metadatas"] or []:
            kind = str(meta["change_kind"])
            outcome = str(meta.get("outcome") or "")  # "" in records of schema 1
            tried[kind] += 1
            accepted[kind] += bool(meta["accepted"])
            helped[kind] += bool(meta["accepted"]) or outcome in HELPED_OUTCOMES
            failed[kind] += outcome in FAILED_OUTCOMES
            speedups[kind] += float(meta["speedup"])  # type: ignore[arg-type]
        return {
            kind: ChangeKindStats(tried=n, accepted=accepted[kind], helped=helped[kind],
                                  failed=failed[kind], mean_speedup=speedups[kind] / n)
            for kind, n in sorted(tried.items())
        }

    def export_markdown(self) -> str:
        """The experience file: reflections grouped by family, then bottleneck."""
        return render_markdown(self.list())


class NullMemory:
    """Stands in for an unusable store: remembers nothing, finds nothing."""

    available = False

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def add(self, reflection: Reflection) -> None:
        return None

    def add_many(self, reflections: list[Reflection]) -> None:
        return None

    def list(self, limit: int | None = None, **filters: Any) -> list[Reflection]:
        return []

    def count(self) -> int:
        return 0

    def search(
        self,
        query_situation: Mapping[str, Any] | str,
        k: int = 5,
        family: str | None = None,
        backend: str | None = None,
    ) -> builtins.list[tuple[Reflection, float]]:
        return []

    def change_kind_stats(
        self, family: str | None = None, backend: str | None = None
    ) -> dict[str, ChangeKindStats]:
        return {}

    def export_markdown(self) -> str:
        return render_markdown([], note=f"memory unavailable: {self.reason}")


def render_markdown(reflections: list[Reflection], note: str | None = None) -> str:
    """Group reflections by family, then bottleneck, one bullet each."""
    lines = ["# kernelcrew experience", ""]
    if note:
        lines += [f"_{note}_", ""]
    groups: dict[str, dict[str, list[Reflection]]] = defaultdict(lambda: defaultdict(list))
    for r in reflections:
        groups[r.family][r.bottleneck].append(r)
    for family in sorted(groups):
        lines += [f"## {family}", ""]
        for bottleneck in sorted(groups[family]):
            lines += [f"### {bottleneck}", ""]
            for r in sorted(groups[family][bottleneck], key=lambda r: (r.created, r.id)):
                verdict = r.verdict
                text = " ".join(r.text.split())
                lines.append(
                    f"- **{r.operator}** · `{r.change_kind}` · {r.author} · {verdict} · "
                    f"{r.speedup:.2f}x ({r.backend}, {r.run_id}#{r.iteration}): {text}"
                )
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _http_client(url: str) -> ClientAPI:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise MemoryUnavailable(
            f"memory url {url!r} is not like http://127.0.0.1:8000 (scheme http or https)"
        )
    port = parts.port or (443 if parts.scheme == "https" else 8000)
    try:
        client = chromadb.HttpClient(
            host=parts.hostname, port=port, ssl=parts.scheme == "https", settings=_settings()
        )
        client.heartbeat()
    except Exception as exc:  # connection refused, DNS, TLS, HTTP errors alike
        raise MemoryUnavailable(f"chroma server at {url} unreachable: {_reason(exc)}") from exc
    return client
