"""`synth view`: the FastAPI app. Pages are rendered on the server from jinja2
templates (templates/view/); the little CSS and JavaScript they use ships in
synth/view/static/. Everything shown is read from disk on request; only review
decisions are written, and env code runs only in sandbox workers (live.py)."""

from __future__ import annotations

import contextlib
import functools
import getpass
import json
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import anyio
import jinja2
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from synth import __version__
from synth.errors import SynthError
from synth.folder.review import DECISIONS, write_review
from synth.view import runs as runs_mod
from synth.view.dbread import ROWS_PAGE, table_page
from synth.view.envdata import load_detail
from synth.view.forms import form_arguments, form_fields, parse_form
from synth.view.guard import LocalGuard, is_loopback, new_token
from synth.view.index import EnvIndex, filter_rows, sort_rows, url_keys
from synth.view.live import Live
from synth.view.sources import Sources
from synth.view.svg import bar_chart, funnel_chart, schema_diagram

STATIC = {"view.css": "text/css; charset=utf-8", "view.js": "text/javascript; charset=utf-8"}


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str, sort_keys=False)


def _cost(value: Any) -> str:
    return "-" if value is None else f"${value:,.4f}"


def _num(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if isinstance(value, (int, float)) else str(value)


@functools.lru_cache(maxsize=1)
def templates() -> jinja2.Environment:
    """The page templates (one compiled set per process)."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("synth_templates", "view"),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters.update(pretty=_pretty, cost=_cost, num=_num, urlq=lambda s: quote(str(s), safe=""))
    env.globals.update(version=__version__, bar_chart=bar_chart, funnel_chart=funnel_chart,
                       schema_diagram=schema_diagram, decisions=DECISIONS)
    return env


def create_app(sources: Sources, *, host: str = "127.0.0.1", reviewer: str | None = None,
               workers: int = 2, token: str | None = None, allowed_hosts: list[str] | tuple = ()) -> Any:
    """The viewer over `sources`, wrapped in the Host/Origin/token guard for a server bound to
    `host` (off loopback a token is required: `token`, or a new one; the guard's `.token`)."""
    index = EnvIndex(sources)
    live = Live(workers=workers)
    tpl = templates()
    default_reviewer = reviewer if reviewer is not None else _user()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(live.close)

    app = FastAPI(title="synth view", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.state.index, app.state.live = index, live

    def render(name: str, request: Request, status: int = 200, **context: Any) -> HTMLResponse:
        html = tpl.get_template(name).render(request_path=request.url.path, **context)
        return HTMLResponse(html, status_code=status)

    def env_row(key: str):
        row = index.get(key)
        if row is None:
            raise HTTPException(404, f"no env {key!r} here; see the env list")
        return row

    def run_paths() -> dict[str, Path]:
        return {k: p for p, k in url_keys(sources.runs()).items()}

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> HTMLResponse:
        return render("error.html", request, status=exc.status_code, message=exc.detail)

    @app.get("/static/{name}")
    def static(name: str) -> Response:
        if name not in STATIC:
            raise HTTPException(404, "no such file")
        data = resources.files("synth.view").joinpath("static", name).read_bytes()
        return Response(data, media_type=STATIC[name], headers={"cache-control": "max-age=300"})

    @app.get("/", response_class=HTMLResponse)
    def home(request: Request) -> HTMLResponse:
        runs = [(k, runs_mod.load_run(p)) for k, p in run_paths().items()]
        rows = index.rows()
        by_status: dict[str, int] = {}
        by_decision: dict[str, int] = {}
        for r in rows:
            by_status[r.status] = by_status.get(r.status, 0) + 1
            by_decision[r.decision or "undecided"] = by_decision.get(r.decision or "undecided", 0) + 1
        return render("home.html", request, runs=runs, total=len(rows), by_status=by_status, by_decision=by_decision)

    @app.get("/runs/{key}", response_class=HTMLResponse)
    def run_page(request: Request, key: str, page: int = 1, stage: str = "", status: str = "",
                 subject: str = "", cached: str = "") -> HTMLResponse:
        path = run_paths().get(key)
        if path is None:
            raise HTTPException(404, f"no run {key!r} here")
        run = runs_mod.load_run(path)
        filters = {"stage": stage, "status": status, "subject": subject, "cached": cached}
        calls, matching = runs_mod.calls(path, filters, page)
        envs = index.by_env_id()
        costs = runs_mod.env_costs(path)
        outcomes = run.summary.get("envs") or []
        verified = [{"env_id": o.get("env_id"), **costs.get(o.get("env_id"), {})}
                    for o in outcomes if isinstance(o, dict) and o.get("status") == "verified"]
        query = urlencode({k: v for k, v in filters.items() if v})
        stages = runs_mod.stage_usage(path)
        charts = [bar_chart([(s["stage"], s[field]) for s in stages], fmt=fmt, title=title) for field, title, fmt in
                  (("tokens", "tokens", _num), ("cost", "cost (USD)", _cost),
                   ("seconds", "model time (s)", lambda v: f"{v:,.1f}"))]
        return render("run.html", request, key=key, run=run, stages=stages, stage_charts=charts,
                      items=runs_mod.item_counts(path), failures=runs_mod.failure_groups(run), envs=envs,
                      verified=verified, calls=calls, matching=matching, page=page,
                      pages=max(1, -(-matching // runs_mod.CALLS_PAGE)), filters=filters, query=query,
                      choices=runs_mod.call_choices(path))

    @app.get("/envs", response_class=HTMLResponse)
    def env_list(request: Request, status: str = "", category: str = "", gate: str = "", decision: str = "",
                 q: str = "", sort: str = "id", desc: int = 0) -> HTMLResponse:
        rows = index.rows()
        shown = sort_rows(filter_rows(rows, status=status, category=category, gate_failed=gate, decision=decision,
                                      q=q), sort, bool(desc))
        filters = {"status": status, "category": category, "gate": gate, "decision": decision, "q": q}
        return render("envs.html", request, rows=shown, total=len(rows), filters=filters, sort=sort, desc=desc,
                      query=urlencode({k: v for k, v in filters.items() if v}),
                      statuses=sorted({r.status for r in rows}),
                      categories=sorted({r.category for r in rows if r.category}),
                      gate_names=sorted({g for r in rows for g in r.gates}))

    @app.get("/envs/{key}", response_class=HTMLResponse)
    def env_page(request: Request, key: str) -> HTMLResponse:
        row = env_row(key)
        detail = load_detail(row.path)
        return render("env.html", request, row=row, d=detail, reviewer=default_reviewer)

    @app.get("/envs/{key}/tables/{table}", response_class=HTMLResponse)
    def table_browser(request: Request, key: str, table: str, page: int = 1) -> HTMLResponse:
        row = env_row(key)
        try:
            cols, rows, total = table_page(row.path, table, page)
        except KeyError:
            raise HTTPException(404, f"env {row.id} has no table {table!r}") from None
        except Exception as exc:  # noqa: BLE001 - an unreadable database is shown, not raised
            raise HTTPException(500, f"db/initial.sqlite of {row.id} cannot be read: {exc}") from None
        return render("table.html", request, row=row, table=table, cols=cols, rows=rows, total=total,
                      page=page, pages=max(1, -(-total // ROWS_PAGE)))

    def task_or_404(key: str, task_id: str):
        row = env_row(key)
        detail = load_detail(row.path)
        task = detail.task(task_id)
        if task is None:
            raise HTTPException(404, f"env {row.id} has no task {task_id!r}")
        return row, detail, task

    @app.get("/envs/{key}/tasks/{task_id}", response_class=HTMLResponse)
    def task_page(request: Request, key: str, task_id: str) -> HTMLResponse:
        row, detail, task = task_or_404(key, task_id)
        return render("task.html", request, row=row, d=detail, task=task, replay=None, replay_error=None)

    @app.post("/envs/{key}/tasks/{task_id}/replay", response_class=HTMLResponse)
    async def replay(request: Request, key: str, task_id: str) -> HTMLResponse:
        row, detail, task = task_or_404(key, task_id)
        result, error = None, None
        try:
            result = await anyio.to_thread.run_sync(live.replay, row.path, task_id)
        except SynthError as exc:
            error = str(exc)
        return render("task.html", request, row=row, d=detail, task=task, replay=result, replay_error=error)

    @app.post("/envs/{key}/review")
    async def review(request: Request, key: str) -> Response:
        row = env_row(key)
        form = parse_form(await request.body())
        decision = (form.get("decision") or [""])[0]
        if decision not in DECISIONS:
            raise HTTPException(400, f"decision must be one of {', '.join(DECISIONS)}")
        write_review(row.path, decision, (form.get("note") or [""])[0], (form.get("reviewer") or [""])[0])
        return RedirectResponse(f"/envs/{quote(key)}#review", status_code=303)

    @app.post("/envs/{key}/try")
    async def try_open(request: Request, key: str) -> Response:
        row = env_row(key)
        form = parse_form(await request.body())
        task_id = (form.get("task_id") or [""])[0] or None
        try:
            session = await anyio.to_thread.run_sync(live.open, key, row.path, task_id)
        except SynthError as exc:
            raise HTTPException(409, f"cannot open an episode of {row.id}: {exc}") from None
        return RedirectResponse(f"/try/{session.id}", status_code=303)

    def session_or_404(sid: str):
        try:
            return live.session(sid)
        except KeyError:
            raise HTTPException(404, "this Try-it episode is closed or expired; open a new one from the task page") \
                from None

    @app.get("/try/{sid}", response_class=HTMLResponse)
    def try_page(request: Request, sid: str) -> HTMLResponse:
        session = session_or_404(sid)
        row = env_row(session.env_key)
        env = live.env(session.path)
        tools = [{"spec": t, "fields": form_fields(t.parameters)} for t in env.tools]
        task = env.tasks.get(session.task_id) if session.task_id else None
        return render("try.html", request, row=row, s=session, tools=tools, task=task)

    @app.post("/try/{sid}/call/{tool}")
    async def try_call(request: Request, sid: str, tool: str) -> Response:
        session = session_or_404(sid)
        env = live.env(session.path)
        spec = next((t for t in env.tools if t.name == tool), None)
        if spec is None:
            raise HTTPException(404, f"env {env.id} has no tool {tool!r}")
        arguments = form_arguments(parse_form(await request.body()), spec.parameters)
        await anyio.to_thread.run_sync(live.call, sid, tool, arguments)
        return RedirectResponse(f"/try/{sid}#step-{len(session.steps)}", status_code=303)

    @app.post("/try/{sid}/evaluate")
    async def try_evaluate(request: Request, sid: str) -> Response:
        session_or_404(sid)
        answer = (parse_form(await request.body()).get("answer") or [""])[0]
        await anyio.to_thread.run_sync(live.evaluate, sid, answer.strip() or None)
        return RedirectResponse(f"/try/{sid}#reward", status_code=303)

    @app.post("/try/{sid}/close")
    def try_close(sid: str) -> Response:
        session = session_or_404(sid)
        live.end(sid)
        where = f"/envs/{quote(session.env_key)}"
        if session.task_id:
            where += f"/tasks/{quote(session.task_id)}"
        return RedirectResponse(where, status_code=303)

    if token is None and not is_loopback(host):
        token = new_token()
    return LocalGuard(app, host, token=token, allowed_hosts=allowed_hosts)


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in some containers
        return ""
