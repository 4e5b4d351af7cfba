"""Tasks at scale: templates written by a model, instantiated and verified with none (`synth tasks`).

step.py runs it (add_tasks); ask.py is the model's part, instances.py and check.py the model-free
part, agents.py the reward agents on a sample, outcome.py what is reported.
"""
