# ------------------------------------------------------------------ answer and database helpers
# Shipped by synth at the top of every verifiers.py (it runs in the sandbox like the verifiers).
# Facts are found in an answer with normalisation: numbers and money ("3,460" = "$3,460.00" =
# 3460), dates ("2025-06-04" = "June 4" = "4 Jun 2025" = "6/4"), times ("09:00" = "9am" =
# "9:00 AM"), names ("Emma Rodriguez" = "Rodriguez, Emma"; "Dr. Priya Nair" = "Priya Nair" =
# "Dr. Nair"), case, punctuation and list separators. A wrong value counts against an answer
# unless the answer says it is not so ("Grace Kim is no longer active"). A hedge makes the answer
# unreliable whatever the alternative is, in the data or not: a hedge word ("maybe", "possibly")
# next to a value, a value offered with another ("2 or 3", "between 2 and 3"), or a sentence that
# opens with one ("... 555-0104. Or maybe: 666-1215").

_TITLES = frozenset({"dr", "mr", "mrs", "ms", "miss", "mx", "prof", "sir", "madam"})
_WORD = re.compile(r"[^\W_]+")
_MONTH_NAMES = {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
                "oct": 10, "nov": 11, "dec": 12}
_MON = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?" \
       r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_DATE_ISO = re.compile(r"(?<![\d-])(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)")
_DATE_MD = re.compile(r"\b" + _MON + r"\s+(\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+(\d{4})\b)?", re.I)
_DATE_DM = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MON + r"(?![a-z])(?:,?\s+(\d{4})\b)?", re.I)
_DATE_NUM = re.compile(r"(?<![\d/.])(\d{1,2})/(\d{1,2})(?:/(\d{4}|\d{2}))?(?![\d/])")
_TIME_12 = re.compile(r"(?<![\d:.])(\d{1,2})(?:[:.](\d{2}))?\s*([ap])\.?\s?m\.?(?![a-z])", re.I)
_TIME_24 = re.compile(r"(?<![\d:])(\d{1,2}):(\d{2})(?::\d{2})?(?![\d:])")
_TIME_WORD = re.compile(r"\b(noon|midday|midnight)\b", re.I)
_TIME_OCLOCK = re.compile(r"\b(\d{1,2})\s*o['\u2019]?\s?clock\b", re.I)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split())}
_TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
# "twenty-two" and "forty one" are numbers too (a real-model trial's correct "twenty-two" missed its 22), and
# so are "twice" and "thrice" ("no-showed twice"); "once" is left out: "once it is signed" states no count
_TIMES_WORDS = {"twice": 2, "thrice": 3}
_NUMBER_WORDS.update(_TIMES_WORDS)
_NUMBER_WORD = re.compile(r"\b(?:(" + "|".join(_TENS) + r")(?:[-\s]+(" + "|".join(list(_NUMBER_WORDS)[1:10])
                          + r"))?|(" + "|".join(_NUMBER_WORDS) + r"))(\s+and\s+a\s+half)?\b", re.I)
_ISO_DATE = re.compile(r"^\s*(\d{4})-(\d{2})-(\d{2})\s*$")
_ISO_DATETIME = re.compile(r"^\s*(\d{4})-(\d{2})-(\d{2})[ T](\d{1,2}):(\d{2})(?::\d{2}(?:\.\d+)?)?\s*$")
_CLOCK = re.compile(r"^\s*(\d{1,2}):(\d{2})(?::\d{2})?\s*$")
_NUMERIC = re.compile(r"^\s*[-+]?[$\u20ac\u00a3]?\s?\d[\d,]*(?:\.\d+)?\s*$")
_SENTENCE_END = re.compile(r"[.!?;]+(?=\s|$)|\n+")
_SCOPE_BREAK = re.compile(r"[()\[\]]|\s[-\u2013\u2014]+\s|\u2014")
_ABBREVIATIONS = frozenset(_TITLES | {"st", "no", "vs", "etc", "e.g", "i.e", "a.m", "p.m", "approx", "inc", "ltd",
                                      "jr", "sr", "ave", "rd"} | set(_MONTH_NAMES) | {"sept"})
_HEDGE = re.compile(r"\b(?:maybe|perhaps|possibly|probably|presumably|not\s+sure|unsure|not\s+certain|uncertain"
                    r"|unless|in\s+which\s+case|depending\s+on"
                    r"|i\s+think|i\s+believe|i\s+guess|or\s+so|might\s+be)\b", re.I)
