"""`synth view`: a local web app for reviewing runs and env folders.

sources.py finds env and run folders, index.py keeps the env list (cached by
mtime), runs.py and envdata.py read a run and an env, dbread.py the initial
database, svg.py draws charts and the schema, live.py replays gold traces and
runs Try-it episodes in the sandbox, forms.py turns tool schemas into forms,
guard.py checks Host and Origin, app.py wires the pages.
"""
