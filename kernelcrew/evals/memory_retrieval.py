"""Retrieval quality of the memory embeddings on a labelled set of reflections.

Each embedding gets its own real store (Chroma in a temporary folder) holding the set's
reflections; every query is searched as a plain string (no family or backend filter, so the
order is the embedding's alone) and scored by where its relevant reflections rank.

    python -m kernelcrew.evals.memory_retrieval [--embeddings hashed,minilm] [--json]

prints recall@1/3/5 and MRR per embedding and query kind (`docs/memory-embeddings.md`).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from kernelcrew.memory import MemoryStore, Reflection, embedding_by_name

DATA = Path(__file__).parent / "data" / "memory_retrieval.yaml"
KS = (1, 3, 5)


@dataclass(frozen=True)
class Query:
    text: str
    kind: str  # paraphrase | lexical
    relevant: tuple[str, ...]


@dataclass
class Scores:
    queries: int = 0
    recall: dict[int, float] = field(default_factory=dict)  # k -> mean recall@k
    mrr: float = 0.0


@dataclass
class Result:
    embedding: str
    by_kind: dict[str, Scores]  # "paraphrase", "lexical", "all"
    ranks: dict[str, list[int]]  # query text -> 1-based ranks of its relevant reflections
    embed_s: float  # wall time to add the reflections and run the queries


def load_set(path: Path = DATA) -> tuple[dict[str, Reflection], list[Query]]:
    """The labelled reflections (by label) and the queries, from the YAML file."""
    data = yaml.safe_load(path.read_text())
    reflections: dict[str, Reflection] = {}
    for item in data["reflections"]:
        label = item["id"]
        if label in reflections:
            raise ValueError(f"{path}: reflection id {label!r} appears twice")
        reflections[label] = Reflection(
            text=item["text"], operator=item["operator"], family=item["family"],
            backend=item["backend"], bottleneck=item["bottleneck"],
            change_kind=item["change"], author="eval", accepted=False, speedup=1.0,
            run_id=label, iteration=0)  # run_id carries the label back out of the store
    queries = []
    for q in data["queries"]:
        missing = set(q["relevant"]) - set(reflections)
        if missing:
            raise ValueError(f"{path}: query {q['text']!r} names unknown ids {sorted(missing)}")
        queries.append(Query(text=q["text"], kind=q["kind"], relevant=tuple(q["relevant"])))
    return reflections, queries


def score(ranks: list[list[int]], sizes: list[int]) -> Scores:
    """Mean recall@k and MRR over queries, from each query's relevant ranks (1-based)."""
    n = len(ranks)
    if n == 0:
        return Scores()
    recall = {k: sum(sum(r <= k for r in rs) / size for rs, size in zip(ranks, sizes)) / n
              for k in KS}
    mrr = sum(1.0 / min(rs) for rs in ranks) / n
    return Scores(queries=n, recall=recall, mrr=mrr)


def evaluate(embedding: str, store_dir: Path, path: Path = DATA) -> Result:
    """Fill a new store at `store_dir` with the set under `embedding`, run every query."""
    reflections, queries = load_set(path)
    t0 = time.perf_counter()
    store = MemoryStore.open(store_dir, embedding=embedding_by_name(embedding))
    store.add_many(list(reflections.values()))
    ranks: dict[str, list[int]] = {}
    for q in queries:
        hits = store.search(q.text, k=len(reflections))
        order = [r.run_id for r, _ in hits]
        ranks[q.text] = sorted(order.index(label) + 1 for label in q.relevant)
    elapsed = time.perf_counter() - t0
    by_kind: dict[str, Scores] = {}
    for kind in sorted({q.kind for q in queries}) + ["all"]:
        chosen = [q for q in queries if kind in ("all", q.kind)]
        by_kind[kind] = score([ranks[q.text] for q in chosen], [len(q.relevant) for q in chosen])
    return Result(embedding=embedding, by_kind=by_kind, ranks=ranks, embed_s=elapsed)


def markdown(results: list[Result]) -> str:
    head = "| embedding | queries | " + " | ".join(f"recall@{k}" for k in KS) + " | MRR |"
    lines = [head, "|" + " --- |" * (len(KS) + 3)]
    for res in results:
        for kind, s in res.by_kind.items():
            cells = " | ".join(f"{s.recall[k]:.2f}" for k in KS)
            lines.append(f"| {res.embedding} | {kind} ({s.queries}) | {cells} | {s.mrr:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelcrew.evals.memory_retrieval")
    parser.add_argument("--embeddings", default="hashed,minilm")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="kc-retrieval-") as tmp:
        for name in [n.strip() for n in args.embeddings.split(",") if n.strip()]:
            results.append(evaluate(name, Path(tmp) / name, args.data))
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
        return 0
    reflections, queries = load_set(args.data)
    print(f"{len(reflections)} reflections, {len(queries)} queries; python "
          f"{platform.python_version()} on {platform.machine()} ({platform.processor() or '?'})")
    print(markdown(results))
    for res in results:
        print(f"{res.embedding}: {res.embed_s:.1f} s to embed the set and run the queries")
    return 0




if __name__ == "__main__":
    sys.exit(main())
