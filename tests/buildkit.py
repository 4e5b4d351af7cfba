"""Scripted model answers for building one realistic env: the Riverside Veterinary Clinic.

Reusable by any test that needs the build stages to run against the fake model
server: `script_build(fake_model.script)` answers stages tasks, schema, data,
tool_spec and tool_code for subject ENV_ID (the scenario's env_id) with a
consistent set of 10 tasks, a 7-table schema, data that makes every task
possible, and 15 tools with real bodies. Broken variants (BAD_DDL,
DATA_WITH_FK_ERROR, BUGGY_BODIES) let tests script a failing first round.
"""

from __future__ import annotations

from typing import Any

from synth.artifacts import Scenario
from synth.llm.script import Reply, Script

SCENARIO = Scenario(
    name="Riverside Veterinary Clinic",
    category="healthcare",
    seed="veterinary clinic",
    description=(
        "Riverside Veterinary Clinic is a small-animal practice in a mid-sized town. Its front-desk staff "
        "use the clinic's management application to keep records of pet owners and their pets (dogs, cats, "
        "rabbits, birds and reptiles), to book, reschedule and cancel appointments with the clinic's "
        "veterinarians, each of whom has a specialty (general practice, surgery, dentistry, dermatology, "
        "exotic animals). When a visit ends, staff record the treatments given from the clinic's price list "
        "(exams, vaccines, dental work, lab tests, medication, surgery), close the appointment, which issues "
        "an invoice, and later record the payment by cash, card or insurance. Owners call to ask about "
        "upcoming visits, what they owe and what treatments cost, and to update their contact details."
    ),
)
ENV_ID = SCENARIO.env_id  # "riverside_veterinary_clinic"

TASKS: list[dict[str, str]] = [
    {"instruction": "What phone number do we have on file for Daniel Okafor?", "kind": "read",
     "difficulty": "easy"},
    {"instruction": "Which of our active vets specialise in dentistry? Just give me their names.", "kind": "read",
     "difficulty": "easy"},
    {"instruction": "Please cancel appointment #8, Coco's nail trim on 2025-06-10.", "kind": "write",
     "difficulty": "easy"},
    {"instruction": "Maria Lopez has a new phone number, 555-0199. Please update her record.", "kind": "write",
     "difficulty": "easy"},
    {"instruction": "Sophie Martin adopted a cat: add Pepper, a Bengal born 2024-09-01 weighing 3.1 kg, to her "
     "pets.", "kind": "write", "difficulty": "easy"},
    {"instruction": "What was the invoice total for Rocky's last completed visit, and has it been paid yet?",
     "kind": "read", "difficulty": "medium"},
    {"instruction": "Book Bella in with our dentist, Dr. Priya Nair, on 2025-06-11 at 14:00 for a dental check.",
     "kind": "write", "difficulty": "medium"},
    {"instruction": "Move Milo's vaccination appointment on 2025-06-05 to 2025-06-06 at 11:00.", "kind": "write",
     "difficulty": "medium"},
    {"instruction": "Which pets is Dr. Hannah Reed seeing on 2025-06-05, and which phone number should we call "
     "to confirm with their owners?", "kind": "read", "difficulty": "medium"},
    {"instruction": "Max just finished his 08:00 consultation with Dr. Victor Alvarez today. Record a standard "
     "wellness exam and a blood panel for the visit, close the appointment and take the payment by card "
     "today.", "kind": "write", "difficulty": "hard"},
]