_OR = re.compile(r"\W*(?:or|either|and/or)\W*|\s*/\s*", re.I)  # what joins alternatives: "2 or 3", "9/10"
_BETWEEN = re.compile(r"\bbetween\s+$", re.I)  # "between 2 and 3" where one value is asked
_AND = re.compile(r"\s+and\s+", re.I)
_ALTERNATIVE = re.compile(r"^\W*(?:or\s*:|(?:or\s+)?(?:maybe|perhaps|possibly|probably|alternatively|else)\b)",
                          re.I)  # a sentence offering another value: "Or maybe: ..."
_MONEY_AFTER = re.compile(r"\s*(?:dollars?|usd|eur|euros?|pounds?|gbp)\b", re.I)
_NEGATIVE_PREFIXES = ("un", "non", "in")  # "unpaid" is stated by "not paid", "inactive" by "no longer active"
_VALUE_LIKE = re.compile(r"\d|(?<=\s)[A-Z][\w'-]")  # a digit or a capitalised word (not the first)
_NEGATION = re.compile(r"\b(?:not|no(?!\.?\s*#?\d|-shows?\b|-showed\b)|never|none|neither|nor|without|except|excluding|excluded"
                       r"|exclude|besides|unlike|instead\s+of|rather\s+than|other\s+than|apart\s+from|no\s+longer"
                       r"|inactive|cannot|\w+n['\u2019]t)\b", re.I)
_REFUSAL = re.compile(r"\b(?:i|we)\s+(?:could\s*n[o']?t|couldn['\u2019]t|can\s*not|cannot|can['\u2019]t"
                      r"|was\s*n['\u2019o]?t\s+able|wasn['\u2019]t\s+able|were\s*n['\u2019o]?t\s+able"
                      r"|weren['\u2019]t\s+able|am\s+not\s+able|(?:am|was|were|are)\s+unable|failed\s+to"
                      r"|did\s*n['\u2019o]?t\s+manage|didn['\u2019]t\s+manage)"
                      r"|['\u2019]m\s+unable|\bunable\s+to\b|\b(?:sorry|apologi[sz]e)\b|\bi['\u2019]m\s+afraid\b"
                      r"|\bnot\s+possible\b", re.I)
# "no-show" / "no-showed" is an event, not a denial ("no-showed twice" states 2)
_NEGATION_REACH = 3  # words between a "not" and the value it denies ("not Dr. Grace Kim"), no comma or colon
# A verb after the negated words ends the negation's reach: in "kits that list neither tree nuts nor peanuts
# are the Asian Fusion Kit" the "nor" denies the peanuts, not the kit ("not been paid" still denies "paid").
_NEGATION_STOP = re.compile(r"\b(?:is|are|was|were|am|be|been|has|have|had|does|do|did|will|would|shall|should"
                            r"|can|could|may|might|must|include|includes|included|remain|remains)\b", re.I)
# a bound after a negation states its value: "doesn't expire until 2026-03-31", "not before June 5"
_NEGATION_BOUND = re.compile(r"\b(?:until|till|before|after|since)\b", re.I)
_NEGATION_BACK = 12  # words between a value and a later denial ("Grace Kim also ... is no longer active")


def _kind(value: Any) -> tuple:
    """(kind, normalised value): number, date (y, m, d), time (minutes), datetime, text (tokens)."""
    if isinstance(value, dict):  # {"value": ..., "kind": ...}: a value with the form it is written in
        return _kind(value.get("value"))
    if isinstance(value, bool):
        return ("text", ("yes",) if value else ("no",))
    if isinstance(value, (int, float, decimal.Decimal)):
        return ("number", decimal.Decimal(str(value)))
    if isinstance(value, datetime.datetime):
        return ("datetime", ((value.year, value.month, value.day), value.hour * 60 + value.minute))
    if isinstance(value, datetime.date):
        return ("date", (value.year, value.month, value.day))
    if isinstance(value, datetime.time):
        return ("time", value.hour * 60 + value.minute)
    text = str(value)
    m = _ISO_DATE.match(text)
    if m:
        return ("date", (int(m.group(1)), int(m.group(2)), int(m.group(3))))
    m = _ISO_DATETIME.match(text)
    if m:
        return ("datetime", ((int(m.group(1)), int(m.group(2)), int(m.group(3))),
                             int(m.group(4)) * 60 + int(m.group(5))))
    m = _CLOCK.match(text)
    if m:
        return ("time", int(m.group(1)) * 60 + int(m.group(2)))
    if _NUMERIC.match(text):
        try:
            return ("number", decimal.Decimal(re.sub(r"[\s$\u20ac\u00a3,+]", "", text)))
        except decimal.InvalidOperation:
            pass
    return ("text", tuple(w.casefold() for w in _WORD.findall(text)))


def _values(values: Any) -> list:
    if values is None:
        return []
    if isinstance(values, (list, tuple, set, frozenset)):
        return [v for v in values if v is not None and str(v).strip() != ""]
    return [values] if str(values).strip() != "" else []


