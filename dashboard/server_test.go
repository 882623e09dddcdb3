package dashboard

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestNeedsToken(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8080", false},
		{"127.0.0.2:0", false},
		{"[::1]:8080", false},
		{"localhost:8080", false},
		{"0.0.0.0:8080", true},
		{"[::]:8080", true},
		{":8080", true},
		{"10.1.2.3:8080", true},
		{"dashboard.example.com:80", true},
		{"garbage", true},
	} {
		if got := NeedsToken(tc.addr); got != tc.want {
			t.Errorf("NeedsToken(%q) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

func testServer(token string) *Server {
	l := &Live{subs: map[chan int64]struct{}{}}
	l.body, l.version = []byte(`{"version":1}`), 1
	return &Server{Live: l, Token: token, Detail: func(ctx context.Context, apiVersion, kind, ns, name string) (Detail, error) {
		return Detail{Describe: kind + " " + ns + "/" + name}, nil
	}}
}

func TestGuard(t *testing.T) {
	const token = "s3cret"
	h := testServer(token).Handler()
	do := func(method, target string, mod func(*http.Request)) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, target, nil)
		if mod != nil {
			mod(r)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for _, tc := range []struct {
		name, method, target string
		mod                  func(*http.Request)
		code                 int
	}{
		{"page without token", "GET", "/", nil, http.StatusUnauthorized},
		{"asset without token", "GET", "/static/app.js", nil, http.StatusUnauthorized},
		{"snapshot without token", "GET", "/api/snapshot", nil, http.StatusUnauthorized},
		{"wrong token", "GET", "/?token=nope", nil, http.StatusUnauthorized},
		{"token in the URL", "GET", "/?token=" + token, nil, http.StatusSeeOther},
		{"cookie", "GET", "/api/snapshot", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: tokenCookie, Value: token}) }, http.StatusOK},
		{"wrong cookie", "GET", "/api/snapshot", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: tokenCookie, Value: "x"}) }, http.StatusUnauthorized},
		{"bearer", "GET", "/api/snapshot", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }, http.StatusOK},
		{"a write", "POST", "/api/snapshot", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }, http.StatusMethodNotAllowed},
		{"unknown path", "GET", "/etc/passwd", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(tc.method, tc.target, tc.mod)
			if w.Code != tc.code {
				t.Errorf("%s %s: %d, want %d: %s", tc.method, tc.target, w.Code, tc.code, w.Body.String())
			}
			csp := w.Header().Get("Content-Security-Policy")
			if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			if w.Code == http.StatusUnauthorized && strings.Contains(w.Body.String(), token) {
				t.Errorf("the 401 reveals the token")
			}
		})
	}
	// The redirect sets the cookie and drops the token from the URL.
	w := do("GET", "/?token="+token+"&x=1", nil)
	if loc := w.Header().Get("Location"); strings.Contains(loc, token) || !strings.Contains(loc, "x=1") {
		t.Errorf("redirect to %q", loc)
	}
	if c := w.Result().Cookies(); len(c) != 1 || c[0].Value != token || !c[0].HttpOnly {
		t.Errorf("cookies %+v", c)
	}
}

func TestNoTokenOnLoopback(t *testing.T) {
	h := testServer("").Handler()
	for _, target := range []string{"/", "/static/app.js", "/static/app.css", "/api/snapshot"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", target, nil))
		if w.Code != http.StatusOK {
			t.Errorf("GET %s: %d", target, w.Code)
		}
	}
}

func TestWorkloadParams(t *testing.T) {
	h := testServer("").Handler()
	for _, tc := range []struct {
		target string
		code   int
		body   string
	}{
		{"/api/workload?apiVersion=v1&kind=Pod&namespace=a&name=b", http.StatusOK, `"describe":"Pod a/b"`},
		{"/api/workload?apiVersion=v1&kind=Pod&namespace=a", http.StatusBadRequest, "required"},
		{"/api/workload?apiVersion=v1&kind=Pod&namespace=a&name=" + strings.Repeat("x", 400), http.StatusBadRequest, "at most"},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", tc.target, nil))
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.body) {
			t.Errorf("GET %.80s: %d %s, want %d with %q", tc.target, w.Code, w.Body.String(), tc.code, tc.body)
		}
	}
}

// TestSnapshotGzip: a client that accepts gzip gets the snapshot
// compressed, the same bytes once inflated; one that does not (or says
// q=0) gets it plain; a new version is compressed anew.
func TestSnapshotGzip(t *testing.T) {
	s := testServer("")
	h := s.Handler()
	get := func(enc string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/api/snapshot", nil)
		if enc != "" {
			r.Header.Set("Accept-Encoding", enc)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	inflate := func(w *httptest.ResponseRecorder) string {
		t.Helper()
		if w.Header().Get("Content-Encoding") != "gzip" {
			return w.Body.String()
		}
		zr, err := gzip.NewReader(w.Body)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		enc  string
		gzip bool
	}{
		{"", false}, {"gzip", true}, {"br, gzip;q=0.8", true}, {"gzip;q=0", false}, {"identity", false},
	} {
		w := get(tc.enc)
		if got := w.Header().Get("Content-Encoding") == "gzip"; got != tc.gzip {
			t.Errorf("Accept-Encoding %q: gzip %v, want %v", tc.enc, got, tc.gzip)
		}
		if body := inflate(w); body != `{"version":1}` {
			t.Errorf("Accept-Encoding %q: body %q", tc.enc, body)
		}
	}
	s.Live.mu.Lock()
	s.Live.body, s.Live.version = []byte(`{"version":2}`), 2
	s.Live.mu.Unlock()
	if body := inflate(get("gzip")); body != `{"version":2}` {
		t.Errorf("after a new version: %q", body)
	}
}