SCHEMA_SQL = """\
CREATE TABLE owners (
    id INTEGER PRIMARY KEY,
    full_name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    phone TEXT NOT NULL,
    address TEXT
);
CREATE TABLE veterinarians (
    id INTEGER PRIMARY KEY,
    full_name TEXT NOT NULL,
    specialty TEXT NOT NULL CHECK (specialty IN ('general', 'surgery', 'dentistry', 'dermatology', 'exotics')),
    active INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1))
);
CREATE TABLE pets (
    id INTEGER PRIMARY KEY,
    owner_id INTEGER NOT NULL REFERENCES owners(id),
    name TEXT NOT NULL,
    species TEXT NOT NULL CHECK (species IN ('dog', 'cat', 'rabbit', 'bird', 'reptile')),
    breed TEXT,
    birth_date TEXT,
    weight_kg REAL CHECK (weight_kg IS NULL OR weight_kg > 0)
);
CREATE TABLE treatments (
    code TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    category TEXT NOT NULL CHECK (category IN ('exam', 'vaccine', 'dental', 'lab', 'surgery', 'medication')),
    price REAL NOT NULL CHECK (price >= 0)
);
CREATE TABLE appointments (
    id INTEGER PRIMARY KEY,
    pet_id INTEGER NOT NULL REFERENCES pets(id),
    vet_id INTEGER NOT NULL REFERENCES veterinarians(id),
    start_time TEXT NOT NULL,
    reason TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'scheduled' CHECK (status IN ('scheduled', 'completed', 'cancelled'))
);
CREATE TABLE appointment_treatments (
    id INTEGER PRIMARY KEY,
    appointment_id INTEGER NOT NULL REFERENCES appointments(id),
    treatment_code TEXT NOT NULL REFERENCES treatments(code),
    quantity INTEGER NOT NULL DEFAULT 1 CHECK (quantity > 0),
    unit_price REAL NOT NULL CHECK (unit_price >= 0)
);
CREATE TABLE invoices (
    id INTEGER PRIMARY KEY,
    appointment_id INTEGER NOT NULL UNIQUE REFERENCES appointments(id),
    total REAL NOT NULL CHECK (total >= 0),
    status TEXT NOT NULL DEFAULT 'unpaid' CHECK (status IN ('unpaid', 'paid')),
    issued_on TEXT NOT NULL,
    paid_on TEXT,
    payment_method TEXT CHECK (payment_method IS NULL OR payment_method IN ('cash', 'card', 'insurance'))
);
CREATE INDEX idx_owners_name ON owners(full_name);
CREATE INDEX idx_pets_owner ON pets(owner_id);
CREATE INDEX idx_pets_name ON pets(name);
CREATE INDEX idx_appointments_pet ON appointments(pet_id);
CREATE INDEX idx_appointments_vet_time ON appointments(vet_id, start_time);
CREATE INDEX idx_appointment_treatments_appointment ON appointment_treatments(appointment_id);
"""

DATA_SQL = """\
INSERT INTO owners (id, full_name, email, phone, address) VALUES
 (1, 'Maria Lopez', 'maria.lopez@example.com', '555-0101', '12 Elm Street'),
 (2, 'James Carter', 'james.carter@example.com', '555-0102', '48 Harbor Road'),
 (3, 'Aiko Tanaka', 'aiko.tanaka@example.com', '555-0103', '7 Willow Lane'),
 (4, 'Daniel Okafor', 'daniel.okafor@example.com', '555-0104', '230 Mill Avenue'),
 (5, 'Sophie Martin', 'sophie.martin@example.com', '555-0105', '19 Chestnut Court'),
 (6, 'Liam O''Brien', 'liam.obrien@example.com', '555-0106', '5 Quarry Hill');
INSERT INTO veterinarians (id, full_name, specialty, active) VALUES
 (1, 'Dr. Hannah Reed', 'general', 1),
 (2, 'Dr. Victor Alvarez', 'surgery', 1),
 (3, 'Dr. Priya Nair', 'dentistry', 1),
 (4, 'Dr. Tom Becker', 'exotics', 1),
 (5, 'Dr. Grace Kim', 'dentistry', 0);
INSERT INTO pets (id, owner_id, name, species, breed, birth_date, weight_kg) VALUES
 (1, 1, 'Bella', 'dog', 'Labrador Retriever', '2019-04-12', 28.5),
 (2, 1, 'Milo', 'cat', 'Siamese', '2021-08-03', 4.2),
 (3, 2, 'Rocky', 'dog', 'Boxer', '2017-11-20', 31.0),
 (4, 3, 'Luna', 'cat', 'Maine Coon', '2020-02-14', 6.8),
 (5, 3, 'Coco', 'rabbit', 'Holland Lop', '2022-05-01', 1.6),
 (6, 4, 'Max', 'dog', 'Beagle', '2018-07-09', 12.3),
 (7, 5, 'Kiwi', 'bird', 'Cockatiel', '2023-01-15', 0.09),
 (8, 6, 'Nala', 'dog', 'Golden Retriever', '2020-10-30', 27.0),
 (9, 4, 'Spike', 'reptile', 'Bearded Dragon', '2021-03-22', 0.45);
INSERT INTO treatments (code, name, category, price) VALUES
 ('EXAM-STD', 'Standard wellness exam', 'exam', 55.0),
 ('EXAM-EXO', 'Exotic animal exam', 'exam', 75.0),
 ('VAC-RAB', 'Rabies vaccine', 'vaccine', 30.0),
 ('VAC-DHPP', 'DHPP vaccine', 'vaccine', 35.0),
 ('VAC-FVRCP', 'FVRCP vaccine', 'vaccine', 32.0),
 ('DEN-CLN', 'Dental cleaning', 'dental', 180.0),
 ('LAB-BLD', 'Blood panel', 'lab', 95.0),
 ('MED-DEWORM', 'Deworming tablet', 'medication', 12.5),
 ('SRG-LUMP', 'Lump removal', 'surgery', 420.0);
INSERT INTO appointments (id, pet_id, vet_id, start_time, reason, status) VALUES
 (1, 1, 1, '2025-05-12 09:00', 'Annual checkup', 'completed'),
 (2, 3, 3, '2025-05-20 14:00', 'Dental cleaning', 'completed'),
 (3, 4, 1, '2025-05-28 10:30', 'Vaccination', 'completed'),
 (4, 7, 4, '2025-05-30 11:00', 'Feather loss', 'completed'),
 (5, 1, 1, '2025-06-05 09:30', 'Limping on front leg', 'scheduled'),
 (6, 2, 1, '2025-06-05 10:00', 'Vaccination', 'scheduled'),
 (7, 6, 2, '2025-06-02 08:00', 'Lump removal consultation', 'scheduled'),
 (8, 5, 4, '2025-06-10 15:00', 'Nail trim and checkup', 'scheduled'),
 (9, 8, 3, '2025-06-12 13:00', 'Dental cleaning', 'scheduled'),
 (10, 3, 1, '2025-05-02 16:00', 'Ear infection', 'cancelled'),
 (11, 9, 4, '2025-06-03 09:00', 'Annual checkup', 'scheduled');
INSERT INTO appointment_treatments (id, appointment_id, treatment_code, quantity, unit_price) VALUES
 (1, 1, 'EXAM-STD', 1, 55.0),
 (2, 1, 'VAC-RAB', 1, 30.0),
 (3, 2, 'DEN-CLN', 1, 180.0),
 (4, 2, 'LAB-BLD', 1, 95.0),
 (5, 3, 'VAC-FVRCP', 1, 32.0),
 (6, 3, 'EXAM-STD', 1, 55.0),
 (7, 4, 'EXAM-EXO', 1, 75.0),
 (8, 4, 'MED-DEWORM', 2, 12.5);
INSERT INTO invoices (id, appointment_id, total, status, issued_on, paid_on, payment_method) VALUES
 (1, 1, 85.0, 'paid', '2025-05-12', '2025-05-12', 'card'),
 (2, 2, 275.0, 'unpaid', '2025-05-20', NULL, NULL),
 (3, 3, 87.0, 'paid', '2025-05-28', '2025-05-28', 'cash'),
 (4, 4, 100.0, 'unpaid', '2025-05-30', NULL, NULL);
"""