def _shape(value: Any) -> Any:
    """For a code written with digits ("555-0104", "Q-102", "INV-1002"): a pattern of every value of
    its shape, so an alternative offered beside it is found even when it is in no table."""
    text = str(value).strip()
    if not re.search(r"\d", text) or _kind(value)[0] != "text":
        return None
    parts = []
    for run in re.findall(r"\d+|[^\W\d_]+|.", text):
        if run[0].isdigit():
            parts.append(r"\d{%d}" % len(run))
        elif run[0].isalpha():
            parts.append(r"[^\W\d_]{%d}" % len(run))
        else:
            parts.append(re.escape(run))
    return re.compile(r"(?<![\w-])" + "".join(parts) + r"(?![\w]|-\w)")


def _code_marks(value: Any) -> tuple:
    """The marks a code begins or ends with ("4821#", "#12"): part of the code, so "4821*" is not it.
    Only for values with a digit; other text keeps its punctuation free ("Smith, Jr." as "Smith Jr")."""
    text = str(value.get("value") if isinstance(value, dict) else value).strip()
    if not re.search(r"\d", text):
        return "", ""

    def mark(c: str) -> bool:
        return not (c.isalnum() or c == "_" or c.isspace() or c in ".,;:()'\"-")

    start, end = 0, len(text)  # a walk in from each end, not a regex anchored at the end: linear in any value
    while start < end and mark(text[start]):
        start += 1
    while end > start and mark(text[end - 1]):
        end -= 1
    return text[:start], text[end:]


def _written_as(text: str, start: int, end: int, form: Any) -> bool:
    """Is the number text[start:end] written in `form`: "money" (a currency sign or word, or two
    decimals) or "count" (plain digits, no decimals, not money)? Any other form: yes."""
    run = text[start:end]
    money = bool(re.search(r"[$\u20ac\u00a3]\s?$", text[max(0, start - 2):start])
                 or re.fullmatch(r"\d[\d,]*\.\d{2}", run) or _MONEY_AFTER.match(text[end:end + 10]))
    if form == "money":
        return money
    if form == "count":
        return run.isdigit() and not money
    return True


def _positive(tokens: tuple) -> Any:
    """The value a negative one denies ("unpaid" -> "paid", "inactive" -> "active"), or None."""
    if len(tokens) == 2 and tokens[0] == "not":
        return tokens[1]
    if len(tokens) == 1:
        for prefix in _NEGATIVE_PREFIXES:
            if tokens[0].startswith(prefix) and len(tokens[0]) - len(prefix) >= 4:
                return tokens[0][len(prefix):]
    return None


def _text_variants(tokens: tuple) -> list:
    """Token sequences that spell a text value: as written, without a title, title + last name,
    and for short names every rotation ("Rodriguez, Emma")."""
    variants = [tokens]
    if len(tokens) > 1 and tokens[0] in _TITLES:
        variants.append(tokens[1:])
        if len(tokens) > 2:
            variants.append((tokens[0], tokens[-1]))
    for base in list(variants):
        if 2 <= len(base) <= 3 and all(t.isalpha() for t in base) and base[0] not in _TITLES:
            variants += [base[k:] + base[:k] for k in range(1, len(base))]
    return [v for i, v in enumerate(variants) if v and v not in variants[:i]]


def _month(word: str) -> int:
    return _MONTH_NAMES.get(word.casefold()[:3], 0)


def _year(text: Any) -> Any:
    if not text:
        return None
    y = int(text)
    return y + 2000 if y < 100 else y


def _scan_dates(text: str) -> list:
    """[(start, end, {(year or None, month, day), ...})] for every date written in `text`."""
    found = []
    for m in _DATE_ISO.finditer(text):
        found.append((m.start(), m.end(), {(int(m.group(1)), int(m.group(2)), int(m.group(3)))}))
    for m in _DATE_MD.finditer(text):
        found.append((m.start(), m.end(), {(_year(m.group(3)), _month(m.group(1)), int(m.group(2)))}))
    for m in _DATE_DM.finditer(text):
        found.append((m.start(), m.end(), {(_year(m.group(3)), _month(m.group(2)), int(m.group(1)))}))
    for m in _DATE_NUM.finditer(text):
        a, b, y = int(m.group(1)), int(m.group(2)), _year(m.group(3))
        found.append((m.start(), m.end(), {(y, a, b), (y, b, a)}))  # 6/4: June 4 (US) or 6 April
    out = []
    for start, end, dates in sorted(found, key=lambda f: (f[0], -f[1])):
        dates = {d for d in dates if 1 <= d[1] <= 12 and 1 <= d[2] <= 31}
        if dates and not any(s < end and start < e for s, e, _ in out):
            out.append((start, end, dates))
    return out


