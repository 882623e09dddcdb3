package podgrouper

import "testing"

// The names are what dashboards and alerts query: the same
// muster_<component>_ scheme as the gang plugin's, and never renamed by a
// refactoring.
func TestMetricNames(t *testing.T) {
	registerMetrics()
	for _, tc := range []struct {
		metric interface{ FQName() string }
		want   string
	}{
		{reconcileDuration, "muster_podgrouper_reconcile_duration_seconds"},
		{podToPodGroup, "muster_podgrouper_pod_to_podgroup_seconds"},
		{errorsTotal, "muster_podgrouper_errors_total"},
	} {
		if got := tc.metric.FQName(); got != tc.want {
			t.Errorf("metric %q, want %q", got, tc.want)
		}
	}
}
