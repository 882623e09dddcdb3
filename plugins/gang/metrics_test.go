package gang

import "testing"

// The names are what dashboards and alerts query: the same
// muster_<component>_ scheme as the pod-grouper's, and never renamed by a
// refactoring.
func TestMetricNames(t *testing.T) {
	registerMetrics()
	for _, tc := range []struct {
		metric interface{ FQName() string }
		want   string
	}{
		{attempts, "muster_gang_attempts_total"},
		{timeToBound, "muster_gang_time_to_bound_seconds"},
		{preemptions, "muster_gang_preemptions_total"},
		{backlogWaits, "muster_gang_bind_backlog_waits_total"},
		{backlogWaitSeconds, "muster_gang_bind_backlog_wait_seconds_total"},
		{planDuration, "muster_gang_plan_duration_seconds"},
		{partialEvictions, "muster_gang_partial_evictions_total"},
		{gpusAllocatable, "muster_gang_gpus_allocatable"},
		{gpusAllocated, "muster_gang_gpus_allocated"},
	} {
		if got := tc.metric.FQName(); got != tc.want {
			t.Errorf("metric %q, want %q", got, tc.want)
		}
	}
}
