#!/usr/bin/env bash
# `make local-down`: stops what `make local-up` started — member3's agent, the controller-manager, then testenv (which
# stops etcd, the API servers, kube-controller-manager, kube-scheduler and kwok) — and checks that no
# process is left. Set KEEP_STATE=1 to keep the state folder (logs) afterwards.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state=${KARMADA_RS_LOCAL_UP_DIR:-$root/.local-up}

[ -d "$state" ] || { echo "local-down: nothing to stop ($state does not exist)"; exit 0; }

# stop <pid> <name> <seconds>: SIGTERM, wait, then SIGKILL.
stop() {
  local pid=$1 name=$2 secs=$3 i
  kill -0 "$pid" 2>/dev/null || return 0
  echo "local-down: stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < secs * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  echo "local-down: $name did not stop in ${secs}s; killing it"
  kill -KILL "$pid" 2>/dev/null || true
}

# Only pids whose command line mentions the state folder are ours (a pid may have been reused).
ours() { [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF "$state"; }

for name in agent-member3 controller-manager testenv; do
  f="$state/$name.pid"
  [ -f "$f" ] || continue
  pid=$(cat "$f")
  if ours "$pid"; then stop "$pid" "$name" 40; fi
done

# What testenv started (one "<pid> <name>" line each); normally already gone with testenv.
left=()
if [ -f "$state/env/pids" ]; then
  while read -r pid name; do
    if kill -0 "$pid" 2>/dev/null && ours "$pid"; then
      stop "$pid" "$name" 10
      kill -0 "$pid" 2>/dev/null && left+=("$pid $name")
    fi
  done <"$state/env/pids"
fi
for name in agent-member3 controller-manager testenv; do
  f="$state/$name.pid"
  [ -f "$f" ] && ours "$(cat "$f")" && left+=("$(cat "$f") $name")
done
if [ ${#left[@]} -gt 0 ]; then
  echo "local-down: still running: ${left[*]}" >&2
  exit 1
fi
if [ -n "${KEEP_STATE:-}" ]; then
  rm -rf "$state/env/etcd"
  echo "local-down: stopped; logs kept in $state"
else
  rm -rf "$state"
  echo "local-down: stopped; no process left"
fi
