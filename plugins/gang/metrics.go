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
	registerOnce sync.Once
)

// registerMetrics registers the metrics once per process (several profiles
// or scheduler restarts in one process build the plugin more than once).
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(attempts, timeToBound, preemptions, backlogWaits, backlogWaitSeconds)
	})
}