def _p(name: str, type_: str, description: str, required: bool = True, enum: list | None = None) -> dict[str, Any]:
    return {"name": name, "type": type_, "description": description, "required": required, "enum": enum,
            "items": None}


SPECIES = ["dog", "cat", "rabbit", "bird", "reptile"]
TOOL_SPEC: list[dict[str, Any]] = [
    {"name": "find_owners", "read_only": True,
     "description": "Find pet owners by part of their name, or by exact email or phone. Returns each matching "
     "owner with contact details and their pets. Fails if no filter is given.",
     "params": [_p("name", "string", "Part of the owner's full name", False),
                _p("email", "string", "Exact email address", False),
                _p("phone", "string", "Exact phone number, e.g. 555-0101", False)]},
    {"name": "find_pets", "read_only": True,
     "description": "Find pets by part of their name, optionally of one species. Returns each pet with its "
     "details and its owner's id and name.",
     "params": [_p("name", "string", "Part of the pet's name"),
                _p("species", "string", "Only pets of this species", False, SPECIES)]},
    {"name": "search_vets", "read_only": True,
     "description": "List the clinic's veterinarians, optionally only those of one specialty. Inactive vets "
     "are left out unless include_inactive is true.",
     "params": [_p("specialty", "string", "Only vets with this specialty", False,
                   ["general", "surgery", "dentistry", "dermatology", "exotics"]),
                _p("include_inactive", "boolean", "Also list vets no longer seeing patients", False)]},
    {"name": "list_appointments", "read_only": True,
     "description": "List appointments ordered by start time, filtered by pet, vet, day (YYYY-MM-DD) and/or "
     "status. Each has the pet's and the vet's name.",
     "params": [_p("pet_id", "integer", "Only this pet's appointments", False),
                _p("vet_id", "integer", "Only this vet's appointments", False),
                _p("date", "string", "Only appointments on this day, YYYY-MM-DD", False),
                _p("status", "string", "Only appointments in this status", False,
                   ["scheduled", "completed", "cancelled"])]},
    {"name": "list_treatments", "read_only": True,
     "description": "The clinic's price list of treatments (code, name, category, price), optionally one "
     "category or up to a maximum price, cheapest first.",
     "params": [_p("category", "string", "Only this category", False,
                   ["exam", "vaccine", "dental", "lab", "surgery", "medication"]),
                _p("max_price", "number", "Only treatments costing at most this much", False)]},
    {"name": "list_invoices", "read_only": True,
     "description": "List invoices, optionally one owner's and/or one status, with the pet's name; also "
     "returns the sum of their totals.",
     "params": [_p("owner_id", "integer", "Only invoices for this owner's pets", False),
                _p("status", "string", "Only invoices in this status", False, ["unpaid", "paid"])]},
    {"name": "get_invoice", "read_only": True,
     "description": "One invoice with its line items (treatment, quantity, unit price, amount). Fails if the "
     "invoice does not exist.",
     "params": [_p("invoice_id", "integer", "The invoice's id")]},
    {"name": "add_pet", "read_only": False,
     "description": "Register a new pet for an existing owner and return the new pet record. Fails if the "
     "owner does not exist or a value is invalid.",
     "params": [_p("owner_id", "integer", "The owner's id"), _p("name", "string", "The pet's name"),
                _p("species", "string", "The pet's species", True, SPECIES),
                _p("breed", "string", "The breed, if known", False),
                _p("birth_date", "string", "Birth date, YYYY-MM-DD", False),
                _p("weight_kg", "number", "Weight in kilograms", False)]},
    {"name": "update_owner_contact", "read_only": False,
     "description": "Change an owner's phone, email and/or address and return the updated owner. Fails if "
     "nothing is given or the email belongs to another owner.",
     "params": [_p("owner_id", "integer", "The owner's id"),
                _p("phone", "string", "New phone number", False),
                _p("email", "string", "New email address", False),
                _p("address", "string", "New postal address", False)]},
    {"name": "book_appointment", "read_only": False,
     "description": "Book a pet in with an active vet at a start time ('YYYY-MM-DD HH:MM'). Fails if the vet "
     "already has a scheduled appointment then. Returns the new appointment.",
     "params": [_p("pet_id", "integer", "The pet's id"), _p("vet_id", "integer", "The vet's id"),
                _p("start_time", "string", "Start, 'YYYY-MM-DD HH:MM'"),
                _p("reason", "string", "Why the pet is coming in")]},
    {"name": "cancel_appointment", "read_only": False,
     "description": "Cancel a scheduled appointment and return it. Fails if it is already completed or "
     "cancelled.",
     "params": [_p("appointment_id", "integer", "The appointment's id")]},
    {"name": "reschedule_appointment", "read_only": False,
     "description": "Move a scheduled appointment to a new start time ('YYYY-MM-DD HH:MM') with the same vet. "
     "Fails if the vet is busy then. Returns the updated appointment.",
     "params": [_p("appointment_id", "integer", "The appointment's id"),
                _p("new_start_time", "string", "New start, 'YYYY-MM-DD HH:MM'")]},
    {"name": "add_treatment", "read_only": False,
     "description": "Record a treatment from the price list on an appointment that is not cancelled or "
     "invoiced yet, at the list price. Returns the recorded line item.",
     "params": [_p("appointment_id", "integer", "The appointment's id"),
                _p("treatment_code", "string", "Treatment code from the price list, e.g. EXAM-STD"),
                _p("quantity", "integer", "How many (default 1)", False)]},
    {"name": "complete_appointment", "read_only": False,
     "description": "Close a scheduled appointment that has at least one treatment: marks it completed and "
     "issues an unpaid invoice for the sum of its treatments. Returns the invoice.",
     "params": [_p("appointment_id", "integer", "The appointment's id")]},
    {"name": "pay_invoice", "read_only": False,
     "description": "Record the payment of an unpaid invoice on a date (YYYY-MM-DD) by cash, card or "
     "insurance. Returns the updated invoice.",
     "params": [_p("invoice_id", "integer", "The invoice's id"),
                _p("method", "string", "How it was paid", True, ["cash", "card", "insurance"]),
                _p("paid_on", "string", "Payment date, YYYY-MM-DD")]},
]

