"""Is a tool or a task about account plumbing (signing in, passwords, login sessions)?

Agents should practise an application's own work; the user is already signed
in, so tools and tasks that log in, sign up, reset passwords or manage login
sessions are sent back. The check reads words in their context, not alone:
`create_session` and "log me into my account" are plumbing, but
`create_course_session` (a class), `book_therapy_session`,
`create_prior_auth_request` (a prior authorization) and "what is the guest
Wi-Fi password for room B?" are the application's own data. A word the
schema uses for one of its own tables (a `sessions` table of course dates,
an `accounts` table of a bank) is domain vocabulary too. Every rejection
says how to stay lawful: name the domain record the tool works on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

LOGIN_WORDS = frozenset({"login", "logout", "logon", "signin", "signup", "signout", "authenticate",
                         "reauthenticate", "deauthenticate", "unauthenticate", "authentication", "2fa", "mfa",
                         "otp", "passkey", "passkeys"})
PAIRS = {("log", "in"), ("log", "out"), ("log", "on"), ("sign", "in"), ("sign", "up"), ("sign", "out"),
         ("two", "factor"), ("single", "sign")}
CREDENTIALS = frozenset({"password", "passwords", "passcode", "passcodes", "passwd", "credential", "credentials",
                         "pin"})
# Things (not people) whose password or code is ordinary data of an application.
DEVICES = frozenset({"wifi", "fi", "network", "door", "gate", "locker", "safe", "alarm", "router", "lock", "keypad",
                     "room", "garage", "mailbox", "guest", "building", "entry", "lockbox"})
SESSIONISH = frozenset({"session", "sessions", "token", "tokens", "auth"})
# Qualifiers that make such a word about logins ("user_session", "access_token")...
LOGIN_QUALIFIERS = frozenset({"user", "users", "login", "auth", "access", "refresh", "api", "web", "browser",
                              "account", "bearer", "jwt", "oauth"})
# ...and ones that leave it unqualified ("current_session" is a login session unless the schema says otherwise).
PLUMBING_QUALIFIERS = LOGIN_QUALIFIERS | {"current", "my", "id", "new", "active", "the"}
AUTH_FOLLOWERS = frozenset({"token", "tokens", "code", "codes", "key", "keys", "session", "sessions", "header",
                            "credentials", "user", "status"})
PLUMBING_ACCOUNT_QUALIFIERS = frozenset({"user", "login", "online", "portal", "web", "website", "app", "my"})
CREDENTIAL_COLUMNS = re.compile(r"password|passcode|passwd|secret|salt|token|last_login|hash", re.IGNORECASE)


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("sses") or word.endswith("ches") or word.endswith("shes"):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) > 2:
        return word[:-1]
    return word


def domain_words(tables: dict[str, Iterable[str]] | None) -> set[str]:
    """Words the schema names its own records with (singular), from tables that hold no credentials."""
    words: set[str] = set()
    for table, columns in (tables or {}).items():
        if any(CREDENTIAL_COLUMNS.search(c) for c in columns):
            continue  # a table of logins or secrets is plumbing itself, not domain vocabulary
        parts = [_singular(p) for p in table.lower().split("_") if p]
        words.update(parts)
        words.update("_".join(parts[i:i + 2]) for i in range(len(parts) - 1))  # sign_in, check_in
    return words


def tool_plumbing(name: str, tables: dict[str, Iterable[str]] | None = None) -> str | None:
    """Why tool `name` is account plumbing, or None when it is the application's own work.

    `tables` ({table: columns}) is the schema: words it uses for its records are domain words."""
    tokens = [t for t in name.lower().split("_") if t]
    domain = domain_words(tables)
    for a, b in zip(tokens, tokens[1:]):
        if (a, b) in PAIRS and f"{a}_{b}" not in domain:
            return f"'{a}_{b}' is about signing in or authenticating"
    for i, tok in enumerate(tokens):
        before = tokens[i - 1] if i else ""
        after = tokens[i + 1] if i + 1 < len(tokens) else ""
        if tok in LOGIN_WORDS and tok not in domain:
            return f"'{tok}' is about signing in or authenticating"
        if tok in CREDENTIALS and before not in DEVICES and _singular(tok) not in domain:
            return f"it manages '{tok}', a login credential"
        if tok == "auth" and "auth" not in domain:
            qualified = before and before not in PLUMBING_QUALIFIERS and i > 1
            if not qualified and (not after or after in AUTH_FOLLOWERS):
                return "'auth' here means authentication"
        if tok in ("session", "sessions", "token", "tokens") and before in LOGIN_QUALIFIERS \
                and f"{before}_{_singular(tok)}" not in domain:
            return f"a {before} {_singular(tok)} is a login {_singular(tok)}"
        if tok in ("session", "sessions", "token", "tokens") and _singular(tok) not in domain:
            # "course_session" names a class; "session_attendees" names attendees of one.
            qualified = (i > 1 and before not in PLUMBING_QUALIFIERS) or (
                after and after not in SESSIONISH and after not in CREDENTIALS)
            if not qualified:
                return f"a bare '{tok}' is a login {_singular(tok)}"
        if tok in ("account", "accounts") and "account" not in domain and (
                before in PLUMBING_ACCOUNT_QUALIFIERS or (i == 1 and tokens[0] in ("register", "create", "delete",
                                                                                   "verify", "activate"))):
            return "it manages a user's login account"
    return None


# --------------------------------------------------------------------------- task text

_ACCESS = r"(?:log|sign)(?:ging|ged)?\s*-?\s*(?:in|on|out)"
_TASK_PATTERNS = [
    (re.compile(rf"\b{_ACCESS}\s+(?:of|to|into|from)\s+(?:my|the|our|your)?\s*(?:\w+\s+)?"
                r"(?:account|app|application|portal|system|website|site|dashboard|profile)\b", re.I),
     "signing in or out of the application"),
    (re.compile(r"\b(?:log|sign)\s+(?:me|us)\s+(?:in|on|out|into)\b", re.I), "signing the user in or out"),
    (re.compile(r"\b(?:login|logon|logout)\b", re.I), "logging in"),
    (re.compile(r"\bsign\s*-?\s*up\s+(?:for\s+)?(?:a|an|my|the)?\s*(?:new\s+)?(?:user|online|web|portal|app)\s+"
                r"account\b", re.I), "signing up for an account"),
    (re.compile(r"\b(?:create|open|register|delete|close|deactivate|activate|verify)\s+(?:a|an|my|the|new|\s)*"
                r"(?:user|login|online|portal|web|website|app)\s+accounts?\b", re.I), "managing a login account"),
    (re.compile(r"\b(?:two|2)\s*-?\s*factor\b|\b2fa\b|\bmfa\b|\bone-time (?:pass)?code\b", re.I),
     "two-factor authentication"),
    (re.compile(r"\bauthenticat\w*\s+(?:me|myself|us|the user|my|our)\b|\bmy (?:login|sign-in)\b", re.I),
     "authenticating the user"),
]
_CREDENTIAL_RE = re.compile(r"\b(?:(\w+)[\s-]+)?(password|passcode|passwd|credentials|pin)\b", re.I)


def task_plumbing(text: str) -> str | None:
    """Why a task instruction is about account plumbing, or None when it is the application's own work."""
    for pattern, what in _TASK_PATTERNS:
        match = pattern.search(text)
        if match:
            return f"{what} ({match.group(0)!r})"
    for match in _CREDENTIAL_RE.finditer(text):
        qualifier = (match.group(1) or "").lower()
        if qualifier.replace("-", "") not in DEVICES and qualifier not in ("wi", "fi"):
            return f"a login credential ({match.group(0)!r})"
    return None