def _scan_times(text: str, taken: list) -> list:
    """[(start, end, {minutes since midnight, ...})]; "9:30" without am/pm may be 09:30 or 21:30."""
    found = []
    for m in _TIME_12.finditer(text):
        hour, minute = int(m.group(1)), int(m.group(2) or 0)
        if 1 <= hour <= 12 and minute < 60:
            hour = hour % 12 + (12 if m.group(3).lower() == "p" else 0)
            found.append((m.start(), m.end(), {hour * 60 + minute}))
    for m in _TIME_24.finditer(text):
        hour, minute = int(m.group(1)), int(m.group(2))
        if hour < 24 and minute < 60:
            both = {hour * 60 + minute}
            if 1 <= hour <= 11 and not m.group(1).startswith("0"):
                both.add((hour + 12) * 60 + minute)
            found.append((m.start(), m.end(), both))
    for m in _TIME_WORD.finditer(text):
        found.append((m.start(), m.end(), {0 if m.group(1).lower() == "midnight" else 720}))
    for m in _TIME_OCLOCK.finditer(text):
        hour = int(m.group(1))
        if 1 <= hour <= 12:
            found.append((m.start(), m.end(), {hour % 12 * 60, (hour % 12 + 12) * 60}))
    out = []
    for start, end, minutes in sorted(found, key=lambda f: (f[0], -f[1])):
        if not any(s < end and start < e for s, e in taken + [(s2, e2) for s2, e2, _ in out]):
            out.append((start, end, minutes))
    return out


def _scan_numbers(text: str, taken: list) -> list:
    """[(start, end, Decimal)] for numbers that are not part of a date, a time or an identifier
    ("555-0104", "Q-102"); thousands separators and currency signs are allowed."""
    out = []
    for m in _NUMBER.finditer(text):
        start, end, run = m.start(), m.end(), m.group(0)
        if any(s < end and start < e for s, e in taken):
            continue
        before = text[start - 1] if start else " "
        if before.isalnum() or before == "_" or (before in "-/" and start > 1 and text[start - 2].isalnum()):
            continue
        after = text[end] if end < len(text) else " "
        if after in "-/" and end + 1 < len(text) and text[end + 1].isdigit():
            continue  # "555-0104", "3-4": an identifier or a range, not a value ("189.00/month" is one)
        sign = "-" if before == "-" and (start < 2 or not text[start - 2].isalnum()) else ""
        if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", run):
            parts = [(start, end, run.replace(",", ""))]
        elif "," in run:  # "1,2,3": a list written without spaces
            parts, pos = [], start
            for piece in run.split(","):
                parts.append((pos, pos + len(piece), piece))
                pos += len(piece) + 1
        else:
            parts = [(start, end, run)]
        for s, e, piece in parts:
            if piece.count(".") <= 1:
                out.append((s, e, decimal.Decimal(sign + piece)))
    for m in _NUMBER_WORD.finditer(text):
        if not any(s < m.end() and m.start() < e for s, e in taken):
            half = decimal.Decimal("0.5") if m.group(4) else 0
            value = _TENS[m.group(1).lower()] + (_NUMBER_WORDS[m.group(2).lower()] if m.group(2) else 0) \
                if m.group(1) else _NUMBER_WORDS[m.group(3).lower()]
            out.append((m.start(), m.end(), decimal.Decimal(value) + half))
    return out


def _sentences(text: str, pattern: Any) -> list:
    """(start, end) spans of text between breaks; a period after a title or an initial is no break."""
    cuts, spans, start = [], [], 0
    for m in pattern.finditer(text):
        head = text[max(0, m.start() - 6):m.start()].split()
        word = re.sub(r"^\W+", "", head[-1]).casefold().rstrip(".") if head else ""
        if m.group(0).startswith(".") and (word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())):
            continue
        cuts.append((m.start(), m.end()))
    for s, e in cuts:
        spans.append((start, s))
        start = e
    spans.append((start, len(text)))
    return [(s, e) for s, e in spans if e > s]


def _scope_of(spans: list, position: int) -> int:
    for i, (s, e) in enumerate(spans):
        if s <= position < e:
            return i
    return -1