TOOL_BODIES: dict[str, str] = {
    "find_owners": """\
if not (name or email or phone):
    raise ToolError("give at least one of name, email or phone")
sql = "SELECT id, full_name, email, phone, address FROM owners WHERE 1 = 1"
args = []
if name:
    sql += " AND full_name LIKE ?"
    args.append(f"%{name.strip()}%")
if email:
    sql += " AND lower(email) = lower(?)"
    args.append(email.strip())
if phone:
    sql += " AND phone = ?"
    args.append(phone.strip())
owners = []
for row in db.execute(sql + " ORDER BY full_name", args).fetchall():
    owner = dict(row)
    owner["pets"] = [dict(p) for p in db.execute(
        "SELECT id, name, species FROM pets WHERE owner_id = ? ORDER BY name", (row["id"],))]
    owners.append(owner)
return owners
""",
    "find_pets": """\
sql = ("SELECT p.id, p.name, p.species, p.breed, p.birth_date, p.weight_kg, p.owner_id, "
       "o.full_name AS owner_name FROM pets p JOIN owners o ON o.id = p.owner_id WHERE p.name LIKE ?")
args = [f"%{name.strip()}%"]
if species:
    sql += " AND p.species = ?"
    args.append(species)
return [dict(r) for r in db.execute(sql + " ORDER BY p.name, p.id", args)]
""",
    "search_vets": """\
sql = "SELECT id, full_name, specialty, active FROM veterinarians WHERE 1 = 1"
args = []
if specialty:
    sql += " AND specialty = ?"
    args.append(specialty)
if not include_inactive:
    sql += " AND active = 1"
return [{**dict(r), "active": bool(r["active"])} for r in db.execute(sql + " ORDER BY full_name", args)]
""",
    "list_appointments": """\
sql = ("SELECT a.id, a.start_time, a.reason, a.status, a.pet_id, p.name AS pet_name, p.owner_id, "
       "a.vet_id, v.full_name AS vet_name FROM appointments a JOIN pets p ON p.id = a.pet_id "
       "JOIN veterinarians v ON v.id = a.vet_id WHERE 1 = 1")
args = []
if pet_id is not None:
    sql += " AND a.pet_id = ?"
    args.append(pet_id)
if vet_id is not None:
    sql += " AND a.vet_id = ?"
    args.append(vet_id)
if date:
    if not re.fullmatch(r"\\d{4}-\\d{2}-\\d{2}", date):
        raise ToolError("date must be YYYY-MM-DD")
    sql += " AND substr(a.start_time, 1, 10) = ?"
    args.append(date)
if status:
    sql += " AND a.status = ?"
    args.append(status)
return [dict(r) for r in db.execute(sql + " ORDER BY a.start_time, a.id", args)]
""",
    "list_treatments": """\
sql = "SELECT code, name, category, price FROM treatments WHERE 1 = 1"
args = []
if category:
    sql += " AND category = ?"
    args.append(category)
if max_price is not None:
    sql += " AND price <= ?"
    args.append(max_price)
return [dict(r) for r in db.execute(sql + " ORDER BY price, code", args)]
""",
    "list_invoices": """\
sql = ("SELECT i.id, i.appointment_id, i.total, i.status, i.issued_on, i.paid_on, i.payment_method, "
       "p.name AS pet_name, p.owner_id FROM invoices i JOIN appointments a ON a.id = i.appointment_id "
       "JOIN pets p ON p.id = a.pet_id WHERE 1 = 1")
args = []
if owner_id is not None:
    if db.execute("SELECT 1 FROM owners WHERE id = ?", (owner_id,)).fetchone() is None:
        raise ToolError(f"no owner with id {owner_id}")
    sql += " AND p.owner_id = ?"
    args.append(owner_id)
if status:
    sql += " AND i.status = ?"
    args.append(status)
invoices = [dict(r) for r in db.execute(sql + " ORDER BY i.issued_on, i.id", args)]
return {"invoices": invoices, "total": round(sum(i["total"] for i in invoices), 2)}
""",
    "get_invoice": """\
invoice = db.execute(
    "SELECT i.*, a.pet_id, p.name AS pet_name, p.owner_id FROM invoices i "
    "JOIN appointments a ON a.id = i.appointment_id JOIN pets p ON p.id = a.pet_id WHERE i.id = ?",
    (invoice_id,)).fetchone()
if invoice is None:
    raise ToolError(f"no invoice with id {invoice_id}")
items = [dict(r) for r in db.execute(
    "SELECT t.code, t.name, at.quantity, at.unit_price, round(at.quantity * at.unit_price, 2) AS amount "
    "FROM appointment_treatments at JOIN treatments t ON t.code = at.treatment_code "
    "WHERE at.appointment_id = ? ORDER BY at.id", (invoice["appointment_id"],))]
return {**dict(invoice), "items": items}
""",
    "add_pet": """\
if db.execute("SELECT 1 FROM owners WHERE id = ?", (owner_id,)).fetchone() is None:
    raise ToolError(f"no owner with id {owner_id}")
name = name.strip()
if not name:
    raise ToolError("the pet's name must not be empty")
if birth_date is not None:
    try:
        datetime.date.fromisoformat(birth_date)
    except ValueError:
        raise ToolError("birth_date must be YYYY-MM-DD")
if weight_kg is not None and weight_kg <= 0:
    raise ToolError("weight_kg must be positive")
cur = db.execute(
    "INSERT INTO pets (owner_id, name, species, breed, birth_date, weight_kg) VALUES (?, ?, ?, ?, ?, ?)",
    (owner_id, name, species, breed, birth_date, weight_kg))
return dict(db.execute("SELECT * FROM pets WHERE id = ?", (cur.lastrowid,)).fetchone())
""",
    "update_owner_contact": """\
if db.execute("SELECT 1 FROM owners WHERE id = ?", (owner_id,)).fetchone() is None:
    raise ToolError(f"no owner with id {owner_id}")
changes = {k: v.strip() for k, v in (("phone", phone), ("email", email), ("address", address)) if v is not None}
if not changes:
    raise ToolError("give at least one of phone, email or address to change")
if any(not v for v in changes.values()):
    raise ToolError("contact details must not be empty")
if "email" in changes:
    clash = db.execute("SELECT id FROM owners WHERE lower(email) = lower(?) AND id != ?",
                       (changes["email"], owner_id)).fetchone()
    if clash is not None:
        raise ToolError(f"email {changes['email']} already belongs to owner {clash['id']}")
for column, value in changes.items():
    db.execute(f"UPDATE owners SET {column} = ? WHERE id = ?", (value, owner_id))
return dict(db.execute("SELECT id, full_name, email, phone, address FROM owners WHERE id = ?",
                       (owner_id,)).fetchone())
""",
    "book_appointment": """\
try:
    slot = datetime.datetime.strptime(start_time.strip(), "%Y-%m-%d %H:%M").strftime("%Y-%m-%d %H:%M")
except ValueError:
    raise ToolError("start_time must be 'YYYY-MM-DD HH:MM'")
if db.execute("SELECT 1 FROM pets WHERE id = ?", (pet_id,)).fetchone() is None:
    raise ToolError(f"no pet with id {pet_id}")
vet = db.execute("SELECT full_name, active FROM veterinarians WHERE id = ?", (vet_id,)).fetchone()
if vet is None:
    raise ToolError(f"no vet with id {vet_id}")
if not vet["active"]:
    raise ToolError(f"{vet['full_name']} is no longer seeing patients")
if not reason.strip():
    raise ToolError("give the reason for the visit")
busy = db.execute("SELECT id FROM appointments WHERE vet_id = ? AND start_time = ? AND status = 'scheduled'",
                  (vet_id, slot)).fetchone()
if busy is not None:
    raise ToolError(f"{vet['full_name']} already has appointment {busy['id']} at {slot}")
cur = db.execute("INSERT INTO appointments (pet_id, vet_id, start_time, reason, status) "
                 "VALUES (?, ?, ?, ?, 'scheduled')", (pet_id, vet_id, slot, reason.strip()))
return dict(db.execute("SELECT * FROM appointments WHERE id = ?", (cur.lastrowid,)).fetchone())
""",
    "cancel_appointment": """\
appointment = db.execute("SELECT * FROM appointments WHERE id = ?", (appointment_id,)).fetchone()
if appointment is None:
    raise ToolError(f"no appointment with id {appointment_id}")
if appointment["status"] != "scheduled":
    raise ToolError(f"appointment {appointment_id} is {appointment['status']} and cannot be cancelled")
db.execute("UPDATE appointments SET status = 'cancelled' WHERE id = ?", (appointment_id,))
return {**dict(appointment), "status": "cancelled"}
""",
    "reschedule_appointment": """\
try:
    slot = datetime.datetime.strptime(new_start_time.strip(), "%Y-%m-%d %H:%M").strftime("%Y-%m-%d %H:%M")
except ValueError:
    raise ToolError("new_start_time must be 'YYYY-MM-DD HH:MM'")
appointment = db.execute("SELECT * FROM appointments WHERE id = ?", (appointment_id,)).fetchone()
if appointment is None:
    raise ToolError(f"no appointment with id {appointment_id}")
if appointment["status"] != "scheduled":
    raise ToolError(f"appointment {appointment_id} is {appointment['status']} and cannot be moved")
busy = db.execute("SELECT id FROM appointments WHERE vet_id = ? AND start_time = ? AND status = 'scheduled' "
                  "AND id != ?", (appointment["vet_id"], slot, appointment_id)).fetchone()
if busy is not None:
    raise ToolError(f"the vet already has appointment {busy['id']} at {slot}")
db.execute("UPDATE appointments SET start_time = ? WHERE id = ?", (slot, appointment_id))
return dict(db.execute("SELECT * FROM appointments WHERE id = ?", (appointment_id,)).fetchone())
""",
    "add_treatment": """\
count = 1 if quantity is None else quantity
if count < 1:
    raise ToolError("quantity must be at least 1")
appointment = db.execute("SELECT status FROM appointments WHERE id = ?", (appointment_id,)).fetchone()
if appointment is None:
    raise ToolError(f"no appointment with id {appointment_id}")
if appointment["status"] == "cancelled":
    raise ToolError(f"appointment {appointment_id} is cancelled")
if db.execute("SELECT 1 FROM invoices WHERE appointment_id = ?", (appointment_id,)).fetchone() is not None:
    raise ToolError(f"appointment {appointment_id} is already invoiced")
treatment = db.execute("SELECT code, name, price FROM treatments WHERE code = ?",
                       (treatment_code.strip().upper(),)).fetchone()
if treatment is None:
    raise ToolError(f"unknown treatment code {treatment_code!r}; see list_treatments")
cur = db.execute("INSERT INTO appointment_treatments (appointment_id, treatment_code, quantity, unit_price) "
                 "VALUES (?, ?, ?, ?)", (appointment_id, treatment["code"], count, treatment["price"]))
return {"id": cur.lastrowid, "appointment_id": appointment_id, "treatment_code": treatment["code"],
        "name": treatment["name"], "quantity": count, "unit_price": treatment["price"],
        "amount": round(count * treatment["price"], 2)}
""",
    "complete_appointment": """\
appointment = db.execute("SELECT * FROM appointments WHERE id = ?", (appointment_id,)).fetchone()
if appointment is None:
    raise ToolError(f"no appointment with id {appointment_id}")
if appointment["status"] != "scheduled":
    raise ToolError(f"appointment {appointment_id} is {appointment['status']}, not scheduled")
total = db.execute("SELECT sum(quantity * unit_price) FROM appointment_treatments WHERE appointment_id = ?",
                   (appointment_id,)).fetchone()[0]
if total is None:
    raise ToolError("record at least one treatment before completing the appointment")
db.execute("UPDATE appointments SET status = 'completed' WHERE id = ?", (appointment_id,))
cur = db.execute("INSERT INTO invoices (appointment_id, total, status, issued_on) VALUES (?, ?, 'unpaid', ?)",
                 (appointment_id, round(total, 2), appointment["start_time"][:10]))
return dict(db.execute("SELECT * FROM invoices WHERE id = ?", (cur.lastrowid,)).fetchone())
""",
    "pay_invoice": """\
try:
    datetime.date.fromisoformat(paid_on)
except ValueError:
    raise ToolError("paid_on must be YYYY-MM-DD")
invoice = db.execute("SELECT * FROM invoices WHERE id = ?", (invoice_id,)).fetchone()
if invoice is None:
    raise ToolError(f"no invoice with id {invoice_id}")
if invoice["status"] == "paid":
    raise ToolError(f"invoice {invoice_id} was already paid on {invoice['paid_on']}")
db.execute("UPDATE invoices SET status = 'paid', paid_on = ?, payment_method = ? WHERE id = ?",
           (paid_on, method, invoice_id))
return dict(db.execute("SELECT * FROM invoices WHERE id = ?", (invoice_id,)).fetchone())
""",
}

