"""Competition bundles: one YAML file describing a competition (pages, leagues, phases with
data, protocol, limits, quotas and leaderboard), parsed with line numbers so that every
validation error points at the line to fix. See `parse_bundle`."""

from server.bundles.parse import BundleError, parse_bundle
from server.bundles.schema import BundleSpec, LeagueSpec, PhaseSpec

__all__ = ["BundleError", "BundleSpec", "LeagueSpec", "PhaseSpec", "parse_bundle"]
