package podgrouper

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Error reasons counted by muster_podgrouper_errors_total. Constant
// strings: a reason per distinct message would explode the series.
const (
	reasonOwners      = "owners"       // owner chain could not be walked
	reasonRoot        = "root"         // workload object could not be read
	reasonDefinition  = "definition"   // definition invalid or its evaluation failed (the pods wait)
	reasonAnnotation  = "annotation"   // a workload annotation muster reads is invalid (the pods wait)
	reasonPodGroup    = "podgroup"     // PodGroup create/update failed
	reasonPodPatch    = "pod_patch"    // pod label/annotation patch failed
	reasonKartaDecode = "karta"        // a cluster Karta is invalid
	reasonKartaStatus = "karta_status" // writing a Karta's status failed
)

var (
	reconcileDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      "muster",
		Subsystem:      "podgrouper",
		Name:           "reconcile_duration_seconds",
		Help:           "Time to reconcile one pod, by result (success, error).",
		Buckets:        metrics.ExponentialBuckets(0.0005, 2, 16),
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	podToPodGroup = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      "muster",
		Subsystem:      "podgrouper",
		Name:           "pod_to_podgroup_seconds",
		Help:           "Time from a pod's creation to its PodGroup existing and the pod labelled with it.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 16),
		StabilityLevel: metrics.ALPHA,
	})

	errorsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "muster",
		Subsystem:      "podgrouper",
		Name:           "errors_total",
		Help:           "Errors of the pod-grouper by reason.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})

	webhookDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: "muster",
		Subsystem: "podgrouper",
		Name:      "webhook_duration_seconds",
		Help:      "Time the admission webhook takes for one pod create, by result (joined, unchanged, refused).",
		// From 0.1 ms: the budget is a few milliseconds per pod create.
		Buckets:        metrics.ExponentialBuckets(0.0001, 2, 16),
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	registerOnce sync.Once
)

// Metrics are the collectors the pod-grouper serves on /metrics: what
// dashboards may query (manifests/grafana is tested against this list).
func Metrics() []metrics.Registerable {
	return []metrics.Registerable{reconcileDuration, podToPodGroup, errorsTotal, webhookDuration}
}

// registerMetrics registers the pod-grouper metrics with the legacy registry
// served on /metrics. It is safe to call more than once.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(Metrics()...)
	})
}
