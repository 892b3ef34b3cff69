#!/usr/bin/env bash
# Install a separate PostgreSQL server with pgvector from the OS packages, for the tests against an external
# server (tests/test_external_server.py: loopback TCP, a password, another major version than the embedded one).
# Idempotent and quick when done: nothing happens where a server's bin/ and its pgvector (vector.control) are
# already installed. Needs root (or sudo) and apt-get; where the packages cannot be had it says why and exits 0,
# so `make test` goes on and those tests are skipped with the reason.
#   bash scripts/install_postgres.sh            # the distribution's PostgreSQL (Debian bookworm: 15)
#   RAGNB_TEST_PG_MAJOR=16 bash scripts/install_postgres.sh
set -uo pipefail

give_up() {
  echo "install_postgres.sh: $* — the external-server tests will be skipped" >&2
  exit 0
}

# A server of major $1 whose pgvector is installed: its bin/ holds postgres and pg_config, its share dir vector.control.
ready() {
  local bin="/usr/lib/postgresql/$1/bin"
  [ -x "$bin/postgres" ] && [ -x "$bin/pg_config" ] && [ -f "$("$bin/pg_config" --sharedir)/extension/vector.control" ]
}

# "postgresql 15 (postgres (PostgreSQL) 15.20 …) with pgvector 0.8.0"
describe() {
  local bin="/usr/lib/postgresql/$1/bin"
  echo "postgresql $1 ($("$bin/postgres" --version)) with pgvector $(sed -n "s/^default_version = '\(.*\)'/\1/p" \
    "$("$bin/pg_config" --sharedir)/extension/vector.control")"
}

for bin in /usr/lib/postgresql/*/bin; do
  major=$(basename "$(dirname "$bin")")
  if [ -z "${RAGNB_TEST_PG_MAJOR:-}" ] || [ "$major" = "$RAGNB_TEST_PG_MAJOR" ]; then
    if ready "$major"; then
      echo "already installed: $(describe "$major")"
      exit 0
    fi
  fi
done

command -v apt-get >/dev/null 2>&1 || give_up "no apt-get here (install PostgreSQL and pgvector yourself)"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo"; else
    give_up "run as root (or with password-less sudo) to apt-get install postgresql"
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || give_up "apt-get update failed"
# The major version the distribution's 'postgresql' package stands for (bookworm: 15), unless one is asked for.
major=${RAGNB_TEST_PG_MAJOR:-$(apt-cache depends postgresql 2>/dev/null \
  | sed -n 's/^ *Depends: postgresql-\([0-9][0-9]*\)$/\1/p' | head -n1)}
[ -n "$major" ] || give_up "the package lists name no postgresql-NN server"
$SUDO apt-get install -y -qq --no-install-recommends "postgresql-$major" >/dev/null \
  || give_up "apt-get install postgresql-$major failed"
# A server package that brought pgvector with it:
ready "$major" && { echo "installed: $(describe "$major")"; exit 0; }

# pgvector: the distribution's binary package where there is one (Debian trixie, Ubuntu 24.04 …) …
if apt-cache show "postgresql-$major-pgvector" >/dev/null 2>&1; then
  $SUDO apt-get install -y -qq --no-install-recommends "postgresql-$major-pgvector" >/dev/null \
    || give_up "apt-get install postgresql-$major-pgvector failed"
else
  # … else (Debian bookworm has none) Debian's source package from trixie, built with PGXS against this server.
  # Only source lists are added (binary packages from trixie would upgrade libc), and removed again after.
  $SUDO apt-get install -y -qq --no-install-recommends "postgresql-server-dev-$major" dpkg-dev gcc make >/dev/null \
    || give_up "apt-get install postgresql-server-dev-$major dpkg-dev gcc make failed"
  src_list=/etc/apt/sources.list.d/ragnb-pgvector-src.sources
  work=$(mktemp -d /tmp/ragnb-pgvector.XXXXXX)
  trap '$SUDO rm -f "$src_list"; rm -rf "$work"' EXIT
  printf '%s\n' "Types: deb-src" "URIs: http://deb.debian.org/debian" "Suites: trixie" "Components: main" \
    "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" | $SUDO tee "$src_list" >/dev/null
  $SUDO apt-get update -qq || give_up "apt-get update with Debian's trixie source lists failed"
  (cd "$work" && apt-get source -qq pgvector >/dev/null 2>&1) || give_up "apt-get source pgvector failed"
  dir=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'pgvector-*' | head -n1)
  [ -n "$dir" ] || give_up "apt-get source pgvector unpacked no pgvector-* folder"
  pg_config="/usr/lib/postgresql/$major/bin/pg_config"
  # OPTFLAGS="": no -march=native, as Debian builds it (the library then runs on any x86-64 / arm64 machine).
  make -s -C "$dir" PG_CONFIG="$pg_config" OPTFLAGS="" >/dev/null || give_up "building pgvector failed"
  $SUDO make -s -C "$dir" PG_CONFIG="$pg_config" OPTFLAGS="" install >/dev/null \
    || give_up "installing pgvector failed"
fi
ready "$major" || give_up "pgvector's vector.control is still missing for PostgreSQL $major"
echo "installed: $(describe "$major")"
