#!/usr/bin/env bash
# Installs what the build and the tests need:
# - the Debian packages listed in third_party/debian_packages.txt that are
#   not installed yet;
# - the test-only npm packages of third_party/node_tools (llama.cpp's
#   prebuilt library, to check our GGUF exports) into
#   ${XDG_CACHE_HOME:-~/.cache}/llama2-cpp/node-tools, once per
#   package-lock.json (the tests find them there).
# Does nothing (and needs no network) when everything is in place.
# Usage: third_party/setup.sh [--check]   (--check: report, install nothing)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
check_only=false
[[ "${1:-}" == "--check" ]] && check_only=true

sudo=()
need_root() {
  if [[ "$(id -u)" != 0 ]]; then
    command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: $*" >&2; exit 1; }
    sudo=(sudo)
  fi
}

apt_install() {
  if ! command -v apt-get >/dev/null; then
    echo "setup: apt-get not found; install these packages by hand: $*" >&2
    exit 1
  fi
  need_root "$@"
  echo "setup: installing $*" >&2
  "${sudo[@]}" apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "$@" >&2
}

mapfile -t packages < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$here/debian_packages.txt" | grep -v '^$')
missing=()
for pkg in "${packages[@]}"; do
  status="$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)"
  [[ "$status" == "installed" ]] || missing+=("$pkg")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  if $check_only; then
    echo "setup: missing Debian packages: ${missing[*]}" >&2
    exit 1
  fi
  apt_install "${missing[@]}"
fi

# npm comes with NodeSource's nodejs; Debian packages it apart.
tools="${XDG_CACHE_HOME:-$HOME/.cache}/llama2-cpp/node-tools"
stamp="$(sha256sum "$here/node_tools/package-lock.json" | cut -c1-16)"
if [[ "$(cat "$tools/.stamp" 2>/dev/null || true)" != "$stamp" ]]; then
  if $check_only; then
    echo "setup: the npm test tools are not installed in $tools" >&2
    exit 1
  fi
  command -v npm >/dev/null || apt_install npm
  echo "setup: installing the npm test tools into $tools" >&2
  rm -rf "$tools.partial"
  mkdir -p "$tools.partial"
  cp "$here/node_tools/package.json" "$here/node_tools/package-lock.json" "$tools.partial/"
  # install, not ci: the lock lacks optional packages npm cannot resolve for
  # this platform, which ci refuses. --ignore-scripts: the prebuilt library is used as shipped (nothing is
  # built or downloaded after install); --omit=optional: only the x86-64
  # CPU build, not every platform's and GPU's (85 MB instead of 725 MB).
  installed=false
  for attempt in 1 2 3; do  # The registry is a network away: retry a transient failure.
    if (cd "$tools.partial" && npm install --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error >&2); then
      installed=true
      break
    fi
    echo "setup: npm install failed (attempt $attempt of 3)" >&2
    sleep $((attempt * 5))
  done
  $installed || { echo "setup: could not install the npm test tools (is the npm registry reachable?)" >&2; exit 1; }
  echo "$stamp" > "$tools.partial/.stamp"
  rm -rf "$tools"
  mv "$tools.partial" "$tools"
fi
