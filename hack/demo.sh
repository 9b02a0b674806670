#!/usr/bin/env bash
# `make demo` (after `make local-up`): applies hack/demo/nginx.yaml (Deployment + Service, Divided 2:1
# between member1 and member2, an OverridePolicy for member1) to the host and shows what a person would
# check: the ResourceBinding and its placement, the Works, the objects in each member, and the status
# aggregated back into the template; and `hello` duplicated to member1 (Push) and member3 (Pull, applied
# by member3's karmada-agent). Whatever has not happened within DEMO_TIMEOUT (default 90s) is
# reported as "not propagated yet", and then the demo exits 1 (after showing everything else).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state=${KARMADA_RS_LOCAL_UP_DIR:-$root/.local-up}
timeout=${DEMO_TIMEOUT:-90}
kc="$state/env/kubeconfig"
[ -f "$kc" ] && [ -f "$state/controller-manager.pid" ] && kill -0 "$(cat "$state/controller-manager.pid")" 2>/dev/null ||
  { echo "demo: nothing is running; run 'make local-up' first" >&2; exit 1; }
kubectl="$("$root/hack/install-helm.sh")/kubectl"
k() { "$kubectl" --kubeconfig "$kc" "$@"; }

# wait_for <description> <command...>: retries the command until it succeeds with output, or until the
# demo's overall deadline (DEMO_TIMEOUT seconds after it started; at least one try per step). A step
# that times out is reported and remembered; the demo goes on showing the rest, then exits 1.
deadline=$((SECONDS + timeout))
missing=()
wait_for() {
  local what=$1; shift
  local out
  while :; do
    out=$("$@" 2>/dev/null || true)
    if [ -n "$out" ]; then printf '%s\n' "$out"; return 0; fi
    if [ $SECONDS -ge $deadline ]; then
      echo "  ($what: not propagated yet)" >&2
      missing+=("$what")
      return 0
    fi
    sleep 1
  done
}

# with_all <pattern>... -- <command...>: prints the command's output only if it matches every pattern
# (grep -E), so that wait_for keeps waiting until it does.
with_all() {
  local patterns=() out p
  while [ "$1" != "--" ]; do patterns+=("$1"); shift; done
  shift
  out=$("$@") || return 1
  for p in "${patterns[@]}"; do grep -Eq -- "$p" <<<"$out" || return 1; done
  printf '%s\n' "$out"
}

section() { printf '\n== %s\n' "$*"; }

section "kubectl get clusters"
k --context host get clusters

section "kubectl apply -f hack/demo/nginx.yaml"
k --context host apply -f "$root/hack/demo/nginx.yaml"
deadline=$((SECONDS + timeout))

section "ResourceBindings (detector + scheduler): kubectl get rb -n default"
wait_for "ResourceBindings nginx-deployment and nginx-service" with_all '^nginx-deployment ' '^nginx-service ' -- \
  k --context host get rb -n default nginx-deployment nginx-service --ignore-not-found
wait_for "placement of nginx-deployment (2 replicas on member1, 1 on member2)" \
  with_all '^  member1: 2 replicas' '^  member2: 1 replicas' -- k --context host get rb -n default nginx-deployment \
  -o jsonpath='{range .spec.clusters[*]}  {.name}: {.replicas} replicas{"\n"}{end}'

section "Works (binding controller): kubectl get works -A"
wait_for "Works in karmada-es-member1 and karmada-es-member2" with_all '^karmada-es-member1 ' '^karmada-es-member2 ' -- \
  k --context host get works -A -l resourcebinding.karmada.io/permanent-id --ignore-not-found

for m in member1 member2; do
  section "$m (execution controller): kubectl --context $m get deploy,svc nginx"
  wait_for "nginx Deployment and Service in $m" with_all '^deployment.apps/nginx ' '^service/nginx ' -- \
    k --context "$m" get deploy,svc nginx --ignore-not-found -o wide
done

section "Override in member1: labels and image of the member1 copy"
wait_for "overridden copy in member1" with_all 'overridden-for=member1$' 'image=nginx:1.27.1$' -- \
  k --context member1 get deploy nginx \
  -o jsonpath='{"  label overridden-for="}{.metadata.labels.overridden-for}{"\n  image="}{.spec.template.spec.containers[0].image}{"\n"}'

section "Aggregated status (workStatus + bindingStatus): rb .status.aggregatedStatus"
wait_for "aggregated status (applied in member1 and member2)" \
  with_all '^  member1: applied=true' '^  member2: applied=true' -- k --context host get rb -n default nginx-deployment \
  -o jsonpath='{range .status.aggregatedStatus[*]}  {.clusterName}: applied={.applied} health={.health} status={.status}{"\n"}{end}'

section "Pull mode: hello in member1 (Push) and member3 (Pull: the agent applied karmada-es-member3's Work)"
wait_for "Work of hello in karmada-es-member3" with_all '^hello-' -- \
  k --context host get works -n karmada-es-member3 --ignore-not-found
wait_for "hello Deployment in member3" with_all '^hello ' -- \
  k --context member3 get deploy hello --ignore-not-found -o wide
wait_for "aggregated status of hello (applied in member1 and member3)" \
  with_all '^  member1: applied=true' '^  member3: applied=true' -- k --context host get rb -n default hello-deployment \
  -o jsonpath='{range .status.aggregatedStatus[*]}  {.clusterName}: applied={.applied} health={.health}{"\n"}{end}'

section "The template's status on the host: kubectl get deploy nginx"
wait_for "readyReplicas in the template's status" k --context host get deploy nginx -o jsonpath='{.status.readyReplicas}' >/dev/null
k --context host get deploy nginx -o jsonpath='{"  replicas="}{.status.replicas}{" readyReplicas="}{.status.readyReplicas}{" availableReplicas="}{.status.availableReplicas}{"\n"}'
k --context host get deploy nginx

printf '\nClean up with: %s --kubeconfig %s --context host delete -f hack/demo/nginx.yaml\n' kubectl "$kc"
if [ ${#missing[@]} -gt 0 ]; then
  printf '\ndemo: FAILED: not propagated within %ss:\n' "$timeout" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  exit 1
fi
printf '\ndemo: everything propagated\n'
