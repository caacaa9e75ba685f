#!/usr/bin/env bash
# PostgreSQL 15 from Debian's packages, started on loopback, with a `svc` role that may create databases.
# The test suite reads SVC_TEST_DATABASE_URL (default below) and makes a fresh database per test file.
set -euo pipefail
source "$(dirname "$0")/apt.sh"
apt_install postgresql

version="$(ls /usr/lib/postgresql | sort -n | tail -1)"
if ! pg_lsclusters -h | awk '{print $1" "$2}' | grep -q "^$version main$"; then
  pg_createcluster "$version" main >/dev/null
fi
if ! pg_lsclusters -h | awk -v v="$version" '$1==v && $2=="main" {print $4}' | grep -q online; then
  pg_ctlcluster "$version" main start
fi
for _ in $(seq 1 50); do
  su postgres -c "psql -qtAc 'select 1'" >/dev/null 2>&1 && break
  sleep 0.2
done

su postgres -c "psql -qtAc \"select 1 from pg_roles where rolname = 'svc'\"" | grep -q 1 ||
  su postgres -c "psql -qc \"create role svc login createdb password 'svc'\""
# Test databases are dropped with (force); that may need to end an autovacuum worker's connection.
su postgres -c "psql -qc 'set client_min_messages = warning; grant pg_signal_backend to svc'" >/dev/null
su postgres -c "psql -qtAc \"select 1 from pg_database where datname = 'svc'\"" | grep -q 1 ||
  su postgres -c "createdb -O svc svc"
echo "setup: postgres $version ready at postgres://svc:svc@127.0.0.1:5432/svc" >&2
