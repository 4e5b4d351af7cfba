"""Using verified envs: serving them (server/), rolling agents through them (rollout,
agent), rewards (reward, datafacts, replay), MCP tool annotations, and exports to
trainers (export/).
"""
