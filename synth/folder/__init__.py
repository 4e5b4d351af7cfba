"""The env folder format: writing and reading env folders (format, files, dirs,
summary, review, pack), their SQLite databases (database, sqlitedb), tool schemas
(toolschema) and business rules (rules).

Kept empty on purpose: sandbox workers import `synth.folder.database` before they
lock themselves down, and must not pull in anything else.
"""