def answer_facts(answer: Any, expected: Any, wrong: Any = ()) -> dict:
    """Which `expected` values `answer` states, which are missing, which `wrong` values it asserts
    (values it denies, as in "not Dr. Grace Kim", do not count) and whether it hedges next to a fact.
    Values: numbers, dates, times, "YYYY-MM-DD HH:MM" datetimes, names and other text.
    Returns {"found": [...], "missing": [...], "wrong": [...], "denied": [...], "hedged": bool}
    ("denied": values the answer mentions only to deny them)."""
    text = "" if answer is None else str(answer)
    right = _values(expected)
    right_kinds = [_kind(v) for v in right]
    bad = []
    for v in _values(wrong):
        k = _kind(v)
        if k not in right_kinds and (v, k) not in bad:
            bad.append((v, k))
    candidates = [(v, k, True) for v, k in zip(right, right_kinds)] + [(v, k, False) for v, k in bad]
    words = [(m.group(0).casefold(), m.start(), m.end()) for m in _WORD.finditer(text)]
    tokens = [w for w, _, _ in words]
    spans = []  # (start, end, candidate index) of text values, longest first, no overlaps
    for i, (v, k, is_right) in enumerate(candidates):
        if k[0] != "text" or not k[1]:
            continue
        lead, trail = _code_marks(v)
        for variant in _text_variants(k[1]):
            n = len(variant)
            for j in range(len(tokens) - n + 1):
                if tuple(tokens[j:j + n]) == variant:
                    s, e = words[j][1], words[j + n - 1][2]
                    if text[max(0, s - len(lead)):s] == lead and text[e:e + len(trail)] == trail:
                        spans.append((s, e, i))
    mentions = []  # (start, end, candidate index)
    for s, e, i in sorted(spans, key=lambda x: (-(x[1] - x[0]), not candidates[x[2]][2], x[0])):
        if not any(s < e2 and s2 < e for s2, e2, _ in mentions):
            mentions.append((s, e, i))
    taken = [(s, e) for s, e, _ in mentions]
    dates = [d for d in _scan_dates(text) if not any(s < d[1] and d[0] < e for s, e in taken)]
    times = _scan_times(text, taken + [(s, e) for s, e, _ in dates])
    numbers = _scan_numbers(text, taken + [(s, e) for s, e, _ in dates] + [(s, e) for s, e, _ in times])
    sentences = _sentences(text, _SENTENCE_END)
    for i, (v, k, is_right) in enumerate(candidates):
        if k[0] == "number":  # a wrong value given with its form counts only when written so
            form = None if is_right or not isinstance(v, dict) else v.get("kind")
            mentions += [(s, e, i) for s, e, n in numbers
                         if abs(n - k[1]) <= decimal.Decimal("0.005") and _written_as(text, s, e, form)]
        elif k[0] == "date":
            mentions += [(s, e, i) for s, e, ds in dates
                         if any(d[1:] == k[1][1:] and d[0] in (None, k[1][0]) for d in ds)]
        elif k[0] == "time":
            mentions += [(s, e, i) for s, e, ms in times if k[1] in ms]
        elif k[0] == "datetime":  # a time goes with the nearest date of its sentence, else the last one before
            for s, e, ms in times:
                here = [d for d in dates if _scope_of(sentences, d[0]) == _scope_of(sentences, s)]
                before = [d for d in dates if d[1] <= s]
                near = min(here, key=lambda d: min(abs(d[1] - s), abs(d[0] - e))) if here else \
                    before[-1] if before else next((d for d in dates if d[0] >= e), None)
                if k[1][1] in ms and near is not None and any(d[1:] == k[1][0][1:] and d[0] in (None, k[1][0][0])
                                                               for d in near[2]):
                    mentions.append((s, e, i))
    # A span that states an expected value is not also a wrong one: "June 20" (no year) or "9:30" (no am/pm)
    # fits the expected 2025-06-20 or 09:30 and a wrong value alike, and a correct answer may leave that out.
    right_spans = {(s, e) for s, e, i in mentions if candidates[i][2]}
    mentions = [(s, e, i) for s, e, i in mentions if candidates[i][2] or (s, e) not in right_spans]
    denied = _denied(text, mentions, [r for _, _, r in candidates])
    said = {i for s, e, i in mentions if (s, e, i) not in denied}
    for i, (v, k, is_right) in enumerate(candidates):  # "unpaid" said as "it has not been paid"
        positive = _positive(k[1]) if is_right and k[0] == "text" and i not in said else None
        if positive is not None and answer_facts(text, [], [positive])["denied"]:
            said.add(i)
    values = [(s, e) for s, e, _ in mentions] + [(s, e) for s, e, _ in dates + times + numbers]
    for v, k, is_right in candidates:  # codes of an expected value's shape, in the data or not
        shape = _shape(v) if is_right else None
        if shape is not None:
            values += [(m.start(), m.end()) for m in shape.finditer(text)
                       if not any(s < m.end() and m.start() < e for s, e in values)]
    right = {(s, e) for s, e, i in mentions if candidates[i][2] and (s, e, i) not in denied}
    found = [v for i, (v, k, r) in enumerate(candidates) if r and i in said]
    named = {i for _, _, i in mentions}
    return {"found": found, "missing": [v for i, (v, k, r) in enumerate(candidates) if r and i not in said],
            "wrong": [v for i, (v, k, r) in enumerate(candidates) if not r and i in said],
            "denied": [v for i, (v, k, r) in enumerate(candidates) if i in named and i not in said],
            "hedged": _hedged(text, sentences, sorted(set(values)), right)}


