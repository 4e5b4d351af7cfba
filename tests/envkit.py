"""A small, correct, hand-written environment ("City Library") built through
synth.folder.format.write_env, for tests of the runtime, gates, server and exports.

Four tables with foreign keys, six tools (three read, three write; ToolError on
bad input), four tasks with gold tool calls and verifiers that fail before the
agent acts and pass after the gold calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synth.artifacts import Scenario, Task, ToolCall, ToolParam, ToolSpec
from synth.folder.format import EnvDraft, write_env
from synth.folder.toolschema import params_to_schema

SCHEMA_SQL = """\
CREATE TABLE members (
  member_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  email TEXT NOT NULL UNIQUE,
  tier TEXT NOT NULL DEFAULT 'standard' CHECK (tier IN ('standard', 'premium')),
  max_loans INTEGER NOT NULL CHECK (max_loans > 0),
  joined_on TEXT NOT NULL
);
CREATE TABLE books (
  book_id INTEGER PRIMARY KEY,
  isbn TEXT NOT NULL UNIQUE,
  title TEXT NOT NULL,
  author TEXT NOT NULL,
  genre TEXT NOT NULL CHECK (genre IN ('fantasy', 'science_fiction', 'mystery', 'history', 'science')),
  published_year INTEGER,
  total_copies INTEGER NOT NULL CHECK (total_copies >= 0),
  available_copies INTEGER NOT NULL,
  CHECK (available_copies BETWEEN 0 AND total_copies)
);
CREATE TABLE loans (
  loan_id INTEGER PRIMARY KEY,
  book_id INTEGER NOT NULL REFERENCES books(book_id),
  member_id INTEGER NOT NULL REFERENCES members(member_id),
  loaned_on TEXT NOT NULL,
  due_on TEXT NOT NULL,
  returned_on TEXT,
  created_at TEXT NOT NULL
);
CREATE INDEX idx_loans_member ON loans(member_id);
CREATE TABLE reservations (
  reservation_id INTEGER PRIMARY KEY,
  book_id INTEGER NOT NULL REFERENCES books(book_id),
  member_id INTEGER NOT NULL REFERENCES members(member_id),
  reserved_on TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'fulfilled', 'cancelled'))
);
"""

DATA_SQL = """\
INSERT INTO members (member_id, name, email, tier, max_loans, joined_on) VALUES
  (1, 'Ana Souza', 'ana.souza@example.com', 'premium', 8, '2019-03-14'),
  (2, 'Maya Patel', 'maya.patel@example.com', 'standard', 3, '2021-07-02'),
  (3, 'Tom Becker', 'tom.becker@example.com', 'standard', 3, '2022-01-20'),
  (4, 'Liu Wei', 'liu.wei@example.com', 'premium', 8, '2020-11-05'),
  (5, 'Grace Okafor', 'grace.okafor@example.com', 'standard', 3, '2023-02-11');
INSERT INTO books (book_id, isbn, title, author, genre, published_year, total_copies, available_copies) VALUES
  (1, '9780441478125', 'The Left Hand of Darkness', 'Ursula K. Le Guin', 'science_fiction', 1969, 3, 2),
  (2, '9780547773742', 'A Wizard of Earthsea', 'Ursula K. Le Guin', 'fantasy', 1968, 2, 1),
  (3, '9780441172719', 'Dune', 'Frank Herbert', 'science_fiction', 1965, 4, 3),
  (4, '9780451528018', 'The Hound of the Baskervilles', 'Arthur Conan Doyle', 'mystery', 1902, 2, 0),
  (5, '9780062316097', 'Sapiens', 'Yuval Noah Harari', 'history', 2011, 2, 2),
  (6, '9780553380163', 'A Brief History of Time', 'Stephen Hawking', 'science', 1988, 1, 0),
  (7, '9780756404741', 'The Name of the Wind', 'Patrick Rothfuss', 'fantasy', 2007, 2, 1),
  (8, '9780062693662', 'Murder on the Orient Express', 'Agatha Christie', 'mystery', 1934, 3, 2);
