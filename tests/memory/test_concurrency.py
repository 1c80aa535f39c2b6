"""Several real processes writing into one local store at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kernelcrew.memory import MemoryStore

REPO = Path(__file__).resolve().parents[2]
PER_WRITER = 20

WRITER = """
import sys, time
from pathlib import Path
from kernelcrew.memory import MemoryStore, Reflection

path, author, go = sys.argv[1], sys.argv[2], Path(sys.argv[3])
store = MemoryStore.open(path)
print("ready", flush=True)
deadline = time.monotonic() + 30
while not go.exists():
    if time.monotonic() > deadline:
        sys.exit("never told to start")
    time.sleep(0.005)
for i in range(int(sys.argv[4])):
    store.add(Reflection(
        text=f"{author} attempt {i}: unrolled by {i}", operator="softmax",
        family="reduction", backend="cpu", change_kind="simd", author=author,
        accepted=i % 2 == 0, speedup=1.0 + i / 10, run_id=f"run-{author}", iteration=i,
    ))
"""


def test_three_processes_add_concurrently_without_losing_records(
    tmp_path: Path, make_reflection
) -> None:
    path = tmp_path / "memory"
    go = tmp_path / "go"
    # Opened, written and searched before the writers run (so any in-memory index is
    # loaded): it must still see and search everything they add.
    # hashed keeps it quick; the writers open with auto and so follow the store's own.
    store = MemoryStore.open(path, embedding="hashed")
    store.add(make_reflection(author="parent"))
    assert len(store.search({"family": "reduction"}, k=5)) == 1
    authors = ["agent-a", "agent-b", "agent-c"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), author, str(go), str(PER_WRITER)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for author in authors
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready", proc.stderr
        go.touch()  # all writers start together
        for proc in procs:
            _, err = proc.communicate(timeout=90)
            assert proc.returncode == 0, err
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    total = len(authors) * PER_WRITER + 1
    listed = store.list()
    assert len(listed) == total
    assert {(r.author, r.iteration) for r in listed} == {("parent", 0)} | {
        (a, i) for a in authors for i in range(PER_WRITER)
    }
    # Every record is in the vector index too, not only in the SQL tables.
    assert len(store.search({"family": "reduction", "text": "unrolled"}, k=total + 10)) == total
    assert store.change_kind_stats()["simd"]["tried"] == total
