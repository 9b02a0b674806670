#!/usr/bin/env bash
# `make local-up`: a karmada-rs control plane on this machine, in the background.
#   - testenv: a host ("Karmada") API server + member1 (full: kube-scheduler, kube-controller-manager,
#     kwok nodes, so pods become Ready) + member2, sharing one etcd; the CRDs installed in the host;
#   - member1 and member2 joined with `karmadactl join` (Push mode);
#   - karmada-controller-manager running against the host, leader-elected in karmada-system.
# State (kubeconfig, pid files, logs) lives in ${KARMADA_RS_LOCAL_UP_DIR:-<repo>/.local-up}.
# Stop everything with `make local-down`.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state=${KARMADA_RS_LOCAL_UP_DIR:-$root/.local-up}
metrics_port=${KCM_METRICS_PORT:-18080}
probe_port=${KCM_PROBE_PORT:-20357}
# The controllers karmada-rs implements (the Helm chart's default).
controllers=${KCM_CONTROLLERS:-cluster,clusterStatus,scheduler,binding,bindingStatus,execution,workStatus,namespace}
target=${CARGO_TARGET_DIR:-$root/target}/debug

die() {
  echo "local-up: $*" >&2
  # Leave nothing half-started behind (logs are kept in the state folder).
  [ -n "${started:-}" ] && KEEP_STATE=1 "$root/hack/local-down.sh" >&2 || true
  exit 1
}
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

if alive "$state/testenv.pid" || alive "$state/controller-manager.pid"; then
  die "already running (state in $state); run 'make local-down' first"
fi
rm -rf "$state"
mkdir -p "$state"

kubectl="$("$root/hack/install-helm.sh")/kubectl"
echo "local-up: building testenv, karmadactl and karmada-controller-manager" >&2
(cd "$root" && ${CARGO:-cargo} build -q -p testenv -p karmadactl -p karmada-controller-manager --bins)

echo "local-up: starting host + member1 (full) + member2 (logs: $state/testenv.log)" >&2
# setsid: the environment outlives this script and make; testenv's children die with testenv.
setsid "$target/testenv" up --members 2 --full --install-crds --dir "$state/env" --ready-file "$state/ready" \
  >"$state/testenv.log" 2>&1 </dev/null &
echo $! >"$state/testenv.pid"
started=1
trap 'die "interrupted"' INT TERM
for _ in $(seq 1 600); do
  [ -f "$state/ready" ] && break
  alive "$state/testenv.pid" || { tail -n 30 "$state/testenv.log" >&2; die "testenv exited before it was ready"; }
  sleep 0.5
done
[ -f "$state/ready" ] || { tail -n 30 "$state/testenv.log" >&2; die "testenv not ready after 300s"; }

kc="$state/env/kubeconfig"
k() { "$kubectl" --kubeconfig "$kc" "$@"; }
k --context host create namespace karmada-system >/dev/null

for m in member1 member2; do
  echo "local-up: karmadactl join $m" >&2
  "$target/karmadactl" join "$m" --kubeconfig "$kc" --karmada-context host \
    --cluster-kubeconfig "$kc" --cluster-context "$m" >>"$state/join.log" 2>&1 ||
    { tail -n 20 "$state/join.log" >&2; die "karmadactl join $m failed (log: $state/join.log)"; }
done

echo "local-up: starting karmada-controller-manager (log: $state/controller-manager.log)" >&2
setsid "$target/karmada-controller-manager" \
  --kubeconfig "$state/env/host/kubeconfig" \
  --leader-elect-resource-namespace=karmada-system \
  --metrics-bind-address="127.0.0.1:$metrics_port" \
  --health-probe-bind-address="127.0.0.1:$probe_port" \
  --controllers="$controllers" \
  --cluster-status-update-frequency=5s \
  --v=2 \
  >"$state/controller-manager.log" 2>&1 </dev/null &
echo $! >"$state/controller-manager.pid"

ready=""
for _ in $(seq 1 240); do
  alive "$state/controller-manager.pid" ||
    { tail -n 30 "$state/controller-manager.log" >&2; die "karmada-controller-manager exited (log above)"; }
  if { exec 3<>"/dev/tcp/127.0.0.1/$probe_port"; } 2>/dev/null; then
    printf 'GET /readyz HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
    status=$(head -n1 <&3 | awk '{print $2}')
    exec 3<&- 3>&-
    [ "$status" = 200 ] && { ready=1; break; }
  fi
  sleep 0.5
done
[ -n "$ready" ] || { tail -n 30 "$state/controller-manager.log" >&2; die "karmada-controller-manager not ready after 120s"; }

cat <<MSG

karmada-rs is running (state: $state)
  kubeconfig:  $kc   (contexts: host = the Karmada API server, member1, member2)
  try:         export KUBECONFIG=$kc
               kubectl get clusters
               make demo
  metrics:     http://127.0.0.1:$metrics_port/metrics      probes: http://127.0.0.1:$probe_port/readyz
  logs:        $state/controller-manager.log  $state/testenv.log  $state/env/*.log
  stop:        make local-down
MSG
