"""`synth view` list-page benchmark: 1,000 env folders (copies of one demo env, plus one
broken folder) in a temp dir, the /envs page timed cold and warm.

    python bench/view.py [--env generated/envs/<env_id>] [--envs 1000] [--warm 20]

Without --env it uses the first env under generated/envs/, else builds the tests'
library env. Prints, in one process on the same folder:
  - cold: the first request (reads env.json + report.json of every folder);
  - warm: median and worst of the next requests (stats only, rows cached by mtime);
  - after touching 1% of the folders (only those are read again);
  - a filtered + sorted request;
  - the same page over 10 folders, as the per-env baseline: the ratio shows how
    the page scales (1.0 = linear in the number of envs).
Target: the 1,000-env list page renders in under a second, cold and warm.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from fastapi.testclient import TestClient  # noqa: E402

from synth.view.app import create_app  # noqa: E402
from synth.view.sources import resolve  # noqa: E402


def demo_env(given: str | None, work: Path) -> Path:
    if given:
        return Path(given)
    found = sorted((REPO / "generated" / "envs").glob("*/env.json"))
    if found:
        return found[0].parent
    from verifykit import make_verified_library

    return make_verified_library(work / "library")


def make_folders(src: Path, root: Path, n: int) -> None:
    """n copies of `src` with distinct ids, titles and categories, and one broken folder."""
    manifest = json.loads((src / "env.json").read_text())
    categories = ["education", "healthcare", "retail", "travel", "finance"]
    for i in range(n):
        dest = root / f"{manifest['id']}_{i:04d}"
        shutil.copytree(src, dest)
        m = dict(manifest, id=dest.name, title=f"{manifest['title']} #{i}", category=categories[i % 5],
                 status="verified" if i % 10 else "failed")
        (dest / "env.json").write_text(json.dumps(m, indent=2))
    broken = root / "zz_broken"
    broken.mkdir()
    (broken / "env.json").write_text("{ truncated")


def timed(client: TestClient, url: str) -> tuple[float, str]:
    start = time.perf_counter()
    page = client.get(url)
    took = time.perf_counter() - start
    assert page.status_code == 200, page.text[:500]
    return took, page.text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", help="env folder to copy (default: generated/envs/<first>, else the test library)")
    ap.add_argument("--envs", type=int, default=1000, help="number of copies")
    ap.add_argument("--warm", type=int, default=20, help="warm requests to time")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="synth-view-bench-") as tmp:
        work = Path(tmp)
        src = demo_env(args.env, work)
        print(f"env copied: {src} ({sum(f.stat().st_size for f in src.rglob('*') if f.is_file()) / 1e3:.0f} kB)")
        small, big = work / "small" / "envs", work / "big" / "envs"
        small.mkdir(parents=True)
        big.mkdir(parents=True)
        make_folders(src, small, 10)
        start = time.perf_counter()
        make_folders(src, big, args.envs)
        print(f"made {args.envs} copies + 1 broken folder in {time.perf_counter() - start:.1f}s")

        empty = work / "empty" / "envs"
        empty.mkdir(parents=True)
        with TestClient(create_app(resolve([empty])), base_url="http://127.0.0.1") as client:
            timed(client, "/envs")  # compiles the templates, so "cold" below measures reading the folders
        figures = {}
        for name, root in (("10", small), (str(args.envs), big)):
            with TestClient(create_app(resolve([root])), base_url="http://127.0.0.1") as client:
                cold, html = timed(client, "/envs")
                rows = html.count("data-env=")
                assert rows == len(list(root.iterdir())), (rows, name)
                assert "env.json is unreadable" in html  # the broken folder has its own row
                warm = [timed(client, "/envs")[0] for _ in range(args.warm)]
                figures[name] = (cold, statistics.median(warm))
                print(f"{name:>5} envs: {rows} rows, {len(html) / 1e6:.2f} MB of HTML; cold {cold * 1e3:.0f} ms, "
                      f"warm median {statistics.median(warm) * 1e3:.0f} ms (worst {max(warm) * 1e3:.0f} ms)")
                if root is big:
                    touched = sorted(root.iterdir())[: max(1, args.envs // 100)]
                    for d in touched:
                        if (d / "report.json").exists():
                            os.utime(d / "report.json")
                    took, _ = timed(client, "/envs")
                    print(f"        after touching {len(touched)} folders: {took * 1e3:.0f} ms")
                    took, html = timed(client, "/envs?status=verified&category=healthcare&q=%231&sort=cost&desc=1")
                    print(f"        filtered + sorted ({html.count('data-env=')} rows): {took * 1e3:.0f} ms")
        n = args.envs
        per_small = [v / 10 for v in figures["10"]]
        per_big = [v / n for v in figures[str(n)]]
        print(f"per env: cold {per_big[0] * 1e3:.3f} ms vs {per_small[0] * 1e3:.3f} ms at 10 envs "
              f"(ratio {per_big[0] / per_small[0]:.2f}); warm {per_big[1] * 1e3:.3f} ms vs "
              f"{per_small[1] * 1e3:.3f} ms (ratio {per_big[1] / per_small[1]:.2f})")
        cold, warm = figures[str(n)]
        verdict = "under" if max(cold, warm) < 1.0 else "OVER"
        print(f"{n}-env list page: cold {cold:.2f}s, warm {warm:.2f}s: {verdict} the 1 s target; "
              f"warm/cold {warm / cold:.2f}")


if __name__ == "__main__":
    main()
