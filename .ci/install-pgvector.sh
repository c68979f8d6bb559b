#!/usr/bin/env bash
# Makes the pgvector extension available to the running PostgreSQL (15 on Debian 12, which has no
# pgvector package): builds Debian trixie's pgvector source package against the local server.
# The mirror is read from the machine's own apt configuration; nothing here names a registry host.
set -euo pipefail
PGVER=$(ls /etc/postgresql | sort -n | tail -1)
if [ -f "/usr/share/postgresql/$PGVER/extension/vector.control" ]; then
  echo "pgvector already installed for PostgreSQL $PGVER"; exit 0
fi
export DEBIAN_FRONTEND=noninteractive
src=/etc/apt/sources.list.d/debian.sources
uri=$(awk '/^URIs:/ {print $2; exit}' "$src")
key=$(awk '/^Signed-By:/ {print $2; exit}' "$src")
cat > /etc/apt/sources.list.d/pgvector-trixie-src.sources <<SRC
Types: deb-src
URIs: $uri
Suites: trixie
Components: main
Signed-By: $key
SRC
apt-get update -qq -o Dir::Etc::sourcelist=/dev/null -o Dir::Etc::sourceparts=/etc/apt/sources.list.d \
  || apt-get update -qq
apt-get install -y -qq "postgresql-server-dev-$PGVER" build-essential dpkg-dev >/dev/null
work=$(mktemp -d)
cd "$work"
apt-get source -qq --download-only pgvector >/dev/null
dpkg-source -x --no-check pgvector_*.dsc src >/dev/null
cd src
make -s PG_CONFIG="/usr/lib/postgresql/$PGVER/bin/pg_config" OPTFLAGS="" >/dev/null
make -s PG_CONFIG="/usr/lib/postgresql/$PGVER/bin/pg_config" install >/dev/null
rm -rf "$work" /etc/apt/sources.list.d/pgvector-trixie-src.sources
echo "pgvector built and installed for PostgreSQL $PGVER"
