"""Build phase: tasks, schema, data, tool specs and tool code of one env, each validated by execution."""
