package gang

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Results of a gang attempt (label "result" of muster_gang_attempts_total).
const (
	resultPlanned     = "planned"        // a placement plan was found
	resultNoPlacement = "no_placement"   // no plan: every member rejected
	resultCached      = "cached_verdict" // a sibling reused the last "no placement"
	resultPermitted   = "permitted"      // the quorum passed the Permit barrier
	resultReleased    = "released"       // timeout or a member's failure released the gang
)

// Results of a preemption search (label "result" of
// muster_gang_preemptions_total).
const (
	resultPreempted   = "preempted"     // victims chosen and evicted
	resultWouldNotFit = "would_not_fit" // no placement even without every lower-priority pod
)

var (
	preemptions = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "muster",
		Subsystem:      "gang",
		Name:           "preemptions_total",
		Help:           "Preemption searches for gangs and gang-free pods, by result.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	attempts = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "muster",
		Subsystem:      "gang",
		Name:           "attempts_total",
		Help:           "Gang scheduling attempts by result.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	timeToBound = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      "muster",
		Subsystem:      "gang",
		Name:           "time_to_bound_seconds",
		Help:           "Time from the first member's creation to minMember members bound.",
		Buckets:        metrics.ExponentialBuckets(0.05, 2, 16),
		StabilityLevel: metrics.ALPHA,
	})
	backlogWaits = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "muster",
		Subsystem:      "gang",
		Name:           "bind_backlog_waits_total",
		Help:           "Times a new gang waited before planning because too many members were still being bound.",
		StabilityLevel: metrics.ALPHA,
	})
	backlogWaitSeconds = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "muster",
		Subsystem:      "gang",
		Name:           "bind_backlog_wait_seconds_total",
		Help:           "Time new gangs waited before planning because too many members were still being bound.",
		StabilityLevel: metrics.ALPHA,
	})
	planDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: "muster",
		Subsystem: "gang",
		Name:      "plan_duration_seconds",
		Help:      "Time to compute one whole-gang placement plan, by result (planned, no_placement).",
		// From 0.1 ms: a small gang on a small cluster plans in well
		// under a millisecond, a 1000-node search in tens of them.
		Buckets:        metrics.ExponentialBuckets(0.0001, 2, 18),
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	partialEvictions = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "muster",
		Subsystem:      "gang",
		Name:           "partial_evictions_total",
		Help:           "Partly bound gangs whose bound members were evicted after partialGangGracePeriodSeconds.",
		StabilityLevel: metrics.ALPHA,
	})
	gpusAllocatable = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "muster",
		Subsystem:      "gang",
		Name:           "gpus_allocatable",
		Help:           "GPUs allocatable on the cluster's nodes, as the scheduler's informers see them.",
		StabilityLevel: metrics.ALPHA,
	})
	gpusAllocated = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "muster",
		Subsystem:      "gang",
		Name:           "gpus_allocated",
		Help:           "GPUs (extended resources) requested by pods bound to a node and not finished, by whether the pod is a gang member (in_gang: true, false); every scheduler's pods.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"in_gang"})
	registerOnce sync.Once
)

// Metrics are the collectors the plugin serves on muster-scheduler's
// /metrics: what dashboards may query (manifests/grafana is tested
// against this list).
func Metrics() []metrics.Registerable {
	return []metrics.Registerable{attempts, timeToBound, preemptions, backlogWaits, backlogWaitSeconds,
		planDuration, partialEvictions, gpusAllocatable, gpusAllocated}
}

// registerMetrics registers the metrics once per process (several profiles
// or scheduler restarts in one process build the plugin more than once).
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(Metrics()...)
	})
}
