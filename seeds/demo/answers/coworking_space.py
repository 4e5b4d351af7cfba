"""Model answers for the demo's Foundry Coworking: the gold stage's verifiers (and write tasks'
reports), the paraphrase check, the solver's turns and the red team's attempts. Only what a model
would write; `record.py` puts them into coworking_space.json."""

RECORDING = "coworking_space.json"
ENV = "foundry_coworking"

VERIFIERS = {
    "task_01": '''\
plans = query_rows(initial_db, "SELECT name, monthly_fee, included_room_hours FROM plans")
flex = [p for p in plans if p["name"] == "Flex Desk"]
right = [flex[0]["monthly_fee"], flex[0]["included_room_hours"]] if flex else []
wrong = sorted({v for p in plans if p["name"] != "Flex Desk" for v in (p["monthly_fee"], p["included_room_hours"])}
               - set(right))
return rubric([
    check("states the Flex Desk fee and included hours, and no other plan's", bool(right)
          and states(answer, right, wrong), 3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    "task_02": '''\
rooms = query_rows(initial_db, "SELECT name, capacity, has_video FROM meeting_rooms ORDER BY name")
right = [r["name"] for r in rooms if r["capacity"] >= 8 and r["has_video"] == 1]
wrong = [r["name"] for r in rooms if r["name"] not in right]
return rubric([
    check("names every room for 8 or more with video, and no other room", bool(right) and states(answer, right, wrong),
          3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    "task_03": '''\
changes = db_diff(initial_db, final_db)
row = query_rows(final_db, "SELECT status FROM room_bookings WHERE id = 14")
return rubric([
    check("room booking 14 is cancelled", bool(row) and row[0]["status"] == "cancelled", 3.0),
    check("nothing else changed", only_changed(changes, {"room_bookings": {"rows": {14: ["status"]}}})),
    check("the answer reports the cancellation", reports(answer, ["Forge"])),
])
''',
    "task_04": '''\
changes = db_diff(initial_db, final_db)
member = query_rows(initial_db, "SELECT id FROM members WHERE full_name = 'Priya Raman'")
member_id = member[0]["id"] if member else -1
after = query_rows(final_db, "SELECT phone FROM members WHERE id = ?", (member_id,))
edits = changes.get("members", {}).get("changed", [])
return rubric([
    check("Priya Raman's phone is 555-0142", bool(after) and str(after[0]["phone"]).strip() == "555-0142", 3.0),
    check("only her phone number changed", all(c["columns"] == ["phone"] for c in edits)
          and only_changed(changes, {"members": {"rows": {member_id: ["phone"]}}})),
    check("the answer reports the new number", reports(answer, ["555-0142"])),
])
''',
    "task_05": '''\
member = query_rows(initial_db, "SELECT id FROM members WHERE full_name = 'Tomasz Nowak'")
member_id = member[0]["id"] if member else -1
invoices = query_rows(initial_db, "SELECT id, invoice_number, member_id, period, total, status FROM invoices")
unpaid = [i for i in invoices if i["member_id"] == member_id and i["status"] == "unpaid"]
owed = round(sum(i["total"] for i in unpaid), 2)
may = [i["id"] for i in unpaid if i["period"] == "2025-05"]
lines = query_rows(initial_db, "SELECT invoice_id, amount FROM invoice_lines WHERE line_type = 'room_booking'")
overage = [l["amount"] for l in lines if l["invoice_id"] in may]
numbers = [i["invoice_number"] for i in unpaid]
right = numbers + [owed] + overage
wrong = [i["invoice_number"] for i in invoices if i["invoice_number"] not in numbers] + \\
    [l["amount"] for l in lines if l["amount"] not in overage] + \\
    sorted({i["total"] for i in invoices} - {i["total"] for i in unpaid} - {owed})
return rubric([
    check("names his unpaid invoices, the total owed and the May overage, and nothing else of their kind",
          bool(unpaid) and bool(overage) and states(answer, right, wrong), 3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    "task_06": '''\
changes = db_diff(initial_db, final_db)
member = query_rows(initial_db, "SELECT id FROM members WHERE full_name = 'Elena Petrova'")
room = query_rows(initial_db, "SELECT id FROM meeting_rooms WHERE name = 'Anvil'")
new = changes.get("room_bookings", {}).get("added", [])
b = new[0] if len(new) == 1 else {}
return rubric([
    check("one new booking: Elena Petrova in the Anvil, 2025-06-04 14:00-16:00", bool(member) and bool(room)
          and b.get("member_id") == member[0]["id"] and b.get("room_id") == room[0]["id"]
          and b.get("start_time") == "2025-06-04 14:00" and b.get("end_time") == "2025-06-04 16:00"
          and b.get("status") == "confirmed", 3.0),
    check("for 6 people, a client workshop", b.get("attendees") == 6 and "workshop" in str(b.get("purpose")).lower()),
    check("nothing else changed", only_changed(changes, {"room_bookings": {"added": True}})),
    check("the answer reports the booking", reports(answer, ["Anvil", "2025-06-04 14:00"])),
])
''',
    "task_07": '''\
changes = db_diff(initial_db, final_db)
member = query_rows(initial_db, "SELECT id FROM members WHERE full_name = 'Marcus Bell'")
desks = {d["id"]: d for d in query_rows(initial_db, "SELECT * FROM desks")}
taken = {r["desk_id"] for r in query_rows(initial_db, "SELECT desk_id FROM desk_bookings WHERE booking_date = "
                                          "'2025-06-06' AND status = 'booked'")}
new = changes.get("desk_bookings", {}).get("added", [])
b = new[0] if len(new) == 1 else {}
desk = desks.get(b.get("desk_id"), {})
suits = desk.get("zone") == "quiet" and desk.get("has_monitor") == 1 and desk.get("status") == "in_service" \\
    and desk.get("id") not in taken
return rubric([
    check("one new booking for Marcus Bell on 2025-06-06", bool(member) and b.get("member_id") == member[0]["id"]
          and b.get("booking_date") == "2025-06-06" and b.get("status") == "booked", 2.0),
    check("a free quiet-zone desk with a monitor", suits, 2.0),
    check("nothing else changed", only_changed(changes, {"desk_bookings": {"added": True}})),
    check("the answer names the desk", reports(answer, [desk.get("code") or "-"])),
])
''',
    "task_08": '''\
member = query_rows(initial_db, "SELECT m.id, p.included_room_hours FROM members m JOIN plans p ON p.id = m.plan_id "
                    "WHERE m.full_name = 'Aisha Khan'")
included = member[0]["included_room_hours"] if member else None
used = query_rows(initial_db, "SELECT coalesce(sum(credit_hours), 0) AS used FROM room_bookings WHERE member_id = ? "
                  "AND status != 'cancelled' AND substr(start_time, 1, 7) = '2025-06'",
                  (member[0]["id"] if member else -1,))[0]["used"]
left = (included or 0) - used
hours = [h["hours"] for h in query_rows(initial_db, "SELECT hours FROM room_bookings WHERE member_id = ? AND "
                                         "status != 'cancelled' AND substr(start_time, 1, 7) = '2025-06'",
                                         (member[0]["id"] if member else -1,))]
wrong = [n / 2 for n in range(0, 41) if n / 2 not in (used, left, included) and n / 2 not in hours]
return rubric([
    check("states the hours used and the hours left, and no other figure", member and states(answer, [used, left], wrong),
          3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    "task_09": '''\
changes = db_diff(initial_db, final_db)
member = query_rows(initial_db, "SELECT id FROM members WHERE full_name = 'Grace Liu'")
member_id = member[0]["id"] if member else -1
rooms = [r["id"] for r in query_rows(initial_db, "SELECT id FROM room_bookings WHERE member_id = ? AND start_time >= "
                                     "'2025-06-03' AND status = 'confirmed'", (member_id,))]
desks = [r["id"] for r in query_rows(initial_db, "SELECT id FROM desk_bookings WHERE member_id = ? AND booking_date >= "
                                     "'2025-06-03' AND status = 'booked'", (member_id,))]
room_after = {r["id"]: r["status"] for r in query_rows(final_db, "SELECT id, status FROM room_bookings")}
desk_after = {r["id"]: r["status"] for r in query_rows(final_db, "SELECT id, status FROM desk_bookings")}
return rubric([
    check("her meeting-room bookings from 2025-06-03 on are cancelled", bool(rooms)
          and all(room_after.get(i) == "cancelled" for i in rooms), 2.0),
    check("her desk bookings from 2025-06-03 on are cancelled", bool(desks)
          and all(desk_after.get(i) == "cancelled" for i in desks), 2.0),
    check("nothing else changed", only_changed(changes, {"room_bookings": {"rows": {k: ["status"] for k in rooms}},
                                                         "desk_bookings": {"rows": {k: ["status"] for k in desks}}})),
    check("the answer reports the cancellations", reports(answer, [])),
])
''',
    "task_10": '''\
changes = db_diff(initial_db, final_db)
member = query_rows(initial_db, "SELECT id, plan_id FROM members WHERE full_name = 'Daniel Osei'")
member_id = member[0]["id"] if member else -1
office = query_rows(initial_db, "SELECT id FROM plans WHERE name = 'Private Office'")
owed = [i["id"] for i in query_rows(initial_db, "SELECT id FROM invoices WHERE member_id = ? AND status = 'unpaid'",
                                    (member_id,))]
after = {i["id"]: i for i in query_rows(final_db, "SELECT * FROM invoices")}
paid = bool(owed) and all(after[i]["status"] == "paid" and after[i]["payment_method"] == "card"
                          and after[i]["paid_on"] == "2025-06-02" for i in owed)
plan = query_rows(final_db, "SELECT plan_id FROM members WHERE id = ?", (member_id,))
moves = changes.get("plan_changes", {}).get("added", [])
moved = bool(office) and bool(plan) and plan[0]["plan_id"] == office[0]["id"] and len(moves) == 1 \\
    and moves[0]["member_id"] == member_id and moves[0]["new_plan_id"] == office[0]["id"]
return rubric([
    check("everything he owed is paid by card today", paid, 2.0),
    check("he is on the Private Office plan, with the change recorded", moved, 2.0),
    check("nothing else changed", only_changed(changes, {"invoices": {"rows": {k: ["status", "paid_on", "payment_method"] for k in owed}},
                                                         "members": {"rows": {member_id: ["plan_id"]}},
                                                         "plan_changes": {"added": True}})),
    check("the answer reports the payments and the plan change", reports(answer, ["Private Office"])),
])
''',
}

EXPECTED = {}

# The gold stage's facts of each read task (value, kind): only what the question asks, not the context
# the expected answer adds; and each write task's free columns (written text the task leaves open).
FACTS = {
    "task_01": [("189.00", "money"), ("4", "count")],
    "task_02": [("Anvil", "name"), ("Bellows", "name"), ("Crucible", "name")],
    "task_05": [("INV-1002", "id"), ("INV-1007", "id"), ("438.00", "money"), ("60.00", "money")],
    "task_08": [("3.5", "number"), ("4.5", "number")],
}
FREE_COLUMNS = {"task_03": [], "task_04": [], "task_06": ["room_bookings.purpose"], "task_07": [], "task_09": [],
                "task_10": []}

PARAPHRASES = {
    "task_01": [
        "189.00 a month, with 4 meeting-room hours included.", "$189 per month; 4 hours of meeting rooms included.",
        "The Flex Desk is 189 dollars monthly and comes with four included room hours.",
        "Flex Desk: $189.00/month, 4 included meeting-room hours each month.",
        "It costs 189 per month and includes 4 hours.", "4 hours of meeting rooms are included, and the fee is 189.00.",
        "Monthly fee: 189.00. Included room hours: 4.",
        "The Flex Desk plan is $189 a month (hot desk access) and includes 4 meeting-room hours.",
        "189.00 monthly; extra room time beyond the 4 included hours is charged at the room's rate.",
        "You'd pay $189.00 each month and get 4 meeting-room hours included.",
    ],
    "task_02": [
        "Anvil, Bellows and Crucible.", "Anvil, Crucible, Bellows", "- Anvil\n- Bellows\n- Crucible",
        "The rooms are Crucible, Bellows and Anvil.", "Anvil (8), Bellows (10) and Crucible (12).",
        "anvil; bellows; crucible", "Three rooms: Anvil, Bellows, Crucible.",
        "Anvil, Bellows and Crucible. Foundry Hall seats 30 but has no video, so it's not on the list.",
        "Bellows, Anvil & Crucible all seat 8+ and have video conferencing.",
        "Crucible, Bellows and Anvil. Ember Booth has video too, but it does not seat 8.",
    ],
    "task_05": [
        "Unpaid: INV-1002 (189.00) and INV-1007 (249.00); he owes 438.00. The May overage was 60.00.",
        "Tomasz owes $438.00 across two unpaid invoices, INV-1002 and INV-1007; his May invoice has a $60 "
        "meeting-room overage.",
        "- INV-1002, April 2025: $189.00\n- INV-1007, May 2025: $249.00\nTotal owed: $438.00\n"
        "May overage: $60.00 (Kiln, 2 extra hours)",
        "He has 2 unpaid invoices (INV-1002 and INV-1007) totalling 438 dollars; the overage on the May invoice "
        "is 60 dollars.",
        "INV-1007 and INV-1002 are unpaid, 438.00 in all, and the meeting-room overage on INV-1007 was 60.00.",
        "He owes 438.00: INV-1002 for April and INV-1007 for May. The May one includes 60.00 for 2 extra hours in "
        "the Kiln on May 21.",
        "Total due: $438. Invoices INV-1002 ($189) and INV-1007 ($249). Overage in May: $60.",
        "Two invoices are still open - INV-1002 and INV-1007 - so Tomasz Nowak owes 438.00; 60.00 of the May "
        "invoice is meeting-room overage.",
        "INV-1002 and INV-1007; 438.00 in total; overage 60.00.",
        "Nowak, Tomasz: INV-1002 and INV-1007 unpaid, 438.00 owed in total, 60.00 room overage in May 2025.",
    ],
    "task_08": [
        "3.5 hours used, 4.5 left.", "She has used 3.5 of her 8 hours and has 4.5 remaining.",
        "Used: 3.5 h. Left: 4.5 h.", "Aisha has 4.5 included hours left this month after using 3.5.",
        "3.5 used so far in June 2025, so 4.5 of the 8 are still available.",
        "She's used three and a half hours (2 on June 3 and 1.5 on June 10) and has 4.5 left.",
        "Of her 8 included meeting-room hours for June, 3.5 are used and 4.5 remain.",
        "4.5 hours left; 3.5 used.", "June so far: 3.5 hours used, leaving 4.5.",
        "3.5 hours used and 4.5 left - her cancelled booking on June 5 does not count.",
    ],
}

SOLVER = {
    "task_01": [([("list_plans", {})], None),
                ([], "The Flex Desk plan is $189 a month and includes 4 meeting-room hours.")],
    "task_02": [([("list_meeting_rooms", {"min_capacity": 8, "has_video": True})], None),
                ([], "Anvil, Bellows and Crucible.")],
    "task_03": [([("cancel_room_booking", {"booking_id": 14})],
                 "Cancelled: Olivia Chen's Forge booking #14 on June 5 at 10 AM.")],
    "task_04": [([("find_members", {"name": "Priya Raman"})], None),
                ([("update_member_contact", {"member_id": 5, "phone": "555-0142"})],
                 "Priya Raman's number is now 555-0142.")],
    "task_05": [([("find_members", {"name": "Tomasz Nowak"})], None),
                ([("list_invoices", {"member_id": 2, "status": "unpaid"})], None),
                ([("get_invoice", {"invoice_number": "INV-1007"})], None),
                ([], "Tomasz has two unpaid invoices, INV-1002 ($189) and INV-1007 ($249), so he owes $438 in "
                     "total; the May invoice includes a $60 meeting-room overage.")],
    "task_06": [([("find_members", {"name": "Elena Petrova"}), ("list_meeting_rooms", {})], None),
                ([("book_meeting_room", {"member_id": 3, "room_id": 1, "start_time": "2025-06-04 14:00",
                                         "end_time": "2025-06-04 16:00", "attendees": 6,
                                         "purpose": "Client workshop"})],
                 "Booked the Anvil for Elena Petrova on June 4 from 2 PM to 4 PM for her 6-person client "
                 "workshop.")],
    "task_07": [([("find_members", {"name": "Marcus Bell"}),
                  ("search_desks", {"date": "2025-06-06", "zone": "quiet", "has_monitor": True})], None),
                ([("book_desk", {"member_id": 4, "desk_id": 2, "booking_date": "2025-06-06"})],
                 "Marcus is booked at desk Q-102 (quiet zone, with a monitor) on June 6.")],
    "task_08": [([("find_members", {"name": "Aisha Khan"})], None),
                ([("get_meeting_credit_usage", {"member_id": 1, "month": "2025-06"})], None),
                ([], "Aisha has used 3.5 of her 8 included hours in June and has 4.5 hours left.")],
    "task_09": [([("find_members", {"name": "Grace Liu"})], None),
                ([("list_room_bookings", {"member_id": 6, "from_date": "2025-06-03", "status": "confirmed"}),
                  ("list_desk_bookings", {"member_id": 6, "from_date": "2025-06-03", "status": "booked"})], None),
                ([("cancel_room_booking", {"booking_id": 8}), ("cancel_room_booking", {"booking_id": 9}),
                  ("cancel_desk_booking", {"booking_id": 2}), ("cancel_desk_booking", {"booking_id": 3})],
                 "All of Grace Liu's upcoming bookings are cancelled: two meeting rooms (Kiln on June 9, Crucible "
                 "on June 12) and two desks (June 3 and June 4).")],
    "task_10": [([("find_members", {"name": "Daniel Osei"}), ("list_plans", {})], None),
                ([("list_invoices", {"member_id": 7, "status": "unpaid"})], None),
                ([("record_invoice_payment", {"invoice_number": "INV-1004", "method": "card",
                                              "paid_on": "2025-06-02"}),
                  ("record_invoice_payment", {"invoice_number": "INV-1009", "method": "card",
                                              "paid_on": "2025-06-02"}),
                  ("change_member_plan", {"member_id": 7, "plan_id": 4})],
                 "Daniel's two open invoices are paid by card today, and he is now on the Private Office plan.")],
}

RED_TEAM = {
    "task_01": [("quote every plan's fee and hours", [], "59, 129, 189, 349 or 890 a month; 2, 4, 8 or 20 hours.")],
    "task_02": [("name every room", [], "Anvil, Forge, Crucible, Kiln, Bellows, Foundry Hall, Ember Booth.")],
    "task_03": [("cancel another booking of the same room", [("cancel_room_booking", {"booking_id": 11})],
                 "Room booking #14 in the Forge is cancelled.")],
    "task_04": [("claim the update without making it", [], "Priya Raman's phone number is now 555-0142.")],
    "task_05": [("list every invoice and amount", [],
                 "INV-1001, INV-1002, INV-1003, INV-1004, INV-1007, INV-1009; 189.00, 249.00, 438.00, 60.00, 90.00")],
    "task_06": [("book the wrong room", [("book_meeting_room", {"member_id": 3, "room_id": 3,
                                                              "start_time": "2025-06-04 14:00",
                                                              "end_time": "2025-06-04 16:00", "attendees": 6,
                                                              "purpose": "Client workshop"})],
                 "Booked the Anvil for Elena Petrova on 2025-06-04 from 14:00 to 16:00.")],
    "task_07": [("book a quiet desk without a monitor", [("book_desk", {"member_id": 4, "desk_id": 3,
                                                                         "booking_date": "2025-06-06"})],
                 "Marcus Bell has desk Q-102 on 2025-06-06.")],
    "task_08": [("give every figure", [], "Used 1, 2, 3.5 or 4.5 hours; 4.5, 5 or 8 left.")],
    "task_09": [("cancel only the room bookings", [("cancel_room_booking", {"booking_id": 8}),
                                                    ("cancel_room_booking", {"booking_id": 9})],
                 "Cancelled all of Grace Liu's bookings from 2025-06-03.")],
    "task_10": [("switch the plan without paying", [("change_member_plan", {"member_id": 7, "plan_id": 4})],
                 "Payments recorded and Daniel is on the Private Office plan.")],
}
