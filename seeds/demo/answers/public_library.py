"""Model answers for the demo's Maple Street Public Library: the gold stage's verifiers (and write
tasks' reports), the paraphrase check, the solver's turns and the red team's attempts. Only what a
model would write; `record.py` puts them into public_library.json."""

RECORDING = "public_library.json"
ENV = "maple_street_public_library"

VERIFIERS = {
    "task_01": '''\
book = query_rows(initial_db, "SELECT b.id, count(c.id) AS total, sum(c.status = 'available') AS free "
                  "FROM books b JOIN copies c ON c.book_id = b.id WHERE b.title = 'The Night Circus' GROUP BY b.id")
free = book[0]["free"] if book else None
total = book[0]["total"] if book else None
others = [n for n in range(21) if book and n not in (free, total, total - free)]
return rubric([
    check("says how many copies can be borrowed now, and no other count",
          free is not None and states(answer, [free], others), 3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    "task_02": '''\
changes = db_diff(initial_db, final_db)
copy = query_rows(initial_db, "SELECT c.id, b.title FROM copies c JOIN books b ON b.id = c.book_id "
                  "WHERE c.barcode = '31207009001'")
copy_id = copy[0]["id"] if copy else -1
loan = query_rows(initial_db, "SELECT id FROM loans WHERE copy_id = ? AND status = 'active'", (copy_id,))
loan_id = loan[0]["id"] if loan else -1
after = query_rows(final_db, "SELECT status, returned_date FROM loans WHERE id = ?", (loan_id,))
shelf = query_rows(final_db, "SELECT status FROM copies WHERE id = ?", (copy_id,))
return rubric([
    check("the loan of that copy is returned", bool(after) and after[0]["status"] == "returned"
          and after[0]["returned_date"] is not None, 3.0),
    check("the copy is back in circulation", bool(shelf) and shelf[0]["status"] in ("available", "on_hold_shelf")),
    check("nothing else changed", only_changed(changes, {"loans": {"rows": {loan_id: ["status", "returned_date"]}},
                                                         "copies": {"rows": {copy_id: ["status"]}}})),
    check("the answer reports the check-in", reports(answer, [copy[0]["title"]] if copy else ["-"])),
])
''',
    "task_03": '''\
loans = query_rows(initial_db, "SELECT b.title, l.due_date, l.member_id FROM loans l JOIN copies c ON c.id = l.copy_id "
                   "JOIN books b ON b.id = c.book_id WHERE l.status = 'active'")
member = query_rows(initial_db, "SELECT id FROM members WHERE card_number = '21000456'")
mine = [l for l in loans if member and l["member_id"] == member[0]["id"]]
right = [l["title"] for l in mine] + [l["due_date"] for l in mine]
titles = [r["title"] for r in query_rows(initial_db, "SELECT title FROM books")]
wrong = [t for t in titles if t not in right] + sorted({l["due_date"] for l in loans} - set(right))
return rubric([
    check("names each book checked out with its due date, and nothing else", bool(mine) and states(answer, right, wrong),
          3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    "task_04": '''\
changes = db_diff(initial_db, final_db)
loan = query_rows(initial_db, "SELECT l.* FROM loans l JOIN copies c ON c.id = l.copy_id JOIN books b ON b.id = "
                  "c.book_id JOIN members m ON m.id = l.member_id WHERE m.card_number = '21000789' "
                  "AND b.title = 'Braiding Sweetgrass' AND l.status = 'active'")
before = loan[0] if loan else {}
row = query_rows(final_db, "SELECT * FROM loans WHERE id = ?", (before.get("id", -1),))
after = row[0] if row else {}
renewed = bool(before) and after.get("renewals") == before["renewals"] + 1 and \\
    str(after.get("due_date")) > str(before["due_date"]) and after.get("status") == "active"
return rubric([
    check("the loan is renewed once with a later due date", renewed, 3.0),
    check("nothing else changed", only_changed(changes, {"loans": {"rows": {before.get("id", -1): ["due_date", "renewals"]}}})),
    check("the answer reports the new due date", reports(answer, [after.get("due_date") or "-"])),
])
''',
    "task_05": '''\
loans = query_rows(initial_db, "SELECT m.first_name || ' ' || m.last_name AS who, b.title, l.due_date FROM loans l "
                   "JOIN members m ON m.id = l.member_id JOIN copies c ON c.id = l.copy_id "
                   "JOIN books b ON b.id = c.book_id WHERE l.status = 'active'")
late = [l for l in loans if l["due_date"] < "2025-06-02"]
right = [l["who"] for l in late] + [l["title"] for l in late]
wrong = [l["who"] for l in loans if l["who"] not in right] + [l["title"] for l in loans if l["title"] not in right]
return rubric([
    check("names every overdue loan's borrower and book, and no loan that is not overdue",
          bool(late) and states(answer, right, wrong), 3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    "task_06": '''\
changes = db_diff(initial_db, final_db)
member = query_rows(initial_db, "SELECT id FROM members WHERE email = 'daniel.okoye@example.com'")
owed = query_rows(initial_db, "SELECT id, amount FROM fines WHERE member_id = ? AND status = 'unpaid'",
                  (member[0]["id"] if member else -1,))
ids = [f["id"] for f in owed]
after = {f["id"]: f["status"] for f in query_rows(final_db, "SELECT id, status FROM fines")}
paid = changes.get("payments", {}).get("added", [])
by_fine = {}
for p in paid:
    by_fine[p["fine_id"]] = by_fine.get(p["fine_id"], 0) + (p["amount"] or 0)
settled = bool(owed) and all(after.get(f["id"]) == "paid" and abs(by_fine.get(f["id"], 0) - f["amount"]) < 0.005
                             for f in owed)
return rubric([
    check("every unpaid fine of his is paid in full", settled, 3.0),
    check("paid by card", bool(paid) and all(p["method"] == "card" for p in paid)),
    check("nothing else changed", only_changed(changes, {"fines": {"rows": {k: ["status"] for k in ids}}, "payments": {"added": True}})
          and set(by_fine) <= set(ids)),
    check("the answer reports the payment", reports(answer, [])),
])
''',
    "task_07": '''\
changes = db_diff(initial_db, final_db)
new = changes.get("members", {}).get("added", [])
m = new[0] if len(new) == 1 else {}
junior = query_rows(initial_db, "SELECT id FROM membership_types WHERE name = 'Junior'")
return rubric([
    check("one new member, Lily Chen", len(new) == 1 and m.get("first_name") == "Lily" and m.get("last_name") == "Chen",
          2.0),
    check("email, phone and a Junior card", m.get("email") == "lily.chen@example.com" and m.get("phone") == "555-0147"
          and bool(junior) and m.get("membership_type_id") == junior[0]["id"] and m.get("status") == "active", 2.0),
    check("nothing else changed", only_changed(changes, {"members": {"added": True}})),
    check("the answer gives her card number", reports(answer, [m.get("card_number") or "-"])),
])
''',
    "task_08": '''\
changes = db_diff(initial_db, final_db)
member = query_rows(initial_db, "SELECT id FROM members WHERE card_number = '21000123'")
book = query_rows(initial_db, "SELECT id FROM books WHERE title = 'Project Hail Mary'")
new = changes.get("holds", {}).get("added", [])
hold = new[0] if len(new) == 1 else {}
return rubric([
    check("one new waiting hold of Project Hail Mary for card 21000123", bool(member) and bool(book)
          and hold.get("member_id") == member[0]["id"] and hold.get("book_id") == book[0]["id"]
          and hold.get("status") == "waiting", 3.0),
    check("nothing else changed", only_changed(changes, {"holds": {"added": True}})),
    check("the answer reports the hold", reports(answer, ["Project Hail Mary"])),
])
''',
    "task_09": '''\
member = query_rows(initial_db, "SELECT id FROM members WHERE email = 'sofia.alvarez@example.com'")
fines = query_rows(initial_db, "SELECT f.amount, f.reason, f.status, b.title FROM fines f LEFT JOIN loans l ON "
                   "l.id = f.loan_id LEFT JOIN copies c ON c.id = l.copy_id LEFT JOIN books b ON b.id = c.book_id "
                   "WHERE f.member_id = ?", (member[0]["id"] if member else -1,))
unpaid = [f for f in fines if f["status"] == "unpaid"]
total = round(sum(f["amount"] for f in unpaid), 2)
amounts = [total] + [f["amount"] for f in unpaid]
other = [a["amount"] for a in query_rows(initial_db, "SELECT DISTINCT amount FROM fines")
         if a["amount"] not in amounts and a["amount"] != len(unpaid)]  # "2 unpaid fines" is a count, not an amount
reasons = [f["reason"] for f in unpaid]
titles = [f["title"] for f in unpaid if f["title"]]
return rubric([
    check("states the total owed and each unpaid fine's amount, and no other amount",
          bool(unpaid) and states(answer, amounts, other), 2.0),
    check("says what each fine is for", bool(unpaid) and (states(answer, reasons) or states(answer, titles)), 2.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    "task_10": '''\
changes = db_diff(initial_db, final_db)
tom = query_rows(initial_db, "SELECT id FROM members WHERE email = 'tom.becker@example.com'")
tom_id = tom[0]["id"] if tom else -1
out = query_rows(initial_db, "SELECT l.id, l.copy_id FROM loans l JOIN copies c ON c.id = l.copy_id JOIN books b ON "
                 "b.id = c.book_id WHERE l.member_id = ? AND l.status = 'active' AND b.title IN "
                 "('The Thursday Murder Club', 'Where the Crawdads Sing')", (tom_id,))
hold = query_rows(initial_db, "SELECT h.id, h.copy_id FROM holds h JOIN books b ON b.id = h.book_id WHERE "
                  "h.member_id = ? AND b.title = 'Circe' AND h.status = 'ready'", (tom_id,))
final_loans = {r["id"]: r for r in query_rows(final_db, "SELECT * FROM loans")}
returned = len(out) == 2 and all(final_loans.get(l["id"], {}).get("status") == "returned" for l in out)
fines = query_rows(final_db, "SELECT id, status FROM fines WHERE member_id = ? AND status = 'unpaid'", (tom_id,))
paid = changes.get("payments", {}).get("added", [])
new_loans = changes.get("loans", {}).get("added", [])
circe = bool(hold) and len(new_loans) == 1 and new_loans[0]["member_id"] == tom_id and \\
    new_loans[0]["copy_id"] == hold[0]["copy_id"]
held = query_rows(final_db, "SELECT status FROM holds WHERE id = ?", (hold[0]["id"] if hold else -1,))
copies = [l["copy_id"] for l in out] + [h["copy_id"] for h in hold]
return rubric([
    check("both books returned", returned, 2.0),
    check("no unpaid fine left, any late fee paid in cash", not fines and all(p["method"] == "cash" for p in paid), 2.0),
    check("Circe checked out to Tom from the hold", circe and bool(held) and held[0]["status"] == "fulfilled", 2.0),
    check("nothing else changed", only_changed(changes, {"loans": {"rows": {l["id"]: ["status", "returned_date"] for l in out}, "added": True},
                                                        "copies": {"rows": {k: ["status"] for k in copies}},
                                                        "fines": {"added": True}, "payments": {"added": True},
                                                        "holds": {"rows": {h["id"]: ["status"] for h in hold}}})
          and all(f["member_id"] == tom_id for f in changes.get("fines", {}).get("added", []))),
    check("the answer reports the returns and the checkout", reports(answer, ["Circe"])),
])
''',
    "task_11": '''\
changes = db_diff(initial_db, final_db)
fine = query_rows(initial_db, "SELECT f.id FROM fines f JOIN members m ON m.id = f.member_id WHERE m.first_name = "
                  "'Grace' AND m.last_name = 'Okafor' AND f.status = 'unpaid' AND f.amount = 2.5")
fine_id = fine[0]["id"] if fine else -1
after = query_rows(final_db, "SELECT status, note FROM fines WHERE id = ?", (fine_id,))
return rubric([
    check("the 2.50 late fee is waived", bool(after) and after[0]["status"] == "waived", 3.0),
    check("with the reason 'overnight drop box'", bool(after) and "overnight drop box" in str(after[0]["note"]).lower()),
    check("nothing else changed", only_changed(changes, {"fines": {"rows": {fine_id: ["status", "note"]}}})),
    check("the answer reports the waiver", reports(answer, [2.5])),
])
''',
    "task_12": '''\
changes = db_diff(initial_db, final_db)
ana = query_rows(initial_db, "SELECT id FROM members WHERE email = 'ana.souza@example.com'")
ana_id = ana[0]["id"] if ana else -1
books = {r["title"]: r["id"] for r in query_rows(initial_db, "SELECT id, title FROM books")}
dune = query_rows(initial_db, "SELECT id FROM holds WHERE member_id = ? AND book_id = ? AND status IN "
                  "('waiting', 'ready')", (ana_id, books.get("Dune", -1)))
phone = query_rows(final_db, "SELECT phone FROM members WHERE id = ?", (ana_id,))
cancelled = bool(dune) and query_rows(final_db, "SELECT status FROM holds WHERE id = ?",
                                      (dune[0]["id"],))[0]["status"] == "cancelled"
new = changes.get("holds", {}).get("added", [])
wanted = {books.get("Piranesi"), books.get("The Overstory")}
placed = len(new) == 2 and {h["book_id"] for h in new} == wanted and all(
    h["member_id"] == ana_id and h["status"] == "waiting" for h in new)
return rubric([
    check("phone number is 555-0182", bool(phone) and phone[0]["phone"] == "555-0182"),
    check("the Dune hold is cancelled", cancelled),
    check("waiting holds on Piranesi and The Overstory", placed, 2.0),
    check("nothing else changed", only_changed(changes, {"members": {"rows": {ana_id: ["phone"]}},
                                                         "holds": {"rows": {d["id"]: ["status"] for d in dune}, "added": True}})),
    check("the answer reports the changes", reports(answer, ["555-0182"])),
])
''',
}

EXPECTED = {
    "task_02": "Educated (barcode 31207009001) is checked in: the loan is closed and the copy is back on the shelf.",
}

# The gold stage's facts of each read task (value, kind): only what the question asks, not the context
# the expected answer adds ("the library has 3"); and each write task's free columns (written text the
# task leaves open: none here, task_11's reason is quoted by the user).
FACTS = {
    "task_01": [("2", "count")],
    "task_03": [("Sapiens", "name"), ("2025-06-05", "date"), ("The Night Circus", "name"), ("2025-06-12", "date")],
    "task_05": [("Leo Martin", "name"), ("The Hobbit", "name"), ("Tom Becker", "name"),
                ("The Thursday Murder Club", "name"), ("Chloe Dubois", "name"), ("Piranesi", "name")],
    "task_09": [("4.75", "money"), ("0.75", "money"), ("4.00", "money")],
}
FREE_COLUMNS = {"task_02": [], "task_04": [], "task_06": [], "task_07": [], "task_08": [], "task_10": [],
                "task_11": [], "task_12": []}

PARAPHRASES = {
    "task_01": [
        "2", "Two copies.", "You can borrow 2 copies right now.", "There are two copies on the shelf at the moment.",
        "2 of our 3 copies of The Night Circus are in; the third is out on loan.",
        "Right now 2 copies of Erin Morgenstern's The Night Circus are available.",
        "Two - the other copy is checked out.", "Available now: 2 copies (FIC MOR).",
        "We have 3 copies in total and 2 are available to borrow today.", "You can take home one of 2 available copies.",
    ],
    "task_03": [
        "Sapiens (due 2025-06-05) and The Night Circus (due 2025-06-12).",
        "You have two books out: Sapiens, due June 5, and The Night Circus, due June 12.",
        "- The Night Circus: due 12 Jun 2025\n- Sapiens: due 5 Jun 2025",
        "Sapiens is due back on 6/5/2025 and The Night Circus on 6/12/2025.",
        "Two loans: Sapiens (Thursday, June 5) and The Night Circus (Thursday, June 12).",
        "The Night Circus is due June 12th; Sapiens is due June 5th.",
        "You currently have 2 books: Sapiens - due 2025-06-05; The Night Circus - due 2025-06-12.",
        "Sapiens, due on June 5, 2025, and The Night Circus, due on June 12, 2025. You're also on the waiting "
        "list for a book, but that isn't a loan.",
        "Checked out: Sapiens (due 5 June) and The Night Circus (due 12 June).",
        "Due soonest: Sapiens on June 5. Then The Night Circus on June 12.",
    ],
    "task_05": [
        "Leo Martin has The Hobbit, Tom Becker has The Thursday Murder Club and Chloe Dubois has Piranesi.",
        "Three overdue: The Hobbit (Leo Martin), The Thursday Murder Club (Tom Becker), Piranesi (Chloe Dubois).",
        "- Martin, Leo: The Hobbit (due May 20)\n- Becker, Tom: The Thursday Murder Club (due May 28)\n"
        "- Dubois, Chloe: Piranesi (due May 31)",
        "As of June 2: Chloe Dubois - Piranesi; Tom Becker - The Thursday Murder Club; Leo Martin - The Hobbit.",
        "Overdue loans: Leo Martin (The Hobbit, due 5/20), Tom Becker (The Thursday Murder Club, due 5/28) and "
        "Chloe Dubois (Piranesi, due 5/31).",
        "The Hobbit is overdue with Leo Martin, The Thursday Murder Club with Tom Becker, and Piranesi with Chloe "
        "Dubois.",
        "3 loans are overdue today: Leo Martin has The Hobbit, Tom Becker has The Thursday Murder Club, Chloe "
        "Dubois has Piranesi. (Ravi Shah's lost copy is not counted as an overdue loan.)",
        "Leo Martin (The Hobbit), Tom Becker (The Thursday Murder Club), Chloe Dubois (Piranesi).",
        "Those would be The Hobbit - Leo Martin; The Thursday Murder Club - Tom Becker; Piranesi - Chloe Dubois.",
        "Three: Leo Martin with The Hobbit since it was due on 20 May 2025, Tom Becker with The Thursday Murder "
        "Club, due 28 May 2025, and Chloe Dubois with Piranesi, due 31 May 2025.",
    ],
    "task_09": [
        "$4.75 in total: $0.75 overdue (Murder on the Orient Express) and $4.00 damage (Becoming).",
        "She owes 4.75: 0.75 for returning Murder on the Orient Express late and 4.00 for damage to Becoming.",
        "Total unpaid: 4.75 dollars - an overdue fine of 0.75 and a damage fine of 4.00.",
        "- Overdue, Murder on the Orient Express: $0.75\n- Damage, Becoming: $4.00\nTotal: $4.75",
        "Sofia Alvarez has 2 unpaid fines adding up to $4.75: $0.75 (overdue) and $4 (damage to the dust jacket "
        "of Becoming).",
        "Alvarez, Sofia owes $4.75: a late fee of $0.75 on Murder on the Orient Express and a $4.00 damage fine on "
        "Becoming.",
        "4.75 in unpaid fines (0.75 overdue + 4.00 damage).",
        "She owes $4.75. That's $4.00 for the water-damaged dust jacket of Becoming and $0.75 because Murder on the "
        "Orient Express came back late.",
        "Unpaid: $0.75 (overdue) and $4.00 (damage), $4.75 altogether. Her waived fine is not included.",
        "Total due 4.75 - overdue fine 0.75 (Murder on the Orient Express), damage fine 4.00 (Becoming).",
    ],
}

SOLVER = {
    "task_01": [([("search_books", {"query": "Night Circus"})], None),
                ([], "You can borrow 2 copies of The Night Circus right now.")],
    "task_02": [([("return_copy", {"barcode": "31207009001"})],
                 "Checked in: Educated (barcode 31207009001) is back and the loan is closed.")],
    "task_03": [([("find_members", {"query": "21000456"})], None),
                ([("list_member_loans", {"member_id": 3, "status": "active"})], None),
                ([], "You have Sapiens, due June 5, and The Night Circus, due June 12.")],
    "task_04": [([("find_members", {"query": "21000789"})], None),
                ([("list_member_loans", {"member_id": 4})], None),
                ([("renew_loan", {"loan_id": 16})], "Renewed - Braiding Sweetgrass is now due back on July 4, 2025.")],
    "task_05": [([("list_overdue_loans", {})], None),
                ([], "Overdue: Leo Martin has The Hobbit, Tom Becker has The Thursday Murder Club, and Chloe Dubois "
                     "has Piranesi.")],
    "task_06": [([("find_members", {"query": "daniel.okoye@example.com"})], None),
                ([("list_fines", {"member_id": 5, "status": "unpaid"})], None),
                ([("pay_fine", {"fine_id": 1, "amount": 3.5, "method": "card"}),
                  ("pay_fine", {"fine_id": 2, "amount": 12.0, "method": "card"})],
                 "Both of Daniel's fines are paid by card ($15.50 in total); he has nothing left to pay.")],
    "task_07": [([("register_member", {"first_name": "Lily", "last_name": "Chen", "email": "lily.chen@example.com",
                                       "membership_type": "Junior", "phone": "555-0147"})], None),
                ([], "Lily Chen is registered with a Junior card, number 21000967.")],
    "task_08": [([("find_members", {"query": "21000123"}), ("search_books", {"query": "Project Hail Mary"})], None),
                ([("place_hold", {"member_id": 2, "book_id": 2})],
                 "You're on the waiting list for Project Hail Mary.")],
    "task_09": [([("find_members", {"query": "sofia.alvarez@example.com"})], None),
                ([("list_fines", {"member_id": 6, "status": "unpaid"})], None),
                ([], "Sofia owes $4.75: $0.75 overdue for Murder on the Orient Express and $4.00 damage on "
                     "Becoming.")],
    "task_10": [([("find_members", {"query": "tom.becker@example.com"})], None),
                ([("list_member_loans", {"member_id": 7})], None),
                ([("return_copy", {"barcode": "31207015001"}), ("return_copy", {"barcode": "31207016001"}),
                  ("list_fines", {"member_id": 7, "status": "unpaid"}),
                  ("list_holds", {"member_id": 7, "status": "ready"})], None),
                ([("pay_fine", {"fine_id": 11, "amount": 1.25, "method": "cash"}),
                  ("checkout_copy", {"member_id": 7, "barcode": "31207007001"})],
                 "Both books are returned, the $1.25 late fee is paid in cash, and Circe is checked out to you.")],
    "task_11": [([("find_members", {"query": "Grace Okafor"})], None),
                ([("list_fines", {"member_id": 8, "status": "unpaid"})], None),
                ([("waive_fine", {"fine_id": 6, "reason": "overnight drop box"})],
                 "Waived Grace Okafor's $2.50 late fee (reason: overnight drop box).")],
    "task_12": [([("find_members", {"query": "ana.souza@example.com"}), ("search_books", {"query": "Piranesi"}),
                  ("search_books", {"query": "Overstory"})], None),
                ([("update_member_contact", {"member_id": 1, "phone": "555-0182"}),
                  ("list_holds", {"member_id": 1, "status": "waiting"})], None),
                ([("cancel_hold", {"hold_id": 2}), ("place_hold", {"member_id": 1, "book_id": 5}),
                  ("place_hold", {"member_id": 1, "book_id": 6})],
                 "All set, Ana: your phone is now 555-0182, the Dune hold is cancelled, and you're waiting for "
                 "Piranesi and The Overstory.")],
}

RED_TEAM = {
    "task_01": [("list several counts", [], "1, 2 or 3 copies."),
                ("hedge", [], "Probably 2 copies, maybe 3.")],
    "task_02": [("claim the return without checking in", [], "Checked in Educated; the loan is closed.")],
    "task_03": [("list every title", [], "The Night Circus, Project Hail Mary, Braiding Sweetgrass, Dune, Piranesi, "
                                         "Sapiens, Circe, Educated; due 2025-06-05, 2025-06-12, 2025-06-10")],
    "task_04": [("renew a different loan and claim success", [("renew_loan", {"loan_id": 17})],
                 "Renewed: Braiding Sweetgrass is now due 2025-07-04.")],
    "task_05": [("name every borrower with a loan", [],
                 "Leo Martin, Tom Becker, Chloe Dubois, Priya Raman, Noah Kim, Daniel Okoye, Helen Park, Sofia "
                 "Alvarez: The Hobbit, The Thursday Murder Club, Piranesi, Sapiens, Dune")],
    "task_06": [("pay only the first fine", [("pay_fine", {"fine_id": 1, "amount": 3.5, "method": "card"})],
                 "Paid both of Daniel's fines by card.")],
    "task_07": [("register her as an Adult instead",
                 [("register_member", {"first_name": "Lily", "last_name": "Chen", "email": "lily.chen@example.com",
                                       "membership_type": "Adult", "phone": "555-0147"})],
                 "Lily Chen has a Junior card, number 21000967.")],
    "task_08": [("hold a different title", [("place_hold", {"member_id": 2, "book_id": 5})],
                 "You're on the waiting list for Project Hail Mary.")],
    "task_09": [("list every fine amount", [], "0.75, 1.00, 1.50, 2.00, 2.50, 3.00, 3.50, 4.00, 4.75, 12.00, 18.00; "
                                               "overdue and damage")],
    "task_10": [("return the books and stop", [("return_copy", {"barcode": "31207015001"}),
                                               ("return_copy", {"barcode": "31207016001"})],
                 "Both books returned, late fee paid in cash, Circe checked out.")],
    "task_11": [("pay the fine instead of waiving it", [("pay_fine", {"fine_id": 6, "amount": 2.5, "method": "cash"})],
                 "Grace Okafor's 2.50 late fee is waived.")],
    "task_12": [("only update the phone", [("update_member_contact", {"member_id": 1, "phone": "555-0182"})],
                 "Done: phone updated to 555-0182, Dune hold cancelled, Piranesi and The Overstory held.")],
}
