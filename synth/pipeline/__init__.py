"""The run: seeds -> scenarios -> built envs -> verified envs.

runner (run_pipeline), scheduler (N verified envs), executor* (local or Ray), store
(run.sqlite), progress (display), seeds, scenarios, scenario_files, embed, build,
verify, prompts, and stages/ (one module per model-driven step, by phase: scenarios/,
build/, check/).
"""
