#!/usr/bin/env bash
# Generates the Prometheus Operator's CRDs (monitoring.coreos.com/v1: PodMonitor,
# PrometheusRule, ...) from its API types at the version go.mod pins, with controller-gen
# (a `tool` of go.mod), into $1 (default: ../bin/monitoring-crds). The monitoring
# component's test (reconciler/tests/integration/monitoring.rs) validates
# deploy/components/monitoring against their openAPIV3Schema offline. upstream/build.sh
# runs this; seconds when Go's caches are warm.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"
out=${1:-$here/../bin/monitoring-crds}
mkdir -p "$out"
go tool controller-gen crd \
  paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 \
  output:crd:dir="$out"
echo "  monitoring CRDs ($(go list -m -f '{{.Version}}' github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring)): $(ls "$out" | wc -l) files in $out"
