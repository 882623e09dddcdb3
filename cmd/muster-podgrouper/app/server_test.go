package app

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/util/workqueue"
)

func TestMuxEndpoints(t *testing.T) {
	synced := false
	for _, tc := range []struct {
		profiling bool
		synced    bool
		path      string
		want      int
	}{
		{path: "/healthz", want: http.StatusOK},
		{path: "/readyz", want: http.StatusServiceUnavailable},
		{synced: true, path: "/readyz", want: http.StatusOK},
		{path: "/metrics", want: http.StatusOK},
		// Profiles only when asked for: the endpoint has no authentication.
		{path: "/debug/pprof/heap", want: http.StatusNotFound},
		{profiling: true, path: "/debug/pprof/heap", want: http.StatusOK},
	} {
		synced = tc.synced
		rec := httptest.NewRecorder()
		newMux(tc.profiling, func() bool { return synced }).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if rec.Code != tc.want {
			t.Errorf("profiling=%v synced=%v GET %s: %d, want %d", tc.profiling, tc.synced, tc.path, rec.Code, tc.want)
		}
	}
}

// TestWorkqueueMetrics: /metrics serves the workqueue series of named
// queues, as the README promises for the pod-grouper's two queues.
func TestWorkqueueMetrics(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "muster_test_queue"})
	defer q.ShutDown()
	q.Add("a")
	rec := httptest.NewRecorder()
	newMux(false, func() bool { return true }).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	// The series, not its value: -count=N runs add to the same queue name.
	if want := `workqueue_adds_total{name="muster_test_queue"} `; !strings.Contains(rec.Body.String(), want) {
		t.Errorf("/metrics lacks %s", want)
	}
}
