#!/usr/bin/env bash
# Tries composition-webhook against a real cluster without installing it: runs the binary on
# this machine (schemas from the cluster, loose mode, a self-signed certificate), registers
# a ValidatingWebhookConfiguration that calls it by URL with that certificate's CA as
# caBundle, applies a valid, an invalid and a schema-less Composition with kubectl, prints
# what kubectl printed, and removes everything it created.
#
# Usage: deploy/local-test.sh [KUBECONFIG]   (default: $KUBECONFIG, else ~/.kube/config)
#
# The API server must reach this machine: with kind, k3d or minikube on this machine it
# does at this machine's address. Environment:
#   WEBHOOK_HOST             address the API server dials (default: first of `hostname -I`)
#   WEBHOOK_PORT             admission port on this machine (default: 9443)
#   OPS_PORT                 operations port, on loopback (default: 18080)
#   COMPOSITION_WEBHOOK_BIN  the binary (default: built with `cargo build --locked`)
#
# Only Compositions labelled composition-webhook.crossplane.io/local-test=true are sent to
# the webhook, so other users of the cluster are not affected. Exit status: 0 when kubectl
# printed what is expected (created, denied, created with a warning), 1 otherwise.
set -euo pipefail

cd "$(dirname "$0")/.."
KUBECONFIG_FILE="${1:-${KUBECONFIG:-$HOME/.kube/config}}"
WEBHOOK_HOST="${WEBHOOK_HOST:-$(hostname -I 2>/dev/null | awk '{print $1}')}"
WEBHOOK_PORT="${WEBHOOK_PORT:-9443}"
OPS_PORT="${OPS_PORT:-18080}"
NAME=composition-webhook-local-test
LABEL=composition-webhook.crossplane.io/local-test

k() { kubectl --kubeconfig "$KUBECONFIG_FILE" "$@"; }
say() { printf '\n== %s\n' "$*"; }

for tool in kubectl curl base64; do
  command -v "$tool" >/dev/null || { echo "local-test: $tool is needed" >&2; exit 1; }
done
[ -n "$WEBHOOK_HOST" ] || { echo "local-test: set WEBHOOK_HOST to this machine's address as the API server sees it" >&2; exit 1; }
k get --raw /version >/dev/null || { echo "local-test: cannot reach the cluster of $KUBECONFIG_FILE" >&2; exit 1; }

WORK="$(mktemp -d)"
CREATED=()
PID=""
# shellcheck disable=SC2317 # called by the trap
cleanup() {
  set +e
  say "cleaning up"
  k delete validatingwebhookconfiguration "$NAME" --ignore-not-found
  k delete compositions.apiextensions.crossplane.io -l "$LABEL=true" --ignore-not-found
  for ((i = ${#CREATED[@]} - 1; i >= 0; i--)); do k delete -f "${CREATED[$i]}" --ignore-not-found; done
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

# Applies FILE unless the CRD or XRD NAME exists already; removed again on exit.
ensure() {
  local kind="$1" name="$2" file="$3"
  if ! k get "$kind" "$name" >/dev/null 2>&1; then
    k apply -f "$file"
    CREATED+=("$file")
    if [ "$kind" = crd ]; then k wait --for=condition=Established "crd/$name" --timeout=60s; fi
  fi
}

say "schemas (only what the cluster lacks)"
ensure crd compositions.apiextensions.crossplane.io crds/apiextensions.crossplane.io_compositions.yaml
ensure crd compositeresourcedefinitions.apiextensions.crossplane.io crds/apiextensions.crossplane.io_compositeresourcedefinitions.yaml
ensure crd networks.compute.gcp.upbound.io testdata/crds/compute.gcp.upbound.io_networks.yaml
ensure crd subnetworks.compute.gcp.upbound.io testdata/crds/compute.gcp.upbound.io_subnetworks.yaml
ensure xrd xnetworks.gcp.platformref.upbound.io testdata/example/definition.yaml

BIN="${COMPOSITION_WEBHOOK_BIN:-}"
if [ -z "$BIN" ]; then
  say "building"
  cargo build --locked --quiet
  BIN=target/debug/composition-webhook
fi

say "starting $BIN at https://$WEBHOOK_HOST:$WEBHOOK_PORT/validate"
"$BIN" serve --kubeconfig "$KUBECONFIG_FILE" --mode loose \
  --self-signed --self-signed-dns-name "$WEBHOOK_HOST" --ca-bundle-out "$WORK/ca.pem" \
  --address "0.0.0.0:$WEBHOOK_PORT" --operations-address "127.0.0.1:$OPS_PORT" \
  >"$WORK/webhook.log" 2>&1 &
PID=$!
ready=""
for _ in $(seq 60); do
  if ready="$(curl -fsS "http://127.0.0.1:$OPS_PORT/readyz" 2>/dev/null)"; then break; fi
  kill -0 "$PID" 2>/dev/null || { cat "$WORK/webhook.log" >&2; exit 1; }
  ready=""
  sleep 1
done
[ -n "$ready" ] || { echo "local-test: not ready after 60 s" >&2; cat "$WORK/webhook.log" >&2; exit 1; }
echo "$ready"

say "registering ValidatingWebhookConfiguration $NAME"
k apply -f - <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: $NAME
webhooks:
  - name: compositions.composition-webhook.crossplane.io
    admissionReviewVersions: ["v1", "v1beta1"]
    sideEffects: None
    failurePolicy: Fail
    matchPolicy: Equivalent
    timeoutSeconds: 10
    objectSelector:
      matchLabels:
        $LABEL: "true"
    clientConfig:
      url: https://$WEBHOOK_HOST:$WEBHOOK_PORT/validate
      caBundle: $(base64 <"$WORK/ca.pem" | tr -d '\n')
    rules:
      - apiGroups: ["apiextensions.crossplane.io"]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["compositions"]
        scope: Cluster
EOF
# The API server picks up new webhook configurations within a second or so.
sleep 3

failed=0
# Applies FILE, prints the command and what kubectl printed, and checks for PATTERN in it.
apply() {
  local file="$1" pattern="$2" out
  printf '\n$ kubectl apply -f %s\n' "$file"
  out="$(k apply -f "$file" 2>&1)" || true
  printf '%s\n' "$out"
  if ! grep -qE "$pattern" <<<"$out"; then
    echo "local-test: expected /$pattern/ in kubectl's output" >&2
    failed=1
  fi
}
say "applying"
apply deploy/local-test/valid.yaml '^composition.apiextensions.crossplane.io/local-test-valid (created|configured|unchanged)$'
# A 422 with causes: kubectl prints "The Composition ... is invalid:" and a line per cause.
apply deploy/local-test/invalid.yaml '^The Composition "local-test-invalid" is invalid'
apply deploy/local-test/missing-schema.yaml '^Warning: Composition "local-test-missing-schema": .*Subnetworkk'

say "webhook log (last 5 lines)"
tail -n 5 "$WORK/webhook.log"
exit "$failed"