# ----------------------------------------------------------------------------- broken variants

# `treatment` is not a table: SQLite says "no such table: main.treatment" when the index is created.
BAD_DDL = SCHEMA_SQL.replace("CREATE INDEX idx_pets_name ON pets(name);",
                             "CREATE INDEX idx_pets_name ON pets(name);\n"
                             "CREATE INDEX idx_treatment_category ON treatment(category);")
# Pet 9 belongs to owner 7, who does not exist.
DATA_WITH_FK_ERROR = DATA_SQL.replace("(9, 4, 'Spike',", "(9, 7, 'Spike',")
# list_treatments orders by a column that does not exist: sqlite3.OperationalError at call time.
BUGGY_BODIES = {**TOOL_BODIES,
                "list_treatments": TOOL_BODIES["list_treatments"].replace("ORDER BY price, code", "ORDER BY cost")}


# The schema stage's rules: who is signed in, the status changes allowed, the invariants.
TRANSITIONS = [
    {"table": "appointments", "column": "status",
     "allowed": [{"state": "scheduled", "next": ["completed", "cancelled"]},
                 {"state": "completed", "next": []}, {"state": "cancelled", "next": []}]},
    {"table": "invoices", "column": "status",
     "allowed": [{"state": "unpaid", "next": ["paid"]}, {"state": "paid", "next": []}]},
]
INVARIANTS = [
    {"name": "invoice_total_matches_treatments", "description": "An invoice's total is the sum of its visit's "
     "treatments", "sql": "SELECT i.id, i.total FROM invoices i WHERE abs(i.total - (SELECT coalesce(sum(t.quantity "
     "* t.unit_price), 0) FROM appointment_treatments t WHERE t.appointment_id = i.appointment_id)) > 0.005"},
    {"name": "invoiced_visits_are_completed", "description": "Only completed appointments have an invoice",
     "sql": "SELECT i.id FROM invoices i JOIN appointments a ON a.id = i.appointment_id "
     "WHERE a.status != 'completed'"},
    {"name": "no_double_booking", "description": "No vet has two scheduled appointments at the same time",
     "sql": "SELECT a.id, b.id FROM appointments a JOIN appointments b ON a.vet_id = b.vet_id AND a.start_time = "
     "b.start_time AND a.id < b.id WHERE a.status = 'scheduled' AND b.status = 'scheduled'"},
    {"name": "paid_invoices_have_a_payment", "description": "An invoice is paid exactly when it has a payment date "
     "and method", "sql": "SELECT id FROM invoices WHERE (status = 'paid') != (paid_on IS NOT NULL AND "
     "payment_method IS NOT NULL)"},
]
ACTING = {"acting_user_table": "veterinarians", "acting_user_role": "veterinarian"}


