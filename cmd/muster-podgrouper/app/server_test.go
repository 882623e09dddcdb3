package app

import (
	"net/http"
	"net/http/httptest"
	"testing"
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
