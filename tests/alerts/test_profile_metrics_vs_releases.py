"""The profiles' metric intents by release range agree with the packaged release data (read from each release's
source by scripts/engine_releases.py): every series a profile names for an intent is served at every release read in
the variant's range, so `alerts translate` never renames to a series the target release does not serve."""

from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet

from switchover.engines.profile import list_profiles, metric_variants
from switchover.engines.releases import load_releases, view
from switchover.engines.versions import release_key


def _covered(engine: str) -> list[str]:
    data = load_releases(engine)
    if data is None:
        pytest.skip(f"no packaged release data for {engine} (engines/data/releases/{engine}.json not generated)")
    return [r.version for r in data.releases]


def _missing(engine: str) -> list[str]:
    """'intent: series at release' for every release read in a variant's range that does not serve its series."""
    out = []
    data = load_releases(engine)
    assert data is not None
    for intent, specs in metric_variants(engine).items():
        for spec in specs:
            rng = SpecifierSet(spec.versions or "")
            for version in _covered(engine):
                if not rng.contains(release_key(version), prereleases=True):
                    continue
                found = view(engine, version)
                assert found is not None
                if found.metric(spec.name).status != "present":
                    out.append(f"{intent}: {spec.name} at {version} ({spec.versions or 'every release'})")
    return out


@pytest.mark.parametrize("engine", list_profiles())
def test_every_profile_series_is_served_in_its_release_range(engine: str) -> None:
    _covered(engine)
    assert _missing(engine) == []
