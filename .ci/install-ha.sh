#!/usr/bin/env bash
# Installs the HA database parts the failover suite drives: Patroni, etcd and
# HAProxy from Debian's packages. Idempotent: a machine that has them skips.
# Debian's packages start their own services on default ports; the failover
# suite runs its own instances on random loopback ports, so any packaged
# daemon is kept from starting (policy-rc.d) and stopped if one got through.
set -euo pipefail

need=()
command -v patroni >/dev/null 2>&1 || need+=(patroni)
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v haproxy >/dev/null 2>&1 || need+=(haproxy)

if [ "${#need[@]}" -gt 0 ]; then
  policy=/usr/sbin/policy-rc.d
  had_policy=0
  [ -e "$policy" ] && had_policy=1
  if [ "$had_policy" = 0 ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod +x "$policy"
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" python3-psycopg2 >/dev/null
  [ "$had_policy" = 0 ] && rm -f "$policy"
fi

# Stop any packaged daemon that still runs (systemd may be absent here).
for svc in etcd haproxy patroni; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
    systemctl stop "$svc" || true
    systemctl disable "$svc" >/dev/null 2>&1 || true
  fi
done
for pidfile in /run/haproxy.pid /var/run/haproxy.pid; do
  [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
done
for name in etcd haproxy patroni; do
  # Only the packaged instances: those run from the package's default config.
  for pid in $(pgrep -x "$name" 2>/dev/null || true); do
    if grep -qaE '/etc/(haproxy|default/etcd|patroni)|^/usr/bin/etcd$' "/proc/$pid/cmdline" 2>/dev/null ||
      [ "$(tr '\0' ' ' <"/proc/$pid/cmdline")" = "/usr/bin/etcd " ]; then
      kill "$pid" 2>/dev/null || true
    fi
  done
done

# The versions in the log. sed reads all of its input: with head, the tool could be cut
# off by SIGPIPE after the first line, and pipefail would turn that into exit 141.
patroni --version
etcd --version | sed -n 1p
haproxy -v | sed -n 1p