INSERT INTO loans (loan_id, book_id, member_id, loaned_on, due_on, returned_on, created_at) VALUES
  (1, 1, 3, '2024-05-20', '2024-06-03', NULL, '2024-05-20T10:12:00'),
  (2, 2, 5, '2024-05-21', '2024-06-04', NULL, '2024-05-21T11:00:00'),
  (3, 3, 4, '2024-05-22', '2024-06-05', NULL, '2024-05-22T09:30:00'),
  (4, 4, 3, '2024-05-23', '2024-06-06', NULL, '2024-05-23T16:45:00'),
  (5, 4, 5, '2024-05-24', '2024-06-07', NULL, '2024-05-24T12:05:00'),
  (6, 6, 5, '2024-05-25', '2024-06-08', NULL, '2024-05-25T14:20:00'),
  (7, 7, 1, '2024-05-26', '2024-06-09', NULL, '2024-05-26T10:00:00'),
  (8, 8, 1, '2024-05-27', '2024-06-10', NULL, '2024-05-27T17:30:00'),
  (9, 5, 2, '2024-04-01', '2024-04-15', '2024-04-12', '2024-04-01T10:00:00'),
  (10, 3, 2, '2024-04-20', '2024-05-04', '2024-05-02', '2024-04-20T15:10:00');
INSERT INTO reservations (reservation_id, book_id, member_id, reserved_on, status) VALUES
  (1, 6, 2, '2024-05-28', 'active');
