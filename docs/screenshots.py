"""Screenshots of `synth view` for the README, taken in Debian's Chromium (Playwright).

    python docs/screenshots.py [OUTPUT_FOLDER]

OUTPUT_FOLDER is what `synth run` wrote (default: the offline demo is run into a
temp folder first). PNGs are written to docs/view-*.png; the check-loop picture
is taken only when report.json records repairs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent / "tests"))

from playwright.sync_api import sync_playwright  # noqa: E402
from viewkit import CHROMIUM_ARGS, chromium_path  # noqa: E402

from synth.use.server.run import BackgroundServer  # noqa: E402
from synth.view.app import create_app  # noqa: E402
from synth.view.sources import resolve  # noqa: E402

ENV = "maple_street_public_library"


def demo(into: Path) -> Path:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    subprocess.run([sys.executable, "-m", "synth", "run", "--plain", "--out", str(into)], check=True, env=env)
    return into


def shoot(out: Path) -> list[Path]:
    browser_path = chromium_path()
    if browser_path is None:
        raise SystemExit("Chromium not found: apt-get install chromium")
    run = next((out / "runs").iterdir()).name
    written = []
    with BackgroundServer(create_app(resolve([out]), reviewer="reviewer")) as srv, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1360, "height": 860}, base_url=srv.url)
        page.set_default_timeout(60_000)

        def save(name: str, target=None) -> None:
            path = DOCS / f"view-{name}.png"
            (target or page).screenshot(path=str(path))
            written.append(path)

        page.goto(f"/runs/{run}")
        save("run")
        page.goto("/envs")
        save("envs")
        page.goto(f"/envs/{ENV}")
        save("env")
        save("schema", page.locator(".schema-wrap"))
        tool = page.locator("details.tool[data-tool=renew_loan]")
        tool.locator("> summary").click()
        tool.locator("details.test").first.locator("summary").click()
        tool.scroll_into_view_if_needed()
        save("tool-tests", tool)
        report = json.loads((out / "envs" / ENV / "report.json").read_text())
        if any(r.get("repairs") for r in report.get("check_loop", {}).get("rounds", [])):
            save("check-loop", page.locator(".check-round").first)
        page.goto(f"/envs/{ENV}/tasks/task_02")
        page.get_by_role("button", name="Replay gold trace live").click()
        page.wait_for_selector("#replay")
        page.locator("#gold").scroll_into_view_if_needed()
        save("replay")
        page.goto(f"/envs/{ENV}/tasks/task_04")
        page.get_by_role("button", name="Open an episode").click()
        page.wait_for_url(re.compile(r".*/try/"))
        form = page.locator("details[data-tool=find_members]")
        form.locator("> summary").click()
        form.locator("input[name='a.query']").fill("21000789")
        form.get_by_role("button", name="Call find_members").click()
        page.wait_for_selector("#step-1")
        page.locator("details[data-tool=find_members] > summary").click()
        page.evaluate("window.scrollTo(0, 0)")
        save("try")
        browser.close()
    return written


def main() -> None:
    if len(sys.argv) > 1:
        paths = shoot(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory(prefix="synth-shots-") as tmp:
            paths = shoot(demo(Path(tmp) / "generated"))
    for path in paths:
        print(path)


if __name__ == "__main__":
    main()
