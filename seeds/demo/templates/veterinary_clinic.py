"""Task templates for the demo's Riverside Veterinary Clinic: the `templates` stage's answers, and the
reward agents' answers about one sampled instance of each. Only what a model would write; `record.py`
puts them into veterinary_clinic.json."""

SLOTS = ("WITH slots(start) AS (VALUES ('2025-06-16 09:00'), ('2025-06-17 14:30'), ('2025-06-18 10:00'), "
         "('2025-06-19 16:00')) ")

READ = [
    {
        "name": "owner_contact_details",
        "kind": "read",
        "difficulty": "easy",
        "instruction": "What phone number and email address do we have on file for {owner_name}?",
        "query": "SELECT id AS owner_id, full_name AS owner_name, phone, email FROM owners ORDER BY id",
        "actions": [{"tool": "find_owners", "arguments": {"name": "{owner_name}"}}],
        "expected_answer": "{owner_name}: phone {phone}, email {email}.",
        "facts": [{"value": "{phone}", "kind": "id"}, {"value": "{email}", "kind": "text"}],
        "free_columns": None,
        "verifier_body": '''\
me = query_rows(initial_db, "SELECT phone, email FROM owners WHERE id = ?", (params["owner_id"],))
right = [me[0]["phone"], me[0]["email"]] if me else []
others = query_rows(initial_db, "SELECT phone, email FROM owners WHERE id <> ?", (params["owner_id"],))
wrong = [r["phone"] for r in others] + [r["email"] for r in others]
return rubric([
    check("gives the owner's phone number and email, and no one else's", bool(me) and states(answer, right, wrong), 3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    },
    {
        "name": "pet_breed_and_weight",
        "kind": "read",
        "difficulty": "easy",
        "instruction": "What breed is {pet_name}, and how much does {pet_name} weigh according to our records?",
        "query": "SELECT id AS pet_id, name AS pet_name, breed, weight_kg FROM pets ORDER BY id",
        "actions": [{"tool": "find_pets", "arguments": {"name": "{pet_name}"}}],
        "expected_answer": "{pet_name} is a {breed} weighing {weight_kg} kg.",
        "facts": [{"value": "{breed}", "kind": "text"}, {"value": "{weight_kg}", "kind": "number"}],
        "free_columns": None,
        "verifier_body": '''\
pet = query_rows(initial_db, "SELECT breed, weight_kg FROM pets WHERE id = ?", (params["pet_id"],))
right = [pet[0]["breed"], pet[0]["weight_kg"]] if pet else []
others = query_rows(initial_db, "SELECT breed, weight_kg FROM pets WHERE id <> ?", (params["pet_id"],))
wrong = [r["breed"] for r in others if r["breed"] not in right] + [r["weight_kg"] for r in others
                                                                   if r["weight_kg"] not in right]
return rubric([
    check("gives the pet's breed and weight, and no other", bool(pet) and states(answer, right, wrong), 3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    },
    {
        "name": "treatment_price",
        "kind": "read",
        "difficulty": "easy",
        "instruction": "How much do we charge for a {treatment_name}?",
        "query": "SELECT code, name AS treatment_name, category, price FROM treatments ORDER BY code",
        "actions": [{"tool": "list_treatments", "arguments": {"category": "{category}"}}],
        "expected_answer": "A {treatment_name} costs ${price:.2f}.",
        "facts": [{"value": "{price:.2f}", "kind": "money"}],
        "free_columns": None,
        "verifier_body": '''\
row = query_rows(initial_db, "SELECT price FROM treatments WHERE code = ?", (params["code"],))
price = row[0]["price"] if row else None
others = [r["price"] for r in query_rows(initial_db, "SELECT DISTINCT price FROM treatments") if r["price"] != price]
return rubric([
    check("gives the treatment's price, and no other", price is not None
          and states(answer, [{"value": price, "kind": "money"}], others), 3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    },
    {
        "name": "next_appointment",
        "kind": "read",
        "difficulty": "medium",
        "instruction": "When is {pet_name}'s next appointment, and which vet is it with?",
        "query": "SELECT p.id AS pet_id, p.name AS pet_name, substr(a.start_time, 1, 10) AS day, substr(a.start_time, "
                 "12, 5) AS time, v.full_name AS vet_name FROM appointments a JOIN pets p ON p.id = a.pet_id JOIN "
                 "veterinarians v ON v.id = a.vet_id WHERE a.status = 'scheduled' AND a.start_time = (SELECT "
                 "MIN(x.start_time) FROM appointments x WHERE x.pet_id = p.id AND x.status = 'scheduled') ORDER BY p.id",
        "actions": [{"tool": "find_pets", "arguments": {"name": "{pet_name}"}},
                    {"tool": "list_appointments", "arguments": {"pet_id": "{pet_id}", "status": "scheduled"}}],
        "expected_answer": "{pet_name}'s next appointment is on {day} at {time} with {vet_name}.",
        "facts": [{"value": "{day}", "kind": "date"}, {"value": "{time}", "kind": "time"},
                  {"value": "{vet_name}", "kind": "name"}],
        "free_columns": None,
        "verifier_body": '''\
first = query_rows(initial_db, "SELECT substr(a.start_time, 1, 10) AS day, substr(a.start_time, 12, 5) AS time, "
                   "v.full_name FROM appointments a JOIN veterinarians v ON v.id = a.vet_id WHERE a.pet_id = ? AND "
                   "a.status = 'scheduled' ORDER BY a.start_time LIMIT 1", (params["pet_id"],))
right = [first[0]["day"], first[0]["time"], first[0]["full_name"]] if first else []
days = [r["d"] for r in query_rows(initial_db, "SELECT DISTINCT substr(start_time, 1, 10) AS d FROM appointments")
        if r["d"] not in right]
times = [r["t"] for r in query_rows(initial_db, "SELECT DISTINCT substr(start_time, 12, 5) AS t FROM appointments")
         if r["t"] not in right]
vets = [r["full_name"] for r in query_rows(initial_db, "SELECT full_name FROM veterinarians") if r["full_name"] not in right]
return rubric([
    check("gives the next appointment's day, time and vet, and no other", bool(first)
          and states(answer, right, days + times + vets), 3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    },
    {
        "name": "invoice_line_amount",
        "kind": "read",
        "difficulty": "hard",
        "instruction": "How much were we charged for {pet_name}'s {treatment_name} at the visit on {visit_day}?",
        "query": "SELECT at.id AS line_id, p.name AS pet_name, p.owner_id, t.name AS treatment_name, substr(a.start_time, "
                 "1, 10) AS visit_day, i.id AS invoice_id, round(at.quantity * at.unit_price, 2) AS amount FROM "
                 "appointment_treatments at JOIN appointments a ON a.id = at.appointment_id JOIN pets p ON p.id = "
                 "a.pet_id JOIN treatments t ON t.code = at.treatment_code JOIN invoices i ON i.appointment_id = a.id "
                 "ORDER BY at.id",
        "actions": [{"tool": "find_pets", "arguments": {"name": "{pet_name}"}},
                    {"tool": "list_invoices", "arguments": {"owner_id": "{owner_id}"}},
                    {"tool": "get_invoice", "arguments": {"invoice_id": "{invoice_id}"}}],
        "expected_answer": "The {treatment_name} for {pet_name} on {visit_day} came to ${amount:.2f}.",
        "facts": [{"value": "{amount:.2f}", "kind": "money"}],
        "free_columns": None,
        "verifier_body": '''\
line = query_rows(initial_db, "SELECT round(quantity * unit_price, 2) AS amount FROM appointment_treatments WHERE id = ?",
                  (params["line_id"],))
amount = line[0]["amount"] if line else None
others = [r["a"] for r in query_rows(initial_db, "SELECT DISTINCT round(quantity * unit_price, 2) AS a FROM "
                                                 "appointment_treatments") if r["a"] != amount]
totals = [r["total"] for r in query_rows(initial_db, "SELECT total FROM invoices") if r["total"] != amount]
return rubric([
    check("gives what that treatment was charged, and no other amount", amount is not None
          and states(answer, [{"value": amount, "kind": "money"}], others + totals), 3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    },
    {
        "name": "pet_owner_phone",
        "kind": "read",
        "difficulty": "medium",
        "instruction": "Whose pet is {pet_name}, and what phone number should we call to reach the owner?",
        "query": "SELECT p.id AS pet_id, p.name AS pet_name, o.id AS owner_id, o.full_name AS owner_name, o.phone FROM "
                 "pets p JOIN owners o ON o.id = p.owner_id ORDER BY p.id",
        "actions": [{"tool": "find_pets", "arguments": {"name": "{pet_name}"}},
                    {"tool": "get_owner", "arguments": {"owner_id": "{owner_id}"}}],
        "expected_answer": "{pet_name} belongs to {owner_name}; call {phone}.",
        "facts": [{"value": "{owner_name}", "kind": "name"}, {"value": "{phone}", "kind": "id"}],
        "free_columns": None,
        "verifier_body": '''\
owner = query_rows(initial_db, "SELECT o.full_name, o.phone FROM pets p JOIN owners o ON o.id = p.owner_id WHERE p.id = ?",
                   (params["pet_id"],))
right = [owner[0]["full_name"], owner[0]["phone"]] if owner else []
others = query_rows(initial_db, "SELECT full_name, phone FROM owners")
wrong = [r["full_name"] for r in others if r["full_name"] not in right] + [r["phone"] for r in others
                                                                          if r["phone"] not in right]
return rubric([
    check("names the owner and their phone number, and no one else", bool(owner) and states(answer, right, wrong), 3.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
''',
    },
]

WRITE = [
    {
        "name": "book_visit",
        "kind": "write",
        "difficulty": "medium",
        "instruction": "Please book {pet_name} in with {vet_name} on {start} for a {reason}.",
        "query": SLOTS + "SELECT p.id AS pet_id, p.name AS pet_name, v.id AS vet_id, v.full_name AS vet_name, s.start, "
                 "CASE p.species WHEN 'dog' THEN 'wellness exam' WHEN 'cat' THEN 'vaccination' ELSE 'health check' END "
                 "AS reason FROM pets p CROSS JOIN veterinarians v CROSS JOIN slots s WHERE v.active = 1 AND NOT "
                 "EXISTS (SELECT 1 FROM appointments a WHERE a.vet_id = v.id AND a.start_time = s.start AND a.status = "
                 "'scheduled') ORDER BY (p.id * 5 + v.id * 3 + length(s.start) + substr(s.start, 9, 2)) % 13, p.id, "
                 "v.id, s.start",
        "actions": [{"tool": "find_pets", "arguments": {"name": "{pet_name}"}},
                    {"tool": "search_vets", "arguments": {}},
                    {"tool": "book_appointment", "arguments": {"pet_id": "{pet_id}", "vet_id": "{vet_id}",
                                                               "start_time": "{start}", "reason": "{reason}"}}],
        "expected_answer": "{pet_name} is booked with {vet_name} on {start} for a {reason}.",
        "facts": None,
        "free_columns": [],
        "verifier_body": '''\
changes = db_diff(initial_db, final_db)
new = changes.get("appointments", {}).get("added", [])
visit = new[0] if len(new) == 1 else {}
return rubric([
    check("one new scheduled appointment of that pet with that vet at that time", visit.get("pet_id") == params["pet_id"]
          and visit.get("vet_id") == params["vet_id"] and visit.get("start_time") == params["start"]
          and visit.get("status") == "scheduled", 3.0),
    check("booked for the reason given", str(visit.get("reason") or "").strip().lower() == params["reason"]),
    check("nothing else changed", only_changed(changes, {"appointments": {"added": True}})),
    check("the answer reports the booking", reports(answer, [params["start"]])),
])
''',
    },
    {
        "name": "cancel_visit",
        "kind": "write",
        "difficulty": "easy",
        "instruction": "Please cancel {pet_name}'s appointment on {start_time}.",
        "query": "SELECT a.id AS appointment_id, p.id AS pet_id, p.name AS pet_name, a.start_time FROM appointments a "
                 "JOIN pets p ON p.id = a.pet_id WHERE a.status = 'scheduled' AND NOT EXISTS (SELECT 1 FROM "
                 "appointment_treatments x WHERE x.appointment_id = a.id) ORDER BY a.id",
        "actions": [{"tool": "find_pets", "arguments": {"name": "{pet_name}"}},
                    {"tool": "list_appointments", "arguments": {"pet_id": "{pet_id}", "status": "scheduled"}},
                    {"tool": "cancel_appointment", "arguments": {"appointment_id": "{appointment_id}"}}],
        "expected_answer": "{pet_name}'s appointment on {start_time} is cancelled.",
        "facts": None,
        "free_columns": [],
        "verifier_body": '''\
changes = db_diff(initial_db, final_db)
row = query_rows(final_db, "SELECT status FROM appointments WHERE id = ?", (params["appointment_id"],))
return rubric([
    check("that appointment is cancelled", bool(row) and row[0]["status"] == "cancelled", 3.0),
    check("nothing else changed", only_changed(changes, {"appointments": {"rows": {params["appointment_id"]: ["status"]}}})),
    check("the answer reports the cancellation", reports(answer, [params["start_time"]])),
])
''',
    },
    {
        "name": "move_visit",
        "kind": "write",
        "difficulty": "medium",
        "instruction": "Please move {pet_name}'s appointment on {start_time} to {new_start}.",
        "query": "WITH moves(shift) AS (VALUES ('+1 day'), ('+2 days'), ('+7 days')) SELECT a.id AS appointment_id, "
                 "p.id AS pet_id, p.name AS pet_name, a.start_time, strftime('%Y-%m-%d %H:%M', a.start_time, m.shift) "
                 "AS new_start FROM appointments a JOIN pets p ON p.id = a.pet_id CROSS JOIN moves m WHERE a.status = "
                 "'scheduled' AND NOT EXISTS (SELECT 1 FROM appointments b WHERE b.vet_id = a.vet_id AND b.status = "
                 "'scheduled' AND b.start_time = strftime('%Y-%m-%d %H:%M', a.start_time, m.shift)) ORDER BY a.id, m.shift",
        "actions": [{"tool": "find_pets", "arguments": {"name": "{pet_name}"}},
                    {"tool": "list_appointments", "arguments": {"pet_id": "{pet_id}", "status": "scheduled"}},
                    {"tool": "reschedule_appointment", "arguments": {"appointment_id": "{appointment_id}",
                                                                     "new_start_time": "{new_start}"}}],
        "expected_answer": "{pet_name}'s appointment is moved to {new_start}.",
        "facts": None,
        "free_columns": [],
        "verifier_body": '''\
changes = db_diff(initial_db, final_db)
row = query_rows(final_db, "SELECT start_time, status FROM appointments WHERE id = ?", (params["appointment_id"],))
return rubric([
    check("that appointment starts at the new time", bool(row) and row[0]["start_time"] == params["new_start"]
          and row[0]["status"] == "scheduled", 3.0),
    check("nothing else changed", only_changed(changes, {"appointments": {"rows": {params["appointment_id"]:
                                                                                   ["start_time"]}}})),
    check("the answer reports the new time", reports(answer, [params["new_start"]])),
])
''',
    },
    {
        "name": "record_treatment",
        "kind": "write",
        "difficulty": "medium",
        "instruction": "Please record a {treatment_name} on {pet_name}'s appointment of {start_time}.",
        "query": "SELECT a.id AS appointment_id, p.id AS pet_id, p.name AS pet_name, a.start_time, t.code, t.name AS "
                 "treatment_name, t.category, t.price FROM appointments a JOIN pets p ON p.id = a.pet_id CROSS JOIN "
                 "treatments t WHERE a.status = 'scheduled' AND NOT EXISTS (SELECT 1 FROM invoices i WHERE "
                 "i.appointment_id = a.id) ORDER BY (a.id * 7 + length(t.code) * 3 + unicode(t.code)) % 11, a.id, t.code",
        "actions": [{"tool": "find_pets", "arguments": {"name": "{pet_name}"}},
                    {"tool": "list_appointments", "arguments": {"pet_id": "{pet_id}", "status": "scheduled"}},
                    {"tool": "list_treatments", "arguments": {"category": "{category}"}},
                    {"tool": "add_treatment", "arguments": {"appointment_id": "{appointment_id}",
                                                            "treatment_code": "{code}"}}],
        "expected_answer": "A {treatment_name} ({code}, ${price:.2f}) is recorded on {pet_name}'s appointment of "
                           "{start_time}.",
        "facts": None,
        "free_columns": [],
        "verifier_body": '''\
changes = db_diff(initial_db, final_db)
new = changes.get("appointment_treatments", {}).get("added", [])
line = new[0] if len(new) == 1 else {}
price = query_rows(initial_db, "SELECT price FROM treatments WHERE code = ?", (params["code"],))
return rubric([
    check("one new line of that treatment on that appointment", line.get("appointment_id") == params["appointment_id"]
          and line.get("treatment_code") == params["code"] and line.get("quantity") == 1, 3.0),
    check("at the list price", bool(price) and line.get("unit_price") == price[0]["price"]),
    check("nothing else changed", only_changed(changes, {"appointment_treatments": {"added": True}})),
    check("the answer reports the treatment", reports(answer, [params["treatment_name"]])),
])
''',
    },
    {
        "name": "register_new_pet",
        "kind": "write",
        "difficulty": "easy",
        "instruction": "{owner_name} has a new {species}: please add {pet_name}, a {breed} born {birth_date}, to "
                       "their pets.",
        "query": "WITH newcomers(pet_name, species, breed, birth_date) AS (VALUES ('Pepper', 'cat', 'Bengal', "
                 "'2024-09-01'), ('Hazel', 'rabbit', 'Mini Rex', '2024-03-15'), ('Ziggy', 'dog', 'Border Collie', "
                 "'2023-11-20'), ('Sunny', 'bird', 'Budgerigar', '2024-06-30')) SELECT o.id AS owner_id, o.full_name "
                 "AS owner_name, n.pet_name, n.species, n.breed, n.birth_date FROM owners o CROSS JOIN newcomers n "
                 "WHERE NOT EXISTS (SELECT 1 FROM pets p WHERE p.owner_id = o.id AND p.name = n.pet_name) "
                 "ORDER BY (o.id + length(n.pet_name)) % 4, o.id, n.pet_name",
        "actions": [{"tool": "find_owners", "arguments": {"name": "{owner_name}"}},
                    {"tool": "add_pet", "arguments": {"owner_id": "{owner_id}", "name": "{pet_name}",
                                                      "species": "{species}", "breed": "{breed}",
                                                      "birth_date": "{birth_date}"}}],
        "expected_answer": "{pet_name} the {breed} is now on {owner_name}'s record.",
        "facts": None,
        "free_columns": [],
        "verifier_body": '''\
changes = db_diff(initial_db, final_db)
new = changes.get("pets", {}).get("added", [])
pet = new[0] if len(new) == 1 else {}
return rubric([
    check("one new pet of that owner with that name and species", pet.get("owner_id") == params["owner_id"]
          and str(pet.get("name") or "").strip() == params["pet_name"] and pet.get("species") == params["species"], 3.0),
    check("the breed and birth date as given", str(pet.get("breed") or "").strip().lower() == params["breed"].lower()
          and pet.get("birth_date") == params["birth_date"]),
    check("nothing else changed", only_changed(changes, {"pets": {"added": True}})),
    check("the answer reports the new pet", reports(answer, [params["pet_name"]])),
])
''',
    },
    {
        "name": "close_visit_and_pay",
        "kind": "write",
        "difficulty": "hard",
        "instruction": "{pet_name}'s {time} appointment with {vet_name} today is done: record a {treatment_name}, "
                       "close the appointment and take the payment by {method}.",
        "query": "WITH methods(method) AS (VALUES ('card'), ('cash'), ('insurance')) SELECT a.id AS appointment_id, "
                 "p.id AS pet_id, p.name AS pet_name, v.full_name AS vet_name, substr(a.start_time, 12, 5) AS time, "
                 "t.code, t.name AS treatment_name, t.price + COALESCE((SELECT SUM(x.quantity * x.unit_price) FROM "
                 "appointment_treatments x WHERE x.appointment_id = a.id), 0) AS total, m.method, (SELECT MAX(id) + 1 "
                 "FROM invoices) AS invoice_id FROM appointments a JOIN pets p ON p.id = a.pet_id JOIN veterinarians v "
                 "ON v.id = a.vet_id CROSS JOIN treatments t CROSS JOIN methods m WHERE a.status = 'scheduled' AND "
                 "substr(a.start_time, 1, 10) = '2025-06-02' ORDER BY (unicode(t.code) + length(t.code) + "
                 "length(m.method)) % 5, a.id, t.code, m.method",
        "actions": [{"tool": "find_pets", "arguments": {"name": "{pet_name}"}},
                    {"tool": "list_appointments", "arguments": {"pet_id": "{pet_id}", "date": "2025-06-02"}},
                    {"tool": "add_treatment", "arguments": {"appointment_id": "{appointment_id}",
                                                            "treatment_code": "{code}"}},
                    {"tool": "complete_appointment", "arguments": {"appointment_id": "{appointment_id}"}},
                    {"tool": "pay_invoice", "arguments": {"invoice_id": "{invoice_id}", "method": "{method}",
                                                          "paid_on": "2025-06-02"}}],
        "expected_answer": "{pet_name}'s visit is closed with a {treatment_name}; the invoice of ${total:.2f} is paid by "
                           "{method}.",
        "facts": None,
        "free_columns": [],
        "verifier_body": '''\
changes = db_diff(initial_db, final_db)
visit = params["appointment_id"]
lines = changes.get("appointment_treatments", {}).get("added", [])
done = query_rows(final_db, "SELECT status FROM appointments WHERE id = ?", (visit,))
bills = [i for i in changes.get("invoices", {}).get("added", []) if i["appointment_id"] == visit]
bill = bills[0] if len(bills) == 1 else {}
total = query_rows(final_db, "SELECT round(SUM(quantity * unit_price), 2) AS t FROM appointment_treatments WHERE "
                   "appointment_id = ?", (visit,))
return rubric([
    check("the treatment is recorded on the visit", len(lines) == 1 and lines[0]["appointment_id"] == visit
          and lines[0]["treatment_code"] == params["code"], 2.0),
    check("the appointment is completed", bool(done) and done[0]["status"] == "completed", 2.0),
    check("its invoice is for every treatment of the visit", bool(bill) and bool(total)
          and abs((bill.get("total") or 0) - (total[0]["t"] or 0)) < 0.005),
    check("paid today by the method asked for", bill.get("status") == "paid" and bill.get("payment_method") ==
          params["method"] and bill.get("paid_on") == "2025-06-02", 2.0),
    check("nothing else changed", only_changed(changes, {"appointment_treatments": {"added": True}, "invoices":
                                                         {"added": True}, "appointments": {"rows": {visit: ["status"]}}})),
    check("the answer reports the payment", reports(answer, [{"value": total[0]["t"] if total else 0, "kind": "money"}])),
])
''',
    },
]

TEMPLATES = {"read": READ, "write": WRITE}

# The reward agents on the first instance of each template (the instances `synth tasks` samples).
PARAPHRASES = {
    "owner_contact_details_001": [
        "555-0101, maria.lopez@example.com", "Phone: 555-0101; email: maria.lopez@example.com.",
        "Maria's number is 555-0101 and her email is maria.lopez@example.com.",
        "Lopez, Maria - 555-0101 - maria.lopez@example.com",
        "We have 555-0101 and maria.lopez@example.com on file for her.",
        "Her phone is 555-0101; email maria.lopez@example.com.",
    ],
    "pet_breed_and_weight_001": [
        "Labrador Retriever, 28.5 kg.", "Bella is a Labrador Retriever and weighs 28.5 kilograms.",
        "Breed: Labrador Retriever; weight: 28.5 kg.", "A 28.5 kg Labrador Retriever.",
        "Our records show Bella as a Labrador Retriever at 28.5 kg.", "She's a Labrador Retriever weighing 28.5 kg.",
    ],
    "treatment_price_001": [
        "$180", "A dental cleaning is $180.00.", "We charge 180 dollars for it.", "It costs $180.", "180.00",
        "Dental cleaning (DEN-CLN): $180.00.",
    ],
    "next_appointment_001": [
        "2025-06-05 at 09:30 with Dr. Hannah Reed.", "Bella is next seen on June 5 at 9:30 AM by Dr. Hannah Reed.",
        "Thursday, June 5, 2025, 9:30am - Dr. Hannah Reed.", "Her next visit is on 6/5 at 09:30 with Dr. Hannah Reed.",
        "On June 5th at 9:30 with Hannah Reed.", "Dr. Reed sees Bella next, on 5 June 2025 at 09:30.",
    ],
    "invoice_line_amount_001": [
        "$55.00", "It came to $55.", "The exam was charged at 55.00.",
        "Bella's Standard wellness exam on May 12 cost $55.00.", "We charged $55 for that exam.", "55 dollars.",
    ],
    "pet_owner_phone_001": [
        "Maria Lopez, 555-0101.", "Bella is Maria Lopez's dog; call her on 555-0101.", "Lopez, Maria - phone 555-0101.",
        "The owner is Maria Lopez (555-0101).", "Call Maria Lopez at 555-0101.",
        "Bella belongs to Maria Lopez, whose number is 555-0101.",
    ],
}

SOLVER = {
    "owner_contact_details_001": [([("find_owners", {"name": "Maria Lopez"})], None),
                                  ([], "Maria Lopez: phone 555-0101, email maria.lopez@example.com.")],
    "pet_breed_and_weight_001": [([("find_pets", {"name": "Bella"})], None),
                                 ([], "Bella is a Labrador Retriever and weighs 28.5 kg.")],
    "treatment_price_001": [([("list_treatments", {"category": "dental"})], None),
                            ([], "A dental cleaning costs $180.00.")],
    "next_appointment_001": [([("find_pets", {"name": "Bella"})], None),
                             ([("list_appointments", {"pet_id": 1, "status": "scheduled"})], None),
                             ([], "Bella's next appointment is on June 5, 2025 at 09:30 with Dr. Hannah Reed.")],
    "invoice_line_amount_001": [([("find_pets", {"name": "Bella"})], None),
                                ([("list_invoices", {"owner_id": 1})], None),
                                ([("get_invoice", {"invoice_id": 1})], None),
                                ([], "Bella's Standard wellness exam on 2025-05-12 was charged $55.00.")],
    "pet_owner_phone_001": [([("find_pets", {"name": "Bella"})], None),
                            ([("get_owner", {"owner_id": 1})], None),
                            ([], "Bella belongs to Maria Lopez; her phone number is 555-0101.")],
    "book_visit_001": [([("find_pets", {"name": "Bella"}), ("search_vets", {})], None),
                       ([("book_appointment", {"pet_id": 1, "vet_id": 4, "start_time": "2025-06-19 16:00",
                                               "reason": "wellness exam"})],
                        "Booked: Bella sees Dr. Tom Becker on 2025-06-19 16:00 for a wellness exam.")],
    "cancel_visit_001": [([("find_pets", {"name": "Bella"})], None),
                         ([("list_appointments", {"pet_id": 1, "status": "scheduled"})], None),
                         ([("cancel_appointment", {"appointment_id": 5})],
                          "Bella's appointment on 2025-06-05 09:30 is cancelled.")],
    "move_visit_001": [([("find_pets", {"name": "Bella"})], None),
                       ([("list_appointments", {"pet_id": 1, "status": "scheduled"})], None),
                       ([("reschedule_appointment", {"appointment_id": 5, "new_start_time": "2025-06-06 09:30"})],
                        "Done: Bella's appointment now starts at 2025-06-06 09:30.")],
    "record_treatment_001": [([("find_pets", {"name": "Bella"})], None),
                             ([("list_appointments", {"pet_id": 1, "status": "scheduled"}),
                               ("list_treatments", {"category": "lab"})], None),
                             ([("add_treatment", {"appointment_id": 5, "treatment_code": "LAB-BLD"})],
                              "Recorded a Blood panel (LAB-BLD, $95.00) on Bella's 2025-06-05 09:30 appointment.")],
    "register_new_pet_001": [([("find_owners", {"name": "James Carter"})], None),
                             ([("add_pet", {"owner_id": 2, "name": "Pepper", "species": "cat", "breed": "Bengal",
                                            "birth_date": "2024-09-01"})],
                              "Pepper, a Bengal cat born 2024-09-01, is now on James Carter's record.")],
    "close_visit_and_pay_001": [([("find_pets", {"name": "Max"})], None),
                                ([("list_appointments", {"pet_id": 6, "date": "2025-06-02"})], None),
                                ([("add_treatment", {"appointment_id": 7, "treatment_code": "DEN-XRAY"}),
                                  ("complete_appointment", {"appointment_id": 7})], None),
                                ([("pay_invoice", {"invoice_id": 7, "method": "card", "paid_on": "2025-06-02"})],
                                 "Max's visit is closed with a Dental X-ray and the $120.00 invoice is paid by card.")],
}

RED_TEAM = {
    "owner_contact_details_001": [("list every owner's phone", [], "555-0101, 555-0102, 555-0103, 555-0104; "
                                                                    "maria.lopez@example.com")],
    "pet_breed_and_weight_001": [("hedge", [], "Bella is a Labrador Retriever or maybe a Boxer, about 28.5 or 31 kg.")],
    "treatment_price_001": [("list prices", [], "$120, $180 or $95.")],
    "next_appointment_001": [("every vet", [], "June 5 at 09:30 with Dr. Hannah Reed, Dr. Victor Alvarez, Dr. Priya "
                                               "Nair or Dr. Tom Becker.")],
    "invoice_line_amount_001": [("several amounts", [], "$55.00, $30.00 or $85.00")],
    "pet_owner_phone_001": [("two owners", [], "Maria Lopez or James Carter; 555-0101 or 555-0102.")],
    "book_visit_001": [("book another vet", [("book_appointment", {"pet_id": 1, "vet_id": 1,
                                                                   "start_time": "2025-06-19 16:00",
                                                                   "reason": "wellness exam"})],
                        "Booked: Bella sees Dr. Tom Becker on 2025-06-19 16:00 for a wellness exam.")],
    "cancel_visit_001": [("cancel the wrong visit", [("cancel_appointment", {"appointment_id": 6})],
                          "Bella's appointment on 2025-06-05 09:30 is cancelled.")],
    "move_visit_001": [("claim it", [], "Bella's appointment now starts at 2025-06-06 09:30.")],
    "record_treatment_001": [("record another treatment", [("add_treatment", {"appointment_id": 5,
                                                                              "treatment_code": "LAB-SKIN"})],
                              "Recorded a Blood panel on Bella's appointment.")],
    "register_new_pet_001": [("add the pet to another owner", [("add_pet", {"owner_id": 1, "name": "Pepper",
                                                                            "species": "cat", "breed": "Bengal",
                                                                            "birth_date": "2024-09-01"})],
                              "Pepper is now on James Carter's record.")],
    "close_visit_and_pay_001": [("record the treatment only", [("add_treatment", {"appointment_id": 7,
                                                                                  "treatment_code": "DEN-XRAY"})],
                                 "Max's visit is closed and the $120.00 invoice is paid by card.")],
}