def _hedged(text: str, sentences: list, values: list, right: set) -> bool:
    """A hedge word in a sentence that gives a value; an expected value offered with another one ("2 or
    3", "2/3", "between 2 and 3"; two expected values joined so are both stated); or, in an answer that
    states an expected value, a sentence opening with another ("Or maybe: 666-1215")."""
    if any(any(_scope_of(sentences, s) == _scope_of(sentences, m.start()) for s, _ in values)
           for m in _HEDGE.finditer(text)):
        return True
    for (s1, e1), (s2, e2) in zip(values, values[1:]):
        gap = text[e1:s2]
        joined = _OR.fullmatch(gap) or (_AND.fullmatch(gap) and _BETWEEN.search(text[:s1]))
        if joined and ((s1, e1) in right) != ((s2, e2) in right):
            return True
    if right:
        for s, e in sentences:
            opening = _ALTERNATIVE.match(text[s:e])
            if opening and _VALUE_LIKE.search(text[s + opening.end():e]):
                return True
    return False


def _denied(text: str, mentions: list, wanted: list) -> set:
    """Mentions a negation denies: the nearest value after a "not" (within a few words), or else the
    nearest wrong value before it in the same clause ("Grace Kim ... is no longer active"); an expected
    value before a negation stays stated ("275.00, not paid yet" denies nothing about the amount).
    `wanted[i]` says whether candidate i is an expected value."""
    out = set()
    clauses = _sentences(text, re.compile(_SENTENCE_END.pattern + "|" + _SCOPE_BREAK.pattern))
    hedges = [(m.start(), m.end()) for m in _HEDGE.finditer(text)]
    ordered = sorted(mentions)
    for cue in _NEGATION.finditer(text):
        if any(s <= cue.start() < e for s, e in hedges):
            continue  # "not sure" is a hedge, not a denial
        clause = _scope_of(clauses, cue.start())
        inside = [m for m in ordered if _scope_of(clauses, m[0]) == clause]
        after = [m for m in inside if m[0] >= cue.end()]
        before = [m for m in inside if m[1] <= cue.start()]
        gap = text[cue.end():after[0][0]] if after else ""
        words = _WORD.findall(gap)
        if after and len(words) <= _NEGATION_REACH and not re.search(r"[,:;]", gap) \
                and not any(_NEGATION_STOP.fullmatch(w) for w in words[1:]) \
                and not any(_NEGATION_BOUND.fullmatch(w) for w in words):
            spans = _adjacent(text, after, 0)
            out.update(m for m in after if (m[0], m[1]) in spans)
        elif before and len(_WORD.findall(text[before[-1][1]:cue.start()])) <= _NEGATION_BACK:
            spans = _adjacent(text, before, len(before) - 1)  # "Grace Kim ... is no longer active" excludes a
            out.update(m for m in before if (m[0], m[1]) in spans and not wanted[m[2]])  # wrong value, never takes back
    return out


def _adjacent(text: str, ordered: list, at: int) -> set:
    """The span of ordered[at] and the words written right next to it, one name held in two or three
    columns ("Ravi" "Shah"): spans of letters with only spaces between them."""
    spans = [(m[0], m[1]) for m in ordered]
    out = {spans[at]}
    for step in (-1, 1):
        i = at
        while 0 <= i + step < len(spans) and len(out) < 3:
            a, b = sorted((spans[i], spans[i + step]))
            if not (re.fullmatch(r"\s+", text[a[1]:b[0]]) and text[a[0]].isalpha() and text[b[0]].isalpha()):
                break
            i += step
            out.add(spans[i])
    return out


def stated_numbers(answer: Any) -> list:
    """The distinct numbers an answer states (not those of its dates, times and codes), as Decimals."""
    text = "" if answer is None else str(answer)
    dates = _scan_dates(text)
    times = _scan_times(text, [(s, e) for s, e, _ in dates])
    taken = [(s, e) for s, e, _ in dates + times]
    return sorted({n for _, _, n in _scan_numbers(text, taken)})


def mentions(answer: Any, value: Any) -> bool:
    """Does `answer` state `value` (normalised as in answer_facts(); a denied value does not count)?"""
    return bool(answer_facts(answer, [value])["found"])


