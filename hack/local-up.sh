#!/usr/bin/env bash
# `make local-up`: a karmada-rs control plane on this machine, in the background.
#   - testenv: a host ("Karmada") API server + member1 (full: kube-scheduler, kube-controller-manager,
#     kwok nodes, so pods become Ready) + member2 + member3, sharing one etcd; the CRDs installed in the host;
#   - member1 and member2 joined with `karmadactl join` (Push mode);
#   - karmada-controller-manager running against the host, leader-elected in karmada-system;
#   - member3 in Pull mode: karmada-agent running as a local process, with a ServiceAccount token on the
#     host that holds exactly the RBAC charts/karmada-agent renders for the Karmada API server.
# With AGGREGATED=1 (`make local-up AGGREGATED=1`), cluster.karmada.io is served as on a control plane
# Karmada's installers set up: by Karmada's karmada-aggregated-apiserver (built from the pinned Go module
# by `make karmada-binaries`) through an APIService, and the host has no Cluster CRD.
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
# wait_ready <name> <what> <check>: up to 120s for <check> to succeed while $state/<name>.pid lives.
wait_ready() {
  local name=$1 what=$2 check=$3
  for _ in $(seq 1 240); do
    alive "$state/$name.pid" || { tail -n 30 "$state/$name.log" >&2; die "$what exited (log above)"; }
    "$check" && return 0
    sleep 0.5
  done
  tail -n 30 "$state/$name.log" >&2
  die "$what not ready after 120s"
}

if alive "$state/testenv.pid" || alive "$state/controller-manager.pid" || alive "$state/agent-member3.pid"; then
  die "already running (state in $state); run 'make local-down' first"
fi
rm -rf "$state"
mkdir -p "$state"

tools="$("$root/hack/install-helm.sh")"
kubectl="$tools/kubectl"
helm="$tools/helm"
# The binaries: built here, unless all four are named by TESTENV_BIN, KARMADACTL_BIN,
# KARMADA_CONTROLLER_MANAGER_BIN and KARMADA_AGENT_BIN (the local-up test passes the ones its own
# `cargo test` built, which a `cargo build -p` here would compile again with other features).
if [ -n "${TESTENV_BIN:-}" ] && [ -n "${KARMADACTL_BIN:-}" ] &&
   [ -n "${KARMADA_CONTROLLER_MANAGER_BIN:-}" ] && [ -n "${KARMADA_AGENT_BIN:-}" ]; then
  testenv_bin=$TESTENV_BIN karmadactl_bin=$KARMADACTL_BIN
  kcm_bin=$KARMADA_CONTROLLER_MANAGER_BIN agent_bin=$KARMADA_AGENT_BIN
else
  echo "local-up: building testenv, karmadactl, karmada-controller-manager and karmada-agent" >&2
  (cd "$root" && ${CARGO:-cargo} build -q -p testenv -p karmadactl -p karmada-controller-manager -p karmada-agent --bins)
  testenv_bin=$target/testenv karmadactl_bin=$target/karmadactl
  kcm_bin=$target/karmada-controller-manager agent_bin=$target/karmada-agent
fi

env_flags=(--members 3 --full --install-crds)
if [ -n "${AGGREGATED:-}" ]; then
  echo "local-up: building Karmada's aggregated API server (cached after the first time)" >&2
  nice -n 10 "$root/hack/build-test-binaries.sh" karmada >/dev/null ||
    die "building Karmada's binaries failed (run: make karmada-binaries)"
  env_flags+=(--aggregated-apiserver)
fi
echo "local-up: starting host + member1 (full) + member2 + member3${AGGREGATED:+, Clusters served by karmada-aggregated-apiserver} (logs: $state/testenv.log)" >&2
# setsid: the environment outlives this script and make; testenv's children die with testenv.
setsid "$testenv_bin" up "${env_flags[@]}" --dir "$state/env" --ready-file "$state/ready" \
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
# (testenv already made it when the aggregated API server runs: its Service lives there)
k --context host get namespace karmada-system >/dev/null 2>&1 || k --context host create namespace karmada-system >/dev/null

