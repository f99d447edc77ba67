"""The lmk-rag demo: ingest real manual pages into an embedded Qdrant Edge store, then ask it questions.

Offline: the pages are rendered from this machine's own manual (``man -P cat``; the licence texts in
/usr/share/common-licenses stand in where man is missing), and the model is the packaged all-MiniLM-L6-v2.
The pages go straight into the store: the demo writes nothing but the store folder (``demo_store/``, which
git ignores).

    python examples/demo.py [--store demo_store] [--pages 40]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from lmk_rag import LandmarkStore

PAGES = [
    "tar", "gzip", "grep", "sed", "find", "ls", "cp", "mv", "rm", "chmod", "chown", "ln", "df", "du", "ps",
    "kill", "top", "ssh", "scp", "git", "make", "gcc", "python3", "curl", "wget", "rsync", "sort", "uniq",
    "cut", "head", "tail", "wc", "xargs", "diff", "patch", "tee", "date", "env", "man", "bash", "awk", "less",
    "mount", "crontab", "systemctl", "journalctl", "ip", "zip", "unzip", "perl",
]
QUESTIONS = [
    "compress files with Lempel-Ziv coding",
    "print lines that match a regular expression",
    "copy files to a remote host over an encrypted connection",
    "which option makes the archive listing verbose",
    "report file system disk space usage",
]


def render_pages(limit: int) -> list[tuple[str, str, dict[str, str]]]:
    """Up to ``limit`` manual pages of this machine as ``(doc_id, text, metadata)``; licence texts stand in
    when fewer than five pages render."""
    documents = []
    if shutil.which("man"):
        for page in PAGES:
            result = subprocess.run(
                ["man", "-P", "cat", page], capture_output=True, text=True, env={**os.environ, "MANWIDTH": "100"}
            )
            if result.returncode == 0 and len(result.stdout) > 500:
                documents.append((page, result.stdout, {"source": f"man {page}"}))
            if len(documents) == limit:
                break
    if len(documents) < 5:
        for licence in sorted(Path("/usr/share/common-licenses").glob("*"))[:limit]:
            if licence.is_file():
                documents.append((licence.name, licence.read_text(errors="replace"), {"source": str(licence)}))
    return documents


def main() -> None:
    """Ingest, then query with and without the landmark rerank."""
    parser = argparse.ArgumentParser(description="lmk-rag demo: ingest manual pages, then query them")
    parser.add_argument("--store", default="demo_store")
    parser.add_argument("--pages", type=int, default=40)
    args = parser.parse_args()

    store_dir = Path(args.store)
    documents = render_pages(args.pages)
    print(f"Rendered {len(documents)} documents, {sum(len(text) for _, text, _ in documents) / 1e6:.1f} MB of text.")

    with LandmarkStore(path=store_dir) as store:
        start = time.perf_counter()
        nodes = store.upsert_documents(documents)
        print(f"Ingested {nodes} nodes in {time.perf_counter() - start:.0f} s into {store_dir} (Qdrant Edge, on disk).")
        print(f"Encoder: {store.encoder}\n")
        for question in QUESTIONS:
            print(f"Q: {question}")
            for rank, hit in enumerate(store.search(question, k=3, rerank="chunks"), start=1):
                snippet = " ".join(hit.text.split())[:110]
                print(f"  {rank}. {hit.doc_id:<10} {hit.score:6.3f}  chars {hit.span[0]}-{hit.span[1]}  {snippet}")
            print()
    print(f"The store persists: try  .venv/bin/lmk-rag query \"archive files\" --store {store_dir}")


if __name__ == "__main__":
    main()