def denies(answer: Any, value: Any) -> bool:
    """Does `answer` mention `value` only to deny it ("it has not been paid" denies "paid")?"""
    return bool(answer_facts(answer, [value])["denied"])


def states(answer: Any, expected: Any, wrong: Any = ()) -> bool:
    """The answer states every expected value, asserts none of the `wrong` ones (plausible wrong
    alternatives: other rows' values of the same kind) and does not hedge. With no expected value
    (e.g. "none are overdue"), it must still say something and assert no wrong value."""
    f = answer_facts(answer, expected, wrong)
    if not _values(expected) and not _WORD.findall("" if answer is None else str(answer)):
        return False
    return not f["missing"] and not f["wrong"] and not f["hedged"]


def others(db: sqlite3.Connection, expected: Any, facts: Any = ()) -> list:
    """The values that could stand in for the ones `expected` (an expected answer, or its values) quotes:
    every other value of each text, date or decimal column holding a quoted value (the other names,
    titles, codes, dates and amounts), and, for each fact given as {"value": n, "kind": "count"}, the
    other counts 0-50 written as counts. Values `expected` itself states are never among them, so a
    correct answer that repeats its context is not penalised. Use as states()' wrong values."""
    text = " ".join(str(v) for v in _values(expected)) if isinstance(expected, (list, tuple, set)) else \
        ("" if expected is None else str(expected))
    columns = []
    for table in db_tables(db):
        quoted = '"' + table.replace('"', '""') + '"'
        for _, column, declared, _, _, pk in db.execute(f"PRAGMA table_info({quoted})").fetchall():
            if pk or "INT" in (declared or "").upper() or column.lower().endswith("id"):
                continue  # ids and counts: not values an answer quotes, and every small number is one
            name = '"' + column.replace('"', '""') + '"'
            columns.append([r[0] for r in db.execute(f"SELECT DISTINCT {name} FROM {quoted} WHERE {name} IS NOT NULL "
                                                     "LIMIT 500").fetchall()])
    low = text.casefold()
    maybe = {v for values in columns for v in values if _maybe_quoted(v, low)}
    quoted_values = {_kind(v) for v in answer_facts(text, sorted(maybe, key=str))["found"]} if maybe else set()
    out, seen = [], set()
    for values in columns:
        if not any(_kind(v) in quoted_values for v in values):
            continue
        for v in values:
            k = _kind(v)
            if k not in quoted_values and k not in seen:
                seen.add(k)
                out.append(v)
    stated = set(stated_numbers(text))
    for fact in _values(facts):
        if isinstance(fact, dict) and fact.get("kind") == "count":
            out += [{"value": n, "kind": "count"} for n in range(51) if decimal.Decimal(n) not in stated]
    return out


def _maybe_quoted(value: Any, low: str) -> bool:
    """A cheap first look: could `value` be quoted in the (casefolded) text? answer_facts decides."""
    if isinstance(value, str):
        words = [w for w in _WORD.findall(value.casefold()) if len(w) > 2 and not w.isdigit()]
        if _ISO_DATE.match(value) or _ISO_DATETIME.match(value):
            return True
        return bool(words) and any(w in low for w in words)
    if isinstance(value, float):
        return str(int(value)) in low
    return False


def refuses(answer: Any) -> bool:
    """Does the answer say the request could not be done ("I could not ...", "unable to", "sorry")?"""
    return answer is not None and _REFUSAL.search(str(answer)) is not None


def reports(answer: Any, details: Any = ()) -> bool:
    """A write task's answer reports the work as done: it says something, refuses nothing, does not
    hedge, and states each of `details` (the values the user would check, e.g. a new booking's time)."""
    text = "" if answer is None else str(answer)
    if len(_WORD.findall(text)) < 2 or refuses(text):
        return False
    f = answer_facts(text, details)
    return not f["missing"] and not f["hedged"]


# ---- database helpers


def query_rows(db: sqlite3.Connection, sql: str, params: Any = ()) -> list:
    """The rows of a query as dicts ([] on no match)."""
    return [dict(r) for r in db.execute(sql, params).fetchall()]


def db_tables(db: sqlite3.Connection) -> list:
    return [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                     "AND name NOT LIKE 'sqlite%' ORDER BY name").fetchall()]


def _keyed(db: sqlite3.Connection, table: str) -> dict:
    quoted = '"' + table.replace('"', '""') + '"'
    info = db.execute(f"PRAGMA table_info({quoted})").fetchall()
    keys = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5] > 0]
    out = {}
    if keys:
        for r in db.execute(f"SELECT * FROM {quoted}").fetchall():
            row = dict(r)
            out[row[keys[0]] if len(keys) == 1 else tuple(row[c] for c in keys)] = row
        return out
    for r in db.execute(f"SELECT rowid AS synth_rowid, * FROM {quoted}").fetchall():
        row = dict(r)
        out[row.pop("synth_rowid")] = row
    return out