for m in member1 member2; do
  echo "local-up: karmadactl join $m" >&2
  "$karmadactl_bin" join "$m" --kubeconfig "$kc" --karmada-context host \
    --cluster-kubeconfig "$kc" --cluster-context "$m" >>"$state/join.log" 2>&1 ||
    { tail -n 20 "$state/join.log" >&2; die "karmadactl join $m failed (log: $state/join.log)"; }
done

echo "local-up: starting karmada-controller-manager (log: $state/controller-manager.log)" >&2
setsid "$kcm_bin" \
  --kubeconfig "$state/env/host/kubeconfig" \
  --leader-elect-resource-namespace=karmada-system \
  --metrics-bind-address="127.0.0.1:$metrics_port" \
  --health-probe-bind-address="127.0.0.1:$probe_port" \
  --controllers="$controllers" \
  --cluster-status-update-frequency=5s \
  --v=2 \
  >"$state/controller-manager.log" 2>&1 </dev/null &
echo $! >"$state/controller-manager.pid"

kcm_ready() {
  { exec 3<>"/dev/tcp/127.0.0.1/$probe_port"; } 2>/dev/null || return 1
  printf 'GET /readyz HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
  status=$(head -n1 <&3 | awk '{print $2}')
  exec 3<&- 3>&-
  [ "$status" = 200 ]
}
wait_ready controller-manager karmada-controller-manager kcm_ready

# member3, Pull mode: the agent's identity on the host is a ServiceAccount holding exactly the chart's
# Karmada-side RBAC (helm template --set target=karmadaApiServer); on member3 it uses member3's admin.
echo "local-up: member3 (Pull mode): RBAC from charts/karmada-agent, karmada-agent (log: $state/agent-member3.log)" >&2
agent_sa=karmada-agent-member3
k --context host -n karmada-system create serviceaccount "$agent_sa" >/dev/null
"$helm" template karmada-agent "$root/charts/karmada-agent" --namespace karmada-system \
  --set clusterName=member3 --set target=karmadaApiServer \
  --set karmadaIdentity.user="system:serviceaccount:karmada-system:$agent_sa" |
  k --context host apply -f - >>"$state/agent-rbac.log" 2>&1 ||
  { tail -n 20 "$state/agent-rbac.log" >&2; die "applying the agent's RBAC failed (log: $state/agent-rbac.log)"; }
token=$(k --context host -n karmada-system create token "$agent_sa" --duration=24h)
server=$(k config view --raw --minify --context host -o jsonpath='{.clusters[0].cluster.server}')
ca=$(k config view --raw --minify --context host -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
agent_kc="$state/agent-member3.kubeconfig"
(umask 077 && cat >"$agent_kc" <<KC
apiVersion: v1
kind: Config
clusters:
- name: karmada
  cluster:
    server: $server
    certificate-authority-data: $ca
users:
- name: $agent_sa
  user:
    token: $token
contexts:
- name: karmada
  context:
    cluster: karmada
    user: $agent_sa
current-context: karmada
KC
)
member3_server=$(k config view --raw --minify --context member3 -o jsonpath='{.clusters[0].cluster.server}')
setsid "$agent_bin" \
  --kubeconfig "$state/env/member3/kubeconfig" \
  --karmada-kubeconfig "$agent_kc" \
  --cluster-name=member3 \
  --cluster-api-endpoint="$member3_server" \
  --metrics-bind-address="${AGENT_METRICS_BIND_ADDRESS:-0}" \
  --health-probe-bind-address="${AGENT_PROBE_BIND_ADDRESS:-0}" \
  --cluster-status-update-frequency=5s \
  --report-secrets=None \
  --v=2 \
  >"$state/agent-member3.log" 2>&1 </dev/null &
echo $! >"$state/agent-member3.pid"
member3_ready() {
  [ "$(k --context host get cluster member3 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
wait_ready agent-member3 "karmada-agent (member3 Ready)" member3_ready

cat <<MSG

karmada-rs is running (state: $state)
  kubeconfig:  $kc   (contexts: host = the Karmada API server, member1, member2 (Push), member3 (Pull))
  try:         export KUBECONFIG=$kc
               kubectl get clusters
               make demo
  metrics:     http://127.0.0.1:$metrics_port/metrics      probes: http://127.0.0.1:$probe_port/readyz
  logs:        $state/controller-manager.log  $state/agent-member3.log  $state/testenv.log  $state/env/*.log
  stop:        make local-down
MSG
