// Package monitoringcrds pins the Prometheus Operator's API types that generate.sh turns
// into CRDs; it has no code of its own.
package monitoringcrds

import _ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