def _same_rows(a: sqlite3.Connection, b: sqlite3.Connection, table: str) -> bool:
    quoted = '"' + table.replace('"', '""') + '"'
    select = f"SELECT * FROM {quoted}"
    return [tuple(r) for r in a.execute(select)] == [tuple(r) for r in b.execute(select)]


def _same_db(a: sqlite3.Connection, b: sqlite3.Connection) -> bool:
    """The two databases are byte for byte the same (an attempt that changed nothing leaves the episode's
    copy identical to the initial one): no row needs reading."""
    try:
        return a.serialize() == b.serialize()
    except (sqlite3.Error, AttributeError, MemoryError):
        return False


def db_diff(initial_db: sqlite3.Connection, final_db: sqlite3.Connection, only_tables: Any = None) -> dict:
    """What changed, per table (tables with no change are left out): {table: {"added": [row],
    "removed": [row], "changed": [{"key", "before", "after", "columns"}], "added_keys": [...],
    "removed_keys": [...]}}; rows are dicts, keys are primary-key values (rowid without one)."""
    if _same_db(initial_db, final_db):
        return {}
    out = {}
    before, after = set(db_tables(initial_db)), set(db_tables(final_db))
    for table in sorted(before | after):
        if only_tables is not None and table not in only_tables:
            continue
        if table in before and table in after and _same_rows(initial_db, final_db, table):
            continue  # most tables are untouched: one plain read each, no keyed rows
        a = _keyed(initial_db, table) if table in before else {}
        b = _keyed(final_db, table) if table in after else {}
        added = [k for k in b if k not in a]
        removed = [k for k in a if k not in b]
        changed = [{"key": k, "before": a[k], "after": b[k], "columns": [c for c in b[k] if a[k].get(c) != b[k][c]]}
                   for k in a if k in b and a[k] != b[k]]
        if added or removed or changed:
            out[table] = {"added": [b[k] for k in added], "removed": [a[k] for k in removed], "changed": changed,
                          "added_keys": added, "removed_keys": removed}
    return out


def unchanged(initial_db: sqlite3.Connection, final_db: sqlite3.Connection, only_tables: Any = None) -> bool:
    """True when no row of any table (or of `only_tables`) was added, removed or changed."""
    return not db_diff(initial_db, final_db, only_tables)


def only_changed(changes: dict, allowed: dict) -> bool:
    """True when every change in `changes` (a db_diff()) is one the task asked for; `allowed` maps a
    table to what may change in it:
        {"bookings": {"rows": {12: ["status", "cancelled_at"]}, "added": True, "removed": [7]}}
    "rows": row key (primary key value; a tuple for a composite key) -> the only columns that row may
    change; "added": new rows may appear; "removed": keys of rows that may be deleted. Tables not
    named must not change at all. (The older form {table: [keys..., "added"]} still works: a listed
    row may then change in any column.)"""
    for table, change in changes.items():
        spec = allowed.get(table)
        if isinstance(spec, dict):
            rows = {_row_key(k): set(v) if isinstance(v, (list, tuple, set)) else {v}
                    for k, v in (spec.get("rows") or {}).items()}
            if change["added"] and not spec.get("added"):
                return False
            removable = {_row_key(k) for k in (spec.get("removed") or [])}
            if any(_row_key(k) not in removable for k in change["removed_keys"]):
                return False
            for c in change["changed"]:
                columns = rows.get(_row_key(c["key"]))
                if columns is None or not set(c["columns"]) <= columns:
                    return False
            continue
        ok = [] if spec is None else [spec] if isinstance(spec, (str, int, tuple)) else list(spec)
        if change["added"] and "added" not in ok and not all(k in ok for k in change["added_keys"]):
            return False
        if any(c["key"] not in ok for c in change["changed"]) or any(k not in ok for k in change["removed_keys"]):
            return False
    return True


def _row_key(key):
    """A row key as db_diff gives it (a list from JSON becomes a tuple; "12" matches 12)."""
    if isinstance(key, list):
        return tuple(_row_key(k) for k in key)
    if isinstance(key, str) and key.strip().lstrip("-").isdigit():
        return int(key)
    return key


def rubric(checks: list) -> list:
    """The checks plus "all requirements met", weighing as much as all of them together: partial work
    keeps partial credit, but any attempt that misses a requirement scores below one half."""
    items = list(checks)
    total = sum(c["weight"] for c in items) or 1.0
    return items + [check("all requirements met", bool(items) and all(c["passed"] for c in items), total)]
