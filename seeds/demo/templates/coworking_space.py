"""Task templates for the demo's Foundry Coworking: the `templates` stage's answers, and the reward
agents' answers about one sampled instance of each. Only what a model would write; `record.py` puts them
into coworking_space.json."""

READ = [
    {
        "name": "plan_price_and_hours",
        "kind": "read",
        "difficulty": "easy",
        "instruction": "What does the {plan_name} plan cost per month, and how many meeting-room hours does it "
                       "include?",
        "query": "SELECT id AS plan_id, name AS plan_name, monthly_fee, included_room_hours AS hours FROM plans "
                 "ORDER BY id",
        "actions": [{"tool": "list_plans", "arguments": {}}],
        "expected_answer": "The {plan_name} plan costs ${monthly_fee:.2f} a month and includes {hours} meeting-room "
                           "hours.",
        "facts": [{"value": "{monthly_fee:.2f}", "kind": "money"}, {"value": "{hours}", "kind": "count"}],
        "free_columns": None,
        "verifier_body": '''\
plan = query_rows(initial_db, "SELECT monthly_fee, included_room_hours FROM plans WHERE id = ?", (params["plan_id"],))
fee = plan[0]["monthly_fee"] if plan else None
hours = plan[0]["included_room_hours"] if plan else None
others = query_rows(initial_db, "SELECT monthly_fee, included_room_hours FROM plans WHERE id <> ?", (params["plan_id"],))
wrong = [r["monthly_fee"] for r in others if r["monthly_fee"] not in (fee, hours)]
wrong += [r["included_room_hours"] for r in others if r["included_room_hours"] not in (fee, hours)]
return rubric([
    check("gives the plan's monthly fee and included hours, and no other plan's", bool(plan)
          and states(answer, [{"value": fee, "kind": "money"}, hours], wrong), 3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    },
    {
        "name": "member_plan_and_status",
        "kind": "read",
        "difficulty": "easy",
        "instruction": "Which plan is {member_name} on, and is the membership active, paused or cancelled?",
        "query": "SELECT m.id AS member_id, m.full_name AS member_name, p.name AS plan_name, m.status FROM members m "
                 "JOIN plans p ON p.id = m.plan_id ORDER BY m.id",
        "actions": [{"tool": "find_members", "arguments": {"name": "{member_name}"}}],
        "expected_answer": "{member_name} is on the {plan_name} plan, and the membership is {status}.",
        "facts": [{"value": "{plan_name}", "kind": "text"}, {"value": "{status}", "kind": "text"}],
        "free_columns": None,
        "verifier_body": '''\
me = query_rows(initial_db, "SELECT p.name, m.status FROM members m JOIN plans p ON p.id = m.plan_id WHERE m.id = ?",
                (params["member_id"],))
right = [me[0]["name"], me[0]["status"]] if me else []
plans = [r["name"] for r in query_rows(initial_db, "SELECT name FROM plans") if r["name"] not in right]
states_ = [s for s in ("active", "paused", "cancelled") if s not in right]
return rubric([
    check("names the member's plan and status, and no other", bool(me) and states(answer, right, plans + states_), 3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    },
    {
        "name": "room_capacity_and_rate",
        "kind": "read",
        "difficulty": "easy",
        "instruction": "How many people does the {room_name} room seat, and what does it cost per hour?",
        "query": "SELECT id AS room_id, name AS room_name, capacity, hourly_rate FROM meeting_rooms ORDER BY id",
        "actions": [{"tool": "list_meeting_rooms", "arguments": {}}],
        "expected_answer": "{room_name} seats {capacity} people and costs ${hourly_rate:.2f} an hour.",
        "facts": [{"value": "{capacity}", "kind": "count"}, {"value": "{hourly_rate:.2f}", "kind": "money"}],
        "free_columns": None,
        "verifier_body": '''\
room = query_rows(initial_db, "SELECT capacity, hourly_rate FROM meeting_rooms WHERE id = ?", (params["room_id"],))
mine = (room[0]["capacity"], room[0]["hourly_rate"]) if room else ()
others = query_rows(initial_db, "SELECT capacity, hourly_rate FROM meeting_rooms WHERE id <> ?", (params["room_id"],))
wrong = sorted({v for r in others for v in (r["capacity"], r["hourly_rate"]) if v not in mine})
return rubric([
    check("gives the room's capacity and hourly rate, and no other room's", bool(room)
          and states(answer, [mine[0], {"value": mine[1], "kind": "money"}], wrong), 3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    },
    {
        "name": "invoice_total_and_status",
        "kind": "read",
        "difficulty": "medium",
        "instruction": "What is the total of invoice {invoice_number}, and has it been paid?",
        "query": "SELECT invoice_number, total, status FROM invoices ORDER BY id",
        "actions": [{"tool": "get_invoice", "arguments": {"invoice_number": "{invoice_number}"}}],
        "expected_answer": "Invoice {invoice_number} is for ${total:.2f} and is {status}.",
        "facts": [{"value": "{total:.2f}", "kind": "money"}, {"value": "{status}", "kind": "text"}],
        "free_columns": None,
        "verifier_body": '''\
inv = query_rows(initial_db, "SELECT total, status FROM invoices WHERE invoice_number = ?", (params["invoice_number"],))
right = [{"value": inv[0]["total"], "kind": "money"}, inv[0]["status"]] if inv else []
totals = [r["t"] for r in query_rows(initial_db, "SELECT DISTINCT total AS t FROM invoices") if inv and r["t"] != inv[0]["total"]]
other = [s for s in ("paid", "unpaid", "void") if inv and s != inv[0]["status"]]
return rubric([
    check("gives the invoice's total and whether it is paid, and nothing else", bool(inv)
          and states(answer, right, totals + other), 3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    },
    {
        "name": "meeting_hours_left",
        "kind": "read",
        "difficulty": "medium",
        "instruction": "How many of {member_name}'s included meeting-room hours are used in {month_name}, and how "
                       "many are left?",
        "query": "SELECT *, included - used AS left FROM (SELECT m.id AS member_id, m.full_name AS member_name, mo.month, mo.month_name, "
                 "p.included_room_hours AS included, COALESCE((SELECT SUM(b.credit_hours) FROM room_bookings b WHERE "
                 "b.member_id = m.id AND substr(b.start_time, 1, 7) = mo.month AND b.status IN ('confirmed', "
                 "'completed')), 0) AS used FROM members m JOIN plans p ON p.id = m.plan_id CROSS JOIN (SELECT "
                 "'2025-05' AS month, 'May 2025' AS month_name UNION ALL SELECT '2025-06', 'June 2025') mo) WHERE "
                 "used > 0 AND used < included ORDER BY month, member_id",
        "actions": [{"tool": "find_members", "arguments": {"name": "{member_name}"}},
                    {"tool": "get_meeting_credit_usage", "arguments": {"member_id": "{member_id}", "month": "{month}"}}],
        "expected_answer": "{member_name} has used {used} of the {included} included hours in {month_name}, so "
                           "{left} are left.",
        "facts": [{"value": "{used}", "kind": "number"}, {"value": "{left}", "kind": "number"}],
        "free_columns": None,
        "verifier_body": '''\
plan = query_rows(initial_db, "SELECT p.included_room_hours AS h FROM members m JOIN plans p ON p.id = m.plan_id "
                  "WHERE m.id = ?", (params["member_id"],))
used = query_rows(initial_db, "SELECT COALESCE(SUM(credit_hours), 0) AS u FROM room_bookings WHERE member_id = ? AND "
                  "substr(start_time, 1, 7) = ? AND status IN ('confirmed', 'completed')",
                  (params["member_id"], params["month"]))
included = plan[0]["h"] if plan else 0
spent = used[0]["u"] if used else 0
left = max(0, included - spent)
wrong = [n for n in range(0, 21) if n not in (spent, left, included)]
return rubric([
    check("gives the hours used and the hours left, and no other figure", bool(plan)
          and states(answer, [spent, left], wrong), 3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    },
    {
        "name": "desk_booked_on_day",
        "kind": "read",
        "difficulty": "medium",
        "instruction": "Which desk does {member_name} have booked on {day}?",
        "query": "SELECT b.id AS booking_id, m.id AS member_id, m.full_name AS member_name, b.booking_date AS day, "
                 "d.code AS desk_code FROM desk_bookings b JOIN members m ON m.id = b.member_id JOIN desks d ON d.id = "
                 "b.desk_id WHERE b.status = 'booked' ORDER BY b.id",
        "actions": [{"tool": "find_members", "arguments": {"name": "{member_name}"}},
                    {"tool": "list_desk_bookings", "arguments": {"member_id": "{member_id}", "date": "{day}"}}],
        "expected_answer": "{member_name} has desk {desk_code} on {day}.",
        "facts": [{"value": "{desk_code}", "kind": "id"}],
        "free_columns": None,
        "verifier_body": '''\
desk = query_rows(initial_db, "SELECT d.code FROM desk_bookings b JOIN desks d ON d.id = b.desk_id WHERE b.id = ?",
                  (params["booking_id"],))
code = desk[0]["code"] if desk else None
others = [r["code"] for r in query_rows(initial_db, "SELECT code FROM desks") if r["code"] != code]
return rubric([
    check("names the booked desk, and no other", code is not None and states(answer, [code], others), 3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    },
    {
        "name": "room_booking_times",
        "kind": "read",
        "difficulty": "medium",
        "instruction": "What time does {member_name}'s booking of {room_name} on {day} start and end?",
        "query": "SELECT b.id AS booking_id, m.id AS member_id, m.full_name AS member_name, r.name AS room_name, "
                 "substr(b.start_time, 1, 10) AS day, substr(b.start_time, 12, 5) AS start, substr(b.end_time, 12, 5) "
                 "AS end FROM room_bookings b JOIN members m ON m.id = b.member_id JOIN meeting_rooms r ON r.id = "
                 "b.room_id ORDER BY b.id",
        "actions": [{"tool": "find_members", "arguments": {"name": "{member_name}"}},
                    {"tool": "list_room_bookings", "arguments": {"member_id": "{member_id}", "date": "{day}"}}],
        "expected_answer": "{member_name}'s booking of {room_name} on {day} runs from {start} to {end}.",
        "facts": [{"value": "{start}", "kind": "time"}, {"value": "{end}", "kind": "time"}],
        "free_columns": None,
        "verifier_body": '''\
b = query_rows(initial_db, "SELECT substr(start_time, 12, 5) AS s, substr(end_time, 12, 5) AS e FROM room_bookings "
               "WHERE id = ?", (params["booking_id"],))
right = [b[0]["s"], b[0]["e"]] if b else []
times = query_rows(initial_db, "SELECT substr(start_time, 12, 5) AS s, substr(end_time, 12, 5) AS e FROM room_bookings")
wrong = sorted({t for r in times for t in (r["s"], r["e"]) if t not in right})
return rubric([
    check("gives the booking's start and end time, and no other time", bool(b) and states(answer, right, wrong), 3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    },
    {
        "name": "hours_left_and_extra_rate",
        "kind": "read",
        "difficulty": "hard",
        "instruction": "{member_name} wants to know how many included meeting-room hours are left in {month_name}, "
                       "and what an extra hour in {room_name} would cost.",
        "query": "SELECT *, included - used AS left FROM (SELECT m.id AS member_id, m.full_name AS member_name, "
                 "mo.month, mo.month_name, p.included_room_hours AS included, COALESCE((SELECT SUM(b.credit_hours) "
                 "FROM room_bookings b WHERE b.member_id = m.id AND substr(b.start_time, 1, 7) = mo.month AND "
                 "b.status IN ('confirmed', 'completed')), 0) AS used, r.id AS room_id, r.name AS room_name, "
                 "r.hourly_rate FROM members m JOIN plans p ON p.id = m.plan_id CROSS JOIN (SELECT '2025-05' AS month, "
                 "'May 2025' AS month_name UNION ALL SELECT '2025-06', 'June 2025') mo CROSS JOIN meeting_rooms r "
                 "WHERE m.status = 'active') WHERE used < included ORDER BY (member_id * 3 + room_id) % 7, month, "
                 "member_id, room_id",
        "actions": [{"tool": "find_members", "arguments": {"name": "{member_name}"}},
                    {"tool": "get_meeting_credit_usage", "arguments": {"member_id": "{member_id}", "month": "{month}"}},
                    {"tool": "list_meeting_rooms", "arguments": {}}],
        "expected_answer": "{member_name} has {left} included hours left in {month_name}; an extra hour in {room_name} "
                           "costs ${hourly_rate:.2f}.",
        "facts": [{"value": "{left}", "kind": "number"}, {"value": "{hourly_rate:.2f}", "kind": "money"}],
        "free_columns": None,
        "verifier_body": '''\
plan = query_rows(initial_db, "SELECT p.included_room_hours AS h FROM members m JOIN plans p ON p.id = m.plan_id "
                  "WHERE m.id = ?", (params["member_id"],))
used = query_rows(initial_db, "SELECT COALESCE(SUM(credit_hours), 0) AS u FROM room_bookings WHERE member_id = ? AND "
                  "substr(start_time, 1, 7) = ? AND status IN ('confirmed', 'completed')",
                  (params["member_id"], params["month"]))
room = query_rows(initial_db, "SELECT hourly_rate FROM meeting_rooms WHERE id = ?", (params["room_id"],))
included = plan[0]["h"] if plan else 0
spent = used[0]["u"] if used else 0
left = max(0, included - spent)
rate = room[0]["hourly_rate"] if room else None
rates = [r["hourly_rate"] for r in query_rows(initial_db, "SELECT hourly_rate FROM meeting_rooms")]
wrong = sorted({v for v in list(range(0, 21)) + rates if v not in (left, spent, included, rate)})
return rubric([
    check("gives the hours left and the room's hourly rate, and no other figure", bool(plan) and rate is not None
          and states(answer, [left, {"value": rate, "kind": "money"}], wrong), 3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    },
]

WRITE = [
    {
        "name": "book_hot_desk",
        "kind": "write",
        "difficulty": "medium",
        "instruction": "Please book desk {desk_code} for {member_name} on {day}.",
        "query": "WITH days(day) AS (VALUES ('2025-06-03'), ('2025-06-04'), ('2025-06-05'), ('2025-06-06'), "
                 "('2025-06-09'), ('2025-06-10')) SELECT m.id AS member_id, m.full_name AS member_name, d.id AS "
                 "desk_id, d.code AS desk_code, days.day FROM members m JOIN plans p ON p.id = m.plan_id CROSS JOIN "
                 "desks d CROSS JOIN days WHERE m.status = 'active' AND p.desk_access <> 'none' AND d.status = "
                 "'in_service' AND NOT EXISTS (SELECT 1 FROM desk_bookings b WHERE b.desk_id = d.id AND "
                 "b.booking_date = days.day AND b.status = 'booked') AND NOT EXISTS (SELECT 1 FROM desk_bookings b "
                 "WHERE b.member_id = m.id AND b.booking_date = days.day AND b.status = 'booked') ORDER BY (m.id * 5 + "
                 "d.id * 3 + CAST(substr(days.day, 9, 2) AS INTEGER)) % 17, m.id, d.id, days.day",
        "actions": [{"tool": "find_members", "arguments": {"name": "{member_name}"}},
                    {"tool": "search_desks", "arguments": {"date": "{day}"}},
                    {"tool": "book_desk", "arguments": {"member_id": "{member_id}", "desk_id": "{desk_id}",
                                                        "booking_date": "{day}"}}],
        "expected_answer": "Desk {desk_code} is booked for {member_name} on {day}.",
        "facts": None,
        "free_columns": [],
        "verifier_body": '''\
changes = db_diff(initial_db, final_db)
new = changes.get("desk_bookings", {}).get("added", [])
b = new[0] if len(new) == 1 else {}
return rubric([
    check("one new booking of that desk for that member on that day", b.get("member_id") == params["member_id"]
          and b.get("desk_id") == params["desk_id"] and b.get("booking_date") == params["day"]
          and b.get("status") == "booked", 3.0),
    check("nothing else changed", only_changed(changes, {"desk_bookings": {"added": True}})),
    check("the answer reports the booking", reports(answer, [params["desk_code"]])),
])
''',
    },
    {
        "name": "cancel_desk_booking",
        "kind": "write",
        "difficulty": "easy",
        "instruction": "Please cancel {member_name}'s desk booking for {day}.",
        "query": "SELECT b.id AS booking_id, m.id AS member_id, m.full_name AS member_name, b.booking_date AS day, "
                 "d.code AS desk_code FROM desk_bookings b JOIN members m ON m.id = b.member_id JOIN desks d ON d.id "
                 "= b.desk_id WHERE b.status = 'booked' AND b.booking_date >= '2025-06-02' ORDER BY b.id",
        "actions": [{"tool": "find_members", "arguments": {"name": "{member_name}"}},
                    {"tool": "list_desk_bookings", "arguments": {"member_id": "{member_id}", "date": "{day}"}},
                    {"tool": "cancel_desk_booking", "arguments": {"booking_id": "{booking_id}"}}],
        "expected_answer": "{member_name}'s booking of desk {desk_code} on {day} is cancelled.",
        "facts": None,
        "free_columns": [],
        "verifier_body": '''\
changes = db_diff(initial_db, final_db)
row = query_rows(final_db, "SELECT status FROM desk_bookings WHERE id = ?", (params["booking_id"],))
return rubric([
    check("that desk booking is cancelled", bool(row) and row[0]["status"] == "cancelled", 3.0),
    check("nothing else changed", only_changed(changes, {"desk_bookings": {"rows": {params["booking_id"]: ["status"]}}})),
    check("the answer reports the cancellation", reports(answer, [params["day"]])),
])
''',
    },
    {
        "name": "book_meeting_room",
        "kind": "write",
        "difficulty": "medium",
        "instruction": "Book the {room_name} room for {member_name} on {day} from {start} to {stop} for {attendees} "
                       "people.",
        "query": "WITH slots(day, start, stop) AS (VALUES ('2025-06-11', '09:00', '10:00'), ('2025-06-11', '14:00', "
                 "'16:00'), ('2025-06-13', '10:30', '12:00'), ('2025-06-16', '16:00', '17:00')) SELECT m.id AS "
                 "member_id, m.full_name AS member_name, r.id AS room_id, r.name AS room_name, s.day, s.start, s.stop, "
                 "s.day || ' ' || s.start AS start_time, s.day || ' ' || s.stop AS end_time, MIN(r.capacity, 2 + m.id "
                 "% 3) AS attendees FROM members m CROSS JOIN meeting_rooms r CROSS JOIN slots s WHERE m.status = "
                 "'active' AND NOT EXISTS (SELECT 1 FROM room_bookings b WHERE b.room_id = r.id AND b.status = "
                 "'confirmed' AND b.start_time < s.day || ' ' || s.stop AND b.end_time > s.day || ' ' || s.start) "
                 "ORDER BY (m.id * 3 + r.id * 5 + length(s.start) + CAST(substr(s.day, 9, 2) AS INTEGER)) % 13, m.id, "
                 "r.id, s.day, s.start",
        "actions": [{"tool": "find_members", "arguments": {"name": "{member_name}"}},
                    {"tool": "list_meeting_rooms", "arguments": {}},
                    {"tool": "book_meeting_room", "arguments": {"member_id": "{member_id}", "room_id": "{room_id}",
                                                                "start_time": "{start_time}", "end_time": "{end_time}",
                                                                "attendees": "{attendees}"}}],
        "expected_answer": "{room_name} is booked for {member_name} on {day} from {start} to {stop}.",
        "facts": None,
        "free_columns": [],
        "verifier_body": '''\
changes = db_diff(initial_db, final_db)
new = changes.get("room_bookings", {}).get("added", [])
b = new[0] if len(new) == 1 else {}
start = datetime.datetime.strptime(params["start_time"], "%Y-%m-%d %H:%M")
end = datetime.datetime.strptime(params["end_time"], "%Y-%m-%d %H:%M")
hours = round((end - start).total_seconds() / 3600, 2)
plan = query_rows(initial_db, "SELECT p.included_room_hours AS h FROM members m JOIN plans p ON p.id = m.plan_id WHERE "
                  "m.id = ?", (params["member_id"],))
used = query_rows(initial_db, "SELECT COALESCE(SUM(credit_hours), 0) AS u FROM room_bookings WHERE member_id = ? AND "
                  "status IN ('confirmed', 'completed') AND substr(start_time, 1, 7) = ?",
                  (params["member_id"], params["start_time"][:7]))
rate = query_rows(initial_db, "SELECT hourly_rate FROM meeting_rooms WHERE id = ?", (params["room_id"],))
credit = round(min(hours, max(0.0, (plan[0]["h"] if plan else 0) - (used[0]["u"] if used else 0))), 2)
charge = round((hours - credit) * (rate[0]["hourly_rate"] if rate else 0), 2)
return rubric([
    check("one new confirmed booking of that room for that member at that time", b.get("member_id") ==
          params["member_id"] and b.get("room_id") == params["room_id"] and b.get("start_time") == params["start_time"]
          and b.get("end_time") == params["end_time"] and b.get("status") == "confirmed", 3.0),
    check("for the number of people asked", b.get("attendees") == params["attendees"]),
    check("included hours are used first, the rest charged at the room's rate", b.get("hours") == hours
          and abs((b.get("credit_hours") or 0) - credit) < 0.005 and abs((b.get("charge") or 0) - charge) < 0.005),
    check("nothing else changed", only_changed(changes, {"room_bookings": {"added": True}})),
    check("the answer reports the booking", reports(answer, [params["room_name"]])),
])
''',
    },
    {
        "name": "cancel_room_booking",
        "kind": "write",
        "difficulty": "easy",
        "instruction": "Please cancel {member_name}'s booking of {room_name} on {day} at {start}.",
        "query": "SELECT b.id AS booking_id, m.id AS member_id, m.full_name AS member_name, r.name AS room_name, "
                 "substr(b.start_time, 1, 10) AS day, substr(b.start_time, 12, 5) AS start FROM room_bookings b JOIN "
                 "members m ON m.id = b.member_id JOIN meeting_rooms r ON r.id = b.room_id WHERE b.status = "
                 "'confirmed' AND b.start_time >= '2025-06-02' ORDER BY b.id",
        "actions": [{"tool": "find_members", "arguments": {"name": "{member_name}"}},
                    {"tool": "list_room_bookings", "arguments": {"member_id": "{member_id}", "date": "{day}"}},
                    {"tool": "cancel_room_booking", "arguments": {"booking_id": "{booking_id}"}}],
        "expected_answer": "{member_name}'s booking of {room_name} on {day} at {start} is cancelled.",
        "facts": None,
        "free_columns": [],
        "verifier_body": '''\
changes = db_diff(initial_db, final_db)
row = query_rows(final_db, "SELECT status FROM room_bookings WHERE id = ?", (params["booking_id"],))
return rubric([
    check("that room booking is cancelled", bool(row) and row[0]["status"] == "cancelled", 3.0),
    check("nothing else changed", only_changed(changes, {"room_bookings": {"rows": {params["booking_id"]: ["status"]}}})),
    check("the answer reports the cancellation", reports(answer, [params["room_name"]])),
])
''',
    },
    {
        "name": "switch_plan",
        "kind": "write",
        "difficulty": "medium",
        "instruction": "Please switch {member_name} to the {plan_name} plan.",
        "query": "SELECT m.id AS member_id, m.full_name AS member_name, m.plan_id AS old_plan_id, p.id AS plan_id, "
                 "p.name AS plan_name FROM members m CROSS JOIN plans p WHERE m.status <> 'cancelled' AND p.active = 1 "
                 "AND p.id <> m.plan_id AND NOT EXISTS (SELECT 1 FROM invoices i WHERE i.member_id = m.id AND "
                 "i.status = 'unpaid' AND i.due_on < '2025-06-02') ORDER BY (m.id * 3 + p.id) % 7, m.id, p.id",
        "actions": [{"tool": "find_members", "arguments": {"name": "{member_name}"}},
                    {"tool": "list_plans", "arguments": {}},
                    {"tool": "change_member_plan", "arguments": {"member_id": "{member_id}", "plan_id": "{plan_id}"}}],
        "expected_answer": "{member_name} is now on the {plan_name} plan.",
        "facts": None,
        "free_columns": [],
        "verifier_body": '''\
changes = db_diff(initial_db, final_db)
me = query_rows(final_db, "SELECT plan_id FROM members WHERE id = ?", (params["member_id"],))
new = changes.get("plan_changes", {}).get("added", [])
log = new[0] if len(new) == 1 else {}
return rubric([
    check("the member is on the new plan", bool(me) and me[0]["plan_id"] == params["plan_id"], 3.0),
    check("the change is in the plan history, from today", log.get("member_id") == params["member_id"]
          and log.get("old_plan_id") == params["old_plan_id"] and log.get("new_plan_id") == params["plan_id"]
          and log.get("changed_on") == "2025-06-02"),
    check("nothing else changed", only_changed(changes, {"members": {"rows": {params["member_id"]: ["plan_id"]}},
                                                         "plan_changes": {"added": True}})),
    check("the answer reports the new plan", reports(answer, [params["plan_name"]])),
])
''',
    },
    {
        "name": "record_invoice_payment",
        "kind": "write",
        "difficulty": "medium",
        "instruction": "{member_name} paid invoice {invoice_number} today by {label}. Please record the payment.",
        "query": "WITH methods(method, label) AS (VALUES ('card', 'card'), ('bank_transfer', 'bank transfer'), "
                 "('cash', 'cash')) SELECT i.id AS invoice_id, i.invoice_number, m.full_name AS member_name, i.total, "
                 "mt.method, mt.label FROM invoices i JOIN members m ON m.id = i.member_id CROSS JOIN methods mt WHERE "
                 "i.status = 'unpaid' ORDER BY i.id, mt.method",
        "actions": [{"tool": "get_invoice", "arguments": {"invoice_number": "{invoice_number}"}},
                    {"tool": "record_invoice_payment", "arguments": {"invoice_number": "{invoice_number}",
                                                                     "method": "{method}", "paid_on": "2025-06-02"}}],
        "expected_answer": "Invoice {invoice_number} (${total:.2f}) is recorded as paid today by {label}.",
        "facts": None,
        "free_columns": [],
        "verifier_body": '''\
changes = db_diff(initial_db, final_db)
inv = query_rows(final_db, "SELECT status, paid_on, payment_method FROM invoices WHERE id = ?", (params["invoice_id"],))
return rubric([
    check("the invoice is paid today", bool(inv) and inv[0]["status"] == "paid" and inv[0]["paid_on"] == "2025-06-02",
          3.0),
    check("by the method the member used", bool(inv) and inv[0]["payment_method"] == params["method"]),
    check("nothing else changed", only_changed(changes, {"invoices": {"rows": {params["invoice_id"]: [
        "status", "paid_on", "payment_method"]}}})),
    check("the answer reports the payment", reports(answer, [params["invoice_number"]])),
])
''',
    },
    {
        "name": "update_member_phone",
        "kind": "write",
        "difficulty": "easy",
        "instruction": "{member_name} has a new phone number, {new_phone}. Please update the member record.",
        "query": "SELECT id AS member_id, full_name AS member_name, '555-' || printf('%04d', 3000 + id * 41) AS new_phone "
                 "FROM members ORDER BY id",
        "actions": [{"tool": "find_members", "arguments": {"name": "{member_name}"}},
                    {"tool": "update_member_contact", "arguments": {"member_id": "{member_id}", "phone": "{new_phone}"}}],
        "expected_answer": "{member_name}'s phone number is now {new_phone}.",
        "facts": None,
        "free_columns": [],
        "verifier_body": '''\
changes = db_diff(initial_db, final_db)
row = query_rows(final_db, "SELECT phone FROM members WHERE id = ?", (params["member_id"],))
return rubric([
    check("the member's phone is the new number", bool(row) and row[0]["phone"] == params["new_phone"], 3.0),
    check("nothing else changed", only_changed(changes, {"members": {"rows": {params["member_id"]: ["phone"]}}})),
    check("the answer reports the update", reports(answer, [params["new_phone"]])),
])
''',
    },
    {
        "name": "upgrade_and_book_desk",
        "kind": "write",
        "difficulty": "hard",
        "instruction": "{member_name} is moving up to the {plan_name} plan: please switch the plan and book desk "
                       "{desk_code} for {day}.",
        "query": "WITH days(day) AS (VALUES ('2025-06-04'), ('2025-06-05'), ('2025-06-06')) SELECT m.id AS member_id, "
                 "m.full_name AS member_name, m.plan_id AS old_plan_id, p.id AS plan_id, p.name AS plan_name, d.id AS "
                 "desk_id, d.code AS desk_code, days.day FROM members m JOIN plans cur ON cur.id = m.plan_id CROSS JOIN "
                 "plans p CROSS JOIN desks d CROSS JOIN days WHERE m.status = 'active' AND cur.desk_access = 'none' AND "
                 "p.active = 1 AND p.desk_access <> 'none' AND d.status = 'in_service' AND NOT EXISTS (SELECT 1 FROM "
                 "desk_bookings b WHERE b.desk_id = d.id AND b.booking_date = days.day AND b.status = 'booked') AND NOT "
                 "EXISTS (SELECT 1 FROM invoices i WHERE i.member_id = m.id AND i.status = 'unpaid' AND i.due_on < "
                 "'2025-06-02') ORDER BY (m.id + p.id * 3 + d.id * 5 + CAST(substr(days.day, 9, 2) AS INTEGER)) % 11, "
                 "m.id, p.id, d.id, days.day",
        "actions": [{"tool": "find_members", "arguments": {"name": "{member_name}"}},
                    {"tool": "list_plans", "arguments": {}},
                    {"tool": "change_member_plan", "arguments": {"member_id": "{member_id}", "plan_id": "{plan_id}"}},
                    {"tool": "search_desks", "arguments": {"date": "{day}"}},
                    {"tool": "book_desk", "arguments": {"member_id": "{member_id}", "desk_id": "{desk_id}",
                                                        "booking_date": "{day}"}}],
        "expected_answer": "{member_name} is now on the {plan_name} plan, with desk {desk_code} booked for {day}.",
        "facts": None,
        "free_columns": [],
        "verifier_body": '''\
changes = db_diff(initial_db, final_db)
me = query_rows(final_db, "SELECT plan_id FROM members WHERE id = ?", (params["member_id"],))
logs = changes.get("plan_changes", {}).get("added", [])
log = logs[0] if len(logs) == 1 else {}
desks = changes.get("desk_bookings", {}).get("added", [])
desk = desks[0] if len(desks) == 1 else {}
return rubric([
    check("the member is on the new plan, recorded in the plan history", bool(me) and me[0]["plan_id"] ==
          params["plan_id"] and log.get("member_id") == params["member_id"] and log.get("new_plan_id") ==
          params["plan_id"] and log.get("old_plan_id") == params["old_plan_id"], 2.0),
    check("the desk is booked for the member on that day", desk.get("member_id") == params["member_id"]
          and desk.get("desk_id") == params["desk_id"] and desk.get("booking_date") == params["day"]
          and desk.get("status") == "booked", 2.0),
    check("nothing else changed", only_changed(changes, {"members": {"rows": {params["member_id"]: ["plan_id"]}},
                                                         "plan_changes": {"added": True},
                                                         "desk_bookings": {"added": True}})),
    check("the answer reports the plan and the desk", reports(answer, [params["plan_name"], params["desk_code"]])),
])
''',
    },
]

TEMPLATES = {"read": READ, "write": WRITE}

# The first version of a template whose verifier did not check that nothing else changed: every one of its
# instances pays the collateral probe, so `synth tasks` sends it back with that evidence, and the model's
# repair (the version in WRITE, with this diagnosis) is checked again.
BROKEN = {
    "cancel_desk_booking": {"verifier_body": '''\
row = query_rows(final_db, "SELECT status FROM desk_bookings WHERE id = ?", (params["booking_id"],))
return rubric([
    check("that desk booking is cancelled", bool(row) and row[0]["status"] == "cancelled", 3.0),
    check("the answer reports the cancellation", reports(answer, [params["day"]])),
])
'''},
}
DIAGNOSIS = {
    "cancel_desk_booking": "The verifier never checked the rest of the database, so an attempt that also cancelled or "
                           "changed other bookings still passed; it now requires that only this booking's status "
                           "changed.",
}

# The reward agents on the first instance of each template (the instances `synth tasks` samples).
PARAPHRASES = {
    "hours_left_and_extra_rate_001": [
        "6 hours left; $30 an hour.", "She has 6 included hours left in May 2025, and an extra hour in Kiln costs $30.00.",
        "Six hours remain; Kiln is 30 dollars per extra hour.", "Hours left: 6. Kiln: $30.00/hour.",
        "Aisha can still use 6 hours; beyond that Kiln costs $30 an hour.", "6 left, and $30.00 per hour in Kiln.",
    ],
    "plan_price_and_hours_001": [
        "$59 a month, 2 hours.", "Virtual Office costs $59.00 per month and includes 2 meeting-room hours.",
        "59 dollars monthly, with two hours of meeting rooms included.", "It's $59/month including 2 room hours.",
        "Monthly fee: $59.00; included hours: 2.", "The plan is 59.00 a month and comes with 2 hours.",
    ],
    "member_plan_and_status_001": [
        "Dedicated Desk, active.", "She's on the Dedicated Desk plan and her membership is active.",
        "Plan: Dedicated Desk. Status: active.", "Aisha Khan has an active Dedicated Desk membership.",
        "Dedicated Desk; the membership is active.", "Active, on Dedicated Desk.",
    ],
    "room_capacity_and_rate_001": [
        "8 people, $45 an hour.", "Anvil seats eight and costs $45.00 per hour.", "Capacity 8; rate $45/hour.",
        "It holds 8 people at 45 dollars an hour.", "Up to 8 people, $45.00 per hour.",
        "The Anvil room takes 8 and is $45 per hour.",
    ],
    "invoice_total_and_status_001": [
        "$349.00, paid.", "It's for $349 and it has been paid.", "INV-1001 totals 349.00 and is paid.",
        "Total $349; status: paid.", "349 dollars - already paid.", "The invoice came to $349.00 and was paid.",
    ],
    "meeting_hours_left_001": [
        "2 used, 6 left.", "She has used 2 hours and has 6 hours left.",
        "Aisha Khan used 2 of her 8 included hours in May 2025, leaving 6.", "Used: 2 h. Remaining: 6 h.",
        "Two hours used; six remain.", "She still has 6 of her 8 hours; 2 are used.",
    ],
    "desk_booked_on_day_001": [
        "Q-101", "She has desk Q-101 that day.", "Olivia Chen is booked at Q-101 (quiet zone) on June 6.",
        "Desk Q-101.", "On 2025-06-06 Olivia has Q-101.", "Her booking for Friday, June 6 is desk Q-101.",
    ],
    "room_booking_times_001": [
        "10:00 to 12:00.", "It runs from 10 AM to noon.", "From 10:00 until 12:00.", "10am-12pm",
        "The booking starts at 10:00 and ends at 12:00.", "Start 10:00, end 12:00.",
    ],
}

SOLVER = {
    "hours_left_and_extra_rate_001": [([("find_members", {"name": "Aisha Khan"})], None),
                                      ([("get_meeting_credit_usage", {"member_id": 1, "month": "2025-05"}),
                                        ("list_meeting_rooms", {})], None),
                                      ([], "Aisha Khan has 6 included hours left in May 2025; an extra hour in Kiln "
                                           "costs $30.00.")],
    "upgrade_and_book_desk_001": [([("find_members", {"name": "Priya Raman"}), ("list_plans", {})], None),
                                  ([("change_member_plan", {"member_id": 5, "plan_id": 3}),
                                    ("search_desks", {"date": "2025-06-04"})], None),
                                  ([("book_desk", {"member_id": 5, "desk_id": 3, "booking_date": "2025-06-04"})],
                                   "Priya Raman is now on the Dedicated Desk plan, and desk Q-103 is booked for her on "
                                   "2025-06-04.")],
    "plan_price_and_hours_001": [([("list_plans", {})], None),
                                 ([], "The Virtual Office plan is $59.00 a month and includes 2 meeting-room hours.")],
    "member_plan_and_status_001": [([("find_members", {"name": "Aisha Khan"})], None),
                                   ([], "Aisha Khan is on the Dedicated Desk plan and her membership is active.")],
    "room_capacity_and_rate_001": [([("list_meeting_rooms", {})], None),
                                   ([], "Anvil seats 8 people and costs $45.00 per hour.")],
    "invoice_total_and_status_001": [([("get_invoice", {"invoice_number": "INV-1001"})], None),
                                     ([], "INV-1001 is for $349.00 and it is paid.")],
    "meeting_hours_left_001": [([("find_members", {"name": "Aisha Khan"})], None),
                               ([("get_meeting_credit_usage", {"member_id": 1, "month": "2025-05"})], None),
                               ([], "Aisha Khan used 2 of her 8 included hours in May 2025; 6 are left.")],
    "desk_booked_on_day_001": [([("find_members", {"name": "Olivia Chen"})], None),
                               ([("list_desk_bookings", {"member_id": 12, "date": "2025-06-06"})], None),
                               ([], "Olivia Chen has desk Q-101 on 2025-06-06.")],
    "room_booking_times_001": [([("find_members", {"name": "Aisha Khan"})], None),
                               ([("list_room_bookings", {"member_id": 1, "date": "2025-05-14"})], None),
                               ([], "Her Anvil booking on 2025-05-14 runs from 10:00 to 12:00.")],
    "book_hot_desk_001": [([("find_members", {"name": "Aisha Khan"}), ("search_desks", {"date": "2025-06-09"})], None),
                          ([("book_desk", {"member_id": 1, "desk_id": 1, "booking_date": "2025-06-09"})],
                           "Desk Q-101 is booked for Aisha Khan on 2025-06-09.")],
    "cancel_desk_booking_001": [([("find_members", {"name": "Olivia Chen"})], None),
                                ([("list_desk_bookings", {"member_id": 12, "date": "2025-06-06"})], None),
                                ([("cancel_desk_booking", {"booking_id": 1})],
                                 "Olivia Chen's desk booking (Q-101) for 2025-06-06 is cancelled.")],
    "book_meeting_room_001": [([("find_members", {"name": "Aisha Khan"}), ("list_meeting_rooms", {})], None),
                              ([("book_meeting_room", {"member_id": 1, "room_id": 1, "start_time": "2025-06-13 10:30",
                                                       "end_time": "2025-06-13 12:00", "attendees": 3})],
                               "Anvil is booked for Aisha Khan on June 13, 10:30-12:00, for 3 people.")],
    "cancel_room_booking_001": [([("find_members", {"name": "Elena Petrova"})], None),
                                ([("list_room_bookings", {"member_id": 3, "date": "2025-06-02"})], None),
                                ([("cancel_room_booking", {"booking_id": 4})],
                                 "Elena Petrova's Kiln booking today at 09:00 is cancelled.")],
    "switch_plan_001": [([("find_members", {"name": "Aisha Khan"}), ("list_plans", {})], None),
                        ([("change_member_plan", {"member_id": 1, "plan_id": 4})],
                         "Aisha Khan is now on the Private Office plan.")],
    "record_invoice_payment_001": [([("get_invoice", {"invoice_number": "INV-1002"})], None),
                                   ([("record_invoice_payment", {"invoice_number": "INV-1002",
                                                                 "method": "bank_transfer", "paid_on": "2025-06-02"})],
                                    "INV-1002 ($189.00) is recorded as paid today by bank transfer.")],
    "update_member_phone_001": [([("find_members", {"name": "Aisha Khan"})], None),
                                ([("update_member_contact", {"member_id": 1, "phone": "555-3041"})],
                                 "Aisha Khan's phone number is now 555-3041.")],
}

RED_TEAM = {
    "hours_left_and_extra_rate_001": [("several figures", [], "4, 5 or 6 hours left; $25, $30 or $45 an hour.")],
    "upgrade_and_book_desk_001": [("book the desk only", [("book_desk", {"member_id": 5, "desk_id": 3,
                                                                        "booking_date": "2025-06-04"})],
                                   "Priya is on the Dedicated Desk plan with desk Q-103 on 2025-06-04.")],
    "plan_price_and_hours_001": [("every fee", [], "$59, $189, $349 or $890; 2, 4 or 8 hours.")],
    "member_plan_and_status_001": [("every plan", [], "Virtual Office, Flex Desk, Dedicated Desk or Private Office; "
                                                      "active or paused.")],
    "room_capacity_and_rate_001": [("hedge", [], "About 8 or 12 people, maybe $45 or $70 an hour.")],
    "invoice_total_and_status_001": [("both statuses", [], "$349.00 or $189.00; paid or unpaid.")],
    "meeting_hours_left_001": [("several figures", [], "2, 3 or 4 used; 4, 5 or 6 left.")],
    "desk_booked_on_day_001": [("several desks", [], "Q-101, Q-102 or O-201.")],
    "room_booking_times_001": [("several times", [], "09:00, 10:00 or 11:00 to 12:00 or 13:00.")],
    "book_hot_desk_001": [("book another desk", [("book_desk", {"member_id": 1, "desk_id": 2,
                                                                "booking_date": "2025-06-09"})],
                           "Desk Q-101 is booked for Aisha Khan on 2025-06-09.")],
    "cancel_desk_booking_001": [("cancel another booking too", [("cancel_desk_booking", {"booking_id": 10})],
                                 "Olivia Chen's desk booking for 2025-06-06 is cancelled.")],
    "book_meeting_room_001": [("book the wrong room", [("book_meeting_room", {"member_id": 1, "room_id": 3,
                                                                              "start_time": "2025-06-13 10:30",
                                                                              "end_time": "2025-06-13 12:00",
                                                                              "attendees": 3})],
                               "Anvil is booked for Aisha Khan on June 13.")],
    "cancel_room_booking_001": [("claim it", [], "Elena Petrova's Kiln booking is cancelled.")],
    "switch_plan_001": [("claim it", [], "Aisha Khan is now on the Private Office plan.")],
    "record_invoice_payment_001": [("pay another invoice", [("record_invoice_payment",
                                                             {"invoice_number": "INV-1004", "method": "bank_transfer",
                                                              "paid_on": "2025-06-02"})],
                                    "INV-1002 is recorded as paid.")],
    "update_member_phone_001": [("claim it", [], "Aisha Khan's phone number is now 555-3041.")],
}