"""

GENRES = ["fantasy", "science_fiction", "mystery", "history", "science"]


def _tool(name: str, description: str, read_only: bool, params: list[ToolParam]) -> ToolSpec:
    return ToolSpec(name=name, description=description, read_only=read_only, parameters=params_to_schema(params))


TOOLS = [
    _tool("search_books", "Search the catalogue by title or author; returns matching books with copy counts.", True, [
        ToolParam(name="query", type="string", description="Part of a title or an author's name"),
        ToolParam(name="genre", type="string", required=False, enum=GENRES, description="Only this genre"),
        ToolParam(name="available_only", type="boolean", required=False,
                  description="Only books with a copy on the shelf"),
    ]),
    _tool("get_member", "Look a member up by email; returns their id, tier, loan limit and active loan count.",
          True, [ToolParam(name="email", type="string", description="The member's email address")]),
    _tool("list_loans", "List a member's loans with book titles and dates.", True, [
        ToolParam(name="member_id", type="integer"),
        ToolParam(name="status", type="string", required=False, enum=["active", "returned", "all"],
                  description="Which loans to list (default: active)"),
    ]),
    _tool("checkout_book", "Lend a book to a member for a number of days (default 14, at most 28); "
          "fulfils the member's reservation of that book.", False, [
        ToolParam(name="member_id", type="integer"),
        ToolParam(name="book_id", type="integer"),
        ToolParam(name="days", type="integer", required=False, description="Loan period in days"),
    ]),
    _tool("return_book", "Record the return of a loaned book and put the copy back on the shelf.", False, [
        ToolParam(name="loan_id", type="integer"),
    ]),
    _tool("reserve_book", "Put a member on the waiting list for a book that has no copy available.", False, [
        ToolParam(name="member_id", type="integer"),
        ToolParam(name="book_id", type="integer"),
    ]),
]

TOOL_BODIES = {
    "search_books": '''\
if not query.strip():
    raise ToolError("query must not be empty")
pattern = f"%{query.strip()}%"
sql = ("SELECT book_id, title, author, genre, published_year, available_copies, total_copies "
       "FROM books WHERE (title LIKE ? OR author LIKE ?)")
args = [pattern, pattern]
if genre is not None:
    sql += " AND genre = ?"
    args.append(genre)
if available_only:
    sql += " AND available_copies > 0"
sql += " ORDER BY title"
return [dict(row) for row in db.execute(sql, args)]
''',
    "get_member": '''\
row = db.execute(
    "SELECT member_id, name, email, tier, max_loans FROM members WHERE lower(email) = lower(?)",
    (email.strip(),),
).fetchone()
if row is None:
    raise ToolError(f"no member with email {email!r}")
member = dict(row)
member["active_loans"] = db.execute(
    "SELECT count(*) FROM loans WHERE member_id = ? AND returned_on IS NULL", (row["member_id"],)
).fetchone()[0]
return member
''',
    "list_loans": '''\
if db.execute("SELECT 1 FROM members WHERE member_id = ?", (member_id,)).fetchone() is None:
    raise ToolError(f"no member with id {member_id}")
status = status or "active"
sql = ("SELECT l.loan_id, l.book_id, b.title, l.loaned_on, l.due_on, l.returned_on "
       "FROM loans l JOIN books b ON b.book_id = l.book_id WHERE l.member_id = ?")
if status == "active":
    sql += " AND l.returned_on IS NULL"
elif status == "returned":
    sql += " AND l.returned_on IS NOT NULL"
sql += " ORDER BY l.loan_id"
return [dict(row) for row in db.execute(sql, (member_id,))]
''',
    "checkout_book": '''\
days = 14 if days is None else days
if not 1 <= days <= 28:
    raise ToolError("days must be between 1 and 28")
member = db.execute("SELECT member_id, max_loans FROM members WHERE member_id = ?", (member_id,)).fetchone()
if member is None:
    raise ToolError(f"no member with id {member_id}")
book = db.execute("SELECT book_id, title, available_copies FROM books WHERE book_id = ?", (book_id,)).fetchone()
if book is None:
    raise ToolError(f"no book with id {book_id}")
if book["available_copies"] < 1:
    raise ToolError(f"no copy of {book['title']!r} is available; reserve it instead")
active = db.execute(
    "SELECT count(*) FROM loans WHERE member_id = ? AND returned_on IS NULL", (member_id,)
).fetchone()[0]
if active >= member["max_loans"]:
    raise ToolError(f"member {member_id} already has {active} books out (limit {member['max_loans']})")
if db.execute(
    "SELECT 1 FROM loans WHERE member_id = ? AND book_id = ? AND returned_on IS NULL", (member_id, book_id)
).fetchone():
    raise ToolError("the member already has this book out")
today = datetime.date.today()
due = today + datetime.timedelta(days=days)
cur = db.execute(
    "INSERT INTO loans (book_id, member_id, loaned_on, due_on, created_at) VALUES (?, ?, ?, ?, ?)",
    (book_id, member_id, today.isoformat(), due.isoformat(), datetime.datetime.now().isoformat(timespec="seconds")),
)
db.execute("UPDATE books SET available_copies = available_copies - 1 WHERE book_id = ?", (book_id,))
db.execute(
    "UPDATE reservations SET status = 'fulfilled' WHERE member_id = ? AND book_id = ? AND status = 'active'",
    (member_id, book_id),
)
return {"loan_id": cur.lastrowid, "book_id": book_id, "title": book["title"], "due_on": due.isoformat()}
''',
    "return_book": '''\
loan = db.execute("SELECT loan_id, book_id, returned_on FROM loans WHERE loan_id = ?", (loan_id,)).fetchone()
if loan is None:
    raise ToolError(f"no loan with id {loan_id}")
if loan["returned_on"] is not None:
    raise ToolError(f"loan {loan_id} was already returned on {loan['returned_on']}")
today = datetime.date.today().isoformat()
db.execute("UPDATE loans SET returned_on = ? WHERE loan_id = ?", (today, loan_id))
db.execute("UPDATE books SET available_copies = available_copies + 1 WHERE book_id = ?", (loan["book_id"],))
return {"loan_id": loan_id, "returned_on": today}
''',
    "reserve_book": '''\
if db.execute("SELECT 1 FROM members WHERE member_id = ?", (member_id,)).fetchone() is None:
    raise ToolError(f"no member with id {member_id}")
book = db.execute("SELECT title, available_copies FROM books WHERE book_id = ?", (book_id,)).fetchone()
if book is None:
    raise ToolError(f"no book with id {book_id}")
if book["available_copies"] > 0:
    raise ToolError(f"{book['title']!r} has copies available; check it out instead")
if db.execute(
    "SELECT 1 FROM reservations WHERE member_id = ? AND book_id = ? AND status = 'active'", (member_id, book_id)
).fetchone():
    raise ToolError("the member already has an active reservation for this book")
cur = db.execute(
    "INSERT INTO reservations (book_id, member_id, reserved_on) VALUES (?, ?, ?)",
    (book_id, member_id, datetime.date.today().isoformat()),
)
position = db.execute(
    "SELECT count(*) FROM reservations WHERE book_id = ? AND status = 'active'", (book_id,)
).fetchone()[0]
return {"reservation_id": cur.lastrowid, "title": book["title"], "queue_position": position}
''',
}


def _call(tool: str, **arguments: Any) -> ToolCall:
    return ToolCall(tool=tool, arguments=arguments)


# What a correct agent answers for each task (a write task's answer reports what was done).
GOLD_ANSWERS = {
    "task_01": "2 copies are available.",
    "task_02": "Dune is checked out to Maya Patel for 14 days.",
    "task_03": "Tom's two books are back: The Left Hand of Darkness and The Hound of the Baskervilles.",
    "task_04": "Ana Souza is on the waiting list for The Hound of the Baskervilles.",
}

TASKS = [
    Task(task_id="task_01", kind="read", difficulty="easy", split="train", expected_answer=2,
         instruction="How many copies of The Left Hand of Darkness can I borrow right now?",
         gold=[_call("search_books", query="Left Hand of Darkness")]),
    Task(task_id="task_02", kind="write", difficulty="medium", split="train", expected_answer=GOLD_ANSWERS["task_02"],
         instruction="This is Maya Patel (maya.patel@example.com). Please check out Dune for me "
                     "for the standard 14 days.",
         gold=[_call("get_member", email="maya.patel@example.com"), _call("search_books", query="Dune"),
               _call("checkout_book", member_id=2, book_id=3)]),
    Task(task_id="task_03", kind="write", difficulty="medium", split="train", expected_answer=GOLD_ANSWERS["task_03"],
         instruction="I'm Tom Becker (tom.becker@example.com) and I'm bringing back every book I have out.",
         gold=[_call("get_member", email="tom.becker@example.com"),
               _call("list_loans", member_id=3, status="active"),
               _call("return_book", loan_id=1), _call("return_book", loan_id=4)]),
    Task(task_id="task_04", kind="write", difficulty="medium", split="test", expected_answer=GOLD_ANSWERS["task_04"],
         instruction="Ana Souza (ana.souza@example.com) wants The Hound of the Baskervilles; if no copy "
                     "is in, put her on the waiting list for it.",
         gold=[_call("get_member", email="ana.souza@example.com"),
               _call("search_books", query="Hound of the Baskervilles"),
               _call("reserve_book", member_id=1, book_id=4)]),
]

VERIFIER_BODIES = {
    "task_01": '''\
book = query_rows(initial_db, "SELECT available_copies FROM books WHERE title = 'The Left Hand of Darkness'")
right = [book[0]["available_copies"]] if book else []
counts = {r["available_copies"] for r in query_rows(initial_db, "SELECT available_copies FROM books")}
return rubric([
    check("answer_says_two", bool(right) and states(answer, right, sorted(counts - set(right))), 2.0),
    check("database_unchanged", unchanged(initial_db, final_db)),
])
''',
    "task_02": '''\
changes = db_diff(initial_db, final_db)
new = changes.get("loans", {}).get("added", [])
loan = new[0] if len(new) == 1 else None


def copies(db):
    return {r["book_id"]: r["available_copies"] for r in db.execute("SELECT book_id, available_copies FROM books")}


expected = copies(initial_db)
expected[3] -= 1
period_ok = False
if loan is not None:
    period = datetime.date.fromisoformat(loan["due_on"]) - datetime.date.fromisoformat(loan["loaned_on"])
    period_ok = period.days == 14 and loan["returned_on"] is None
return rubric([
    check("exactly_one_new_loan", len(new) == 1),
    check("loan_is_maya_dune", loan is not None and loan["member_id"] == 2 and loan["book_id"] == 3, 2.0),
    check("loan_period_14_days", period_ok),
    check("only_dune_copies_changed", copies(final_db) == expected),
    check("nothing_else_changed", only_changed(changes, {"loans": {"added": True}, "books": {"rows": {3: ["available_copies"]}}})),
    check("answer_reports_the_loan", reports(answer, ["Dune"])),
])
''',
    "task_03": '''\
before = {r["loan_id"]: r for r in query_rows(initial_db, "SELECT * FROM loans")}
after = {r["loan_id"]: r for r in query_rows(final_db, "SELECT * FROM loans")}
toms = [i for i, loan in before.items() if loan["member_id"] == 3 and loan["returned_on"] is None]
books = [before[i]["book_id"] for i in toms]
titles = [r["title"] for r in query_rows(initial_db, "SELECT title FROM books WHERE book_id IN (%s)"
                                         % ",".join(str(b) for b in books))] if books else []
expected = {r["book_id"]: r["available_copies"] for r in query_rows(initial_db, "SELECT * FROM books")}
for book in books:
    expected[book] += 1
copies = {r["book_id"]: r["available_copies"] for r in query_rows(final_db, "SELECT * FROM books")}
returned = bool(toms) and all(i in after and after[i]["returned_on"] is not None for i in toms)
return rubric([
    check("all_tom_loans_returned", returned, 2.0),
    check("copies_back_on_shelf", copies == expected),
    check("nothing_else_changed", only_changed(db_diff(initial_db, final_db), {"loans": {"rows": {i: ["returned_on"] for i in toms}},
                                                                   "books": {"rows": {b: ["available_copies"] for b in books}}})),
    check("answer_reports_the_returns", reports(answer, titles)),
])
''',
    "task_04": '''\
changes = db_diff(initial_db, final_db)
new = changes.get("reservations", {}).get("added", [])
ok = len(new) == 1 and new[0]["member_id"] == 1 and new[0]["book_id"] == 4 and new[0]["status"] == "active"
return rubric([
    check("one_new_reservation", len(new) == 1),
    check("reservation_is_ana_hound", ok, 2.0),
    check("nothing_else_changed", only_changed(changes, {"reservations": {"added": True}})),
    check("answer_does_not_deny_it", not refuses(answer) and not answer_facts(answer, [])["hedged"]),
])
''',
}



def library_draft() -> EnvDraft:
    return EnvDraft(
        env_id="city_library",
        title="City Library",
        scenario=Scenario(
            name="City Library", category="public services", seed="library",
            description="A public library's circulation desk. Staff and members search the catalogue, look "
                        "members up, lend and take back books, and keep a waiting list for books with no copy "
                        "on the shelf. Members have a loan limit that depends on their tier.",
        ),
        schema_sql=SCHEMA_SQL, data_sql=DATA_SQL, tools=TOOLS, tool_bodies=TOOL_BODIES, tasks=TASKS,
        verifier_bodies=VERIFIER_BODIES, model="hand-written", status="verified",
        report={"note": "hand-written test env"},
        volatile_columns=["loans.loaned_on", "loans.due_on", "loans.returned_on", "loans.created_at",
                          "reservations.reserved_on"],
    )


def make_library_env(tmp_path: Path) -> Path:
    """Write the library env to tmp_path/city_library and return the folder."""
    return write_env(library_draft(), Path(tmp_path) / "city_library")


def run_gold(episode: Any) -> list[dict]:
    """Replay the episode's task's gold calls; returns the observations."""
    return [episode.call(c.tool, dict(c.arguments)) for c in episode.task.gold]


def served_library(tmp_path_factory: Any, name: str) -> Any:
    """A `synth serve` of the library env in a background thread (a module fixture's body: iterate it)."""
    from synth.use.server import background

    root = tmp_path_factory.mktemp(name)
    make_library_env(root / "envs")
    srv, _ = background(root)
    with srv:
        yield srv