def tasks_answer() -> dict[str, Any]:
    return {"tasks": TASKS}


def schema_answer(ddl: str = SCHEMA_SQL, invariants: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"ddl": ddl, **ACTING, "transitions": TRANSITIONS,
            "invariants": INVARIANTS if invariants is None else invariants}


def data_answer(inserts: str = DATA_SQL) -> dict[str, Any]:
    return {"inserts": inserts, "acting_user_id": 1, "acting_user_name": "Dr. Hannah Reed"}


def tool_spec_answer() -> dict[str, Any]:
    return {"tools": TOOL_SPEC}


def tool_code_answer(bodies: dict[str, str] = TOOL_BODIES, names: list[str] | None = None) -> dict[str, Any]:
    return {"functions": [{"name": n, "body": bodies[n]} for n in (names or list(bodies))]}


def asked_tools(subject: str, env_id: str = ENV_ID) -> list[str]:
    """The tools a tool_code request asks for: all of them (subject = env id) or those after the slash."""
    if subject == env_id:
        return [t["name"] for t in TOOL_SPEC]
    return subject.split("/", 1)[1].split("+")


def tool_code_handler(answers: list[dict[str, Any]], env_id: str = ENV_ID):
    """Answer tool_code requests by tool: the k-th time a tool is asked for, its body comes from the
    k-th answer that has one (the last such answer repeats), whatever the batching."""
    maps = [{f["name"]: f["body"] for f in a["functions"]} for a in answers]
    times: dict[str, int] = {}

    def handle(info: Any) -> Reply:
        functions = []
        for name in asked_tools(info.subject, env_id):
            having = [m for m in maps if name in m]
            k = times.get(name, 0)
            times[name] = k + 1
            functions.append({"name": name, "body": having[min(k, len(having) - 1)][name]})
        return Reply(json={"functions": functions})

    return handle


def script_build(script: Script, subject: str = ENV_ID, *, schema: list[str] | None = None,
                 data: list[str] | None = None, tool_code: list[dict[str, Any]] | None = None) -> Script:
    """Answer every build stage for `subject`; each list gives successive answers (the last repeats)."""
    script.add("tasks", subject, Reply(json=tasks_answer()))
    script.add("schema", subject, *[Reply(json=schema_answer(d)) for d in (schema or [SCHEMA_SQL])])
    script.add("data", subject, *[Reply(json=data_answer(d)) for d in (data or [DATA_SQL])])
    script.add("tool_spec", subject, Reply(json=tool_spec_answer()))
    script.add("tool_code", f"{subject}*", handler=tool_code_handler(tool_code or [tool_code_answer()], subject))
    return script


def scenario_named(name: str) -> Scenario:
    """The same clinic under another name (another env id), for multi-scenario tests."""
    return SCENARIO.model_copy(update={"name": name})
