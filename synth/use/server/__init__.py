"""`synth serve`: every env folder under a directory over REST and MCP, one episode per client."""

from synth.use.server.app import LoadedEnvs, create_app, load_envs
from synth.use.server.episodes import EpisodeRegistry
from synth.use.server.run import BackgroundServer, background, build

__all__ = ["BackgroundServer", "EpisodeRegistry", "LoadedEnvs", "background", "build", "create_app", "load_envs"]
