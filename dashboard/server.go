// Package dashboard serves muster's live web view of a cluster: every
// node's GPUs as cells coloured by the workload holding them, every
// workload with a gang and why it waits, and one workload in detail (the
// CLI's own describe and fit, rendered by the caller). It reads through
// the user's credentials only, never writes, and embeds every asset.
package dashboard

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

//go:embed assets
var assets embed.FS

// DetailFunc renders one workload the way the CLI does: describe's tree
// and fit's answer, as text.
type DetailFunc func(ctx context.Context, apiVersion, kind, namespace, name string) (Detail, error)

// Detail is the workload panel's content.
type Detail struct {
	Describe string `json:"describe"`
	Fit      string `json:"fit,omitempty"`
	// FitError says why fit could not answer (the describe still shows).
	FitError string `json:"fitError,omitempty"`
}

// Server is the dashboard's HTTP handler.
type Server struct {
	Live   *Live
	Detail DetailFunc
	// Fit answers /api/fit, the gangs table's "what would let it start"
	// (nil: the column stays empty). Answers are kept FitTTL (default
	// 20 s) and computed one at a time (verdicts.go).
	Fit    FitFunc
	FitTTL time.Duration
	fits   verdictCache
	// Token, when set, must come with every request: as ?token= once
	// (which sets a cookie and redirects it away), as that cookie, or as
	// "Authorization: Bearer". Empty serves without (loopback only).
	Token string
	// DetailTimeout bounds one detail request (default 30 s).
	DetailTimeout time.Duration

	// gz is the current snapshot gzipped, made once per version for every
	// page that asks (a 1000-node snapshot of 1 MB is a fifth of that).
	gzMu      sync.Mutex
	gzVersion int64
	gzBody    []byte
}

const tokenCookie = "muster-dashboard-token"

// NewToken returns a random access token.
func NewToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// NeedsToken says whether a server bound to addr must require a token:
// anything but a loopback address (an empty host, 0.0.0.0 or [::] listen
// on every interface).
func NeedsToken(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return true
	}
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// securityHeaders are sent with every response: nothing but the page's
// own origin may be loaded or contacted, nothing may frame it.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
	"X-Frame-Options":        "DENY",
	"Cache-Control":          "no-store",
}

// Handler returns the dashboard's routes.
func (s *Server) Handler() http.Handler {
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has it
	}
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		b, err := fs.ReadFile(static, "index.html")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(b)
	})
	mux.HandleFunc("GET /api/snapshot", s.snapshot)
	mux.HandleFunc("GET /api/events", s.events)
	mux.HandleFunc("GET /api/workload", s.workload)
	mux.HandleFunc("GET /api/fit", s.fit)
	return s.guard(mux)
}

// guard sets the security headers, admits only GET and HEAD (the
// dashboard never changes anything), and checks the token.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range securityHeaders {
			w.Header().Set(k, v)
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "the dashboard is read-only", http.StatusMethodNotAllowed)
			return
		}
		if s.Token != "" {
			if q := r.URL.Query().Get("token"); q != "" && s.tokenOK(q) {
				// Trade the token in the URL for a cookie, and take it
				// out of the address bar (and of the history).
				http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: q, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
				u := *r.URL
				v := u.Query()
				v.Del("token")
				u.RawQuery = v.Encode()
				http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
				return
			}
			if !s.authorized(r) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="muster dashboard"`)
				http.Error(w, "unauthorized: open the URL with ?token= that muster dashboard printed", http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) tokenOK(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.Token)) == 1
}

func (s *Server) authorized(r *http.Request) bool {
	if c, err := r.Cookie(tokenCookie); err == nil && s.tokenOK(c.Value) {
		return true
	}
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && s.tokenOK(t) {
		return true
	}
	return false
}

func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) {
	body, version := s.Live.Current()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Vary", "Accept-Encoding")
	if acceptsGzip(r) {
		if gz, err := s.gzipped(body, version); err == nil {
			w.Header().Set("Content-Encoding", "gzip")
			body = gz
		}
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// gzipped returns body compressed, from the cache when version is the one
// compressed last.
func (s *Server) gzipped(body []byte, version int64) ([]byte, error) {
	s.gzMu.Lock()
	defer s.gzMu.Unlock()
	if s.gzBody != nil && s.gzVersion == version {
		return s.gzBody, nil
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(body); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	s.gzVersion, s.gzBody = version, buf.Bytes()
	return s.gzBody, nil
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(q, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

// events streams each new snapshot version as a server-sent event.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	ch, cancel := s.Live.Subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	_, v := s.Live.Current()
	send := func(v int64) bool {
		_, err := fmt.Fprintf(w, "event: version\ndata: %d\n\n", v)
		fl.Flush()
		return err == nil
	}
	if !send(v) {
		return
	}
	keepalive := time.NewTicker(20 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case v := <-ch:
			if !send(v) {
				return
			}
		case <-keepalive.C:
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// maxNameBytes bounds each query parameter of a detail request (a DNS
// subdomain is at most 253 bytes; an apiVersion a group and a version).
const maxNameBytes = 320

// workloadArgs reads a workload's apiVersion, kind, namespace and name
// from the query, or answers 400.
func workloadArgs(w http.ResponseWriter, r *http.Request) ([4]string, bool) {
	q := r.URL.Query()
	args := [4]string{q.Get("apiVersion"), q.Get("kind"), q.Get("namespace"), q.Get("name")}
	for _, a := range args {
		if a == "" || len(a) > maxNameBytes {
			http.Error(w, "apiVersion, kind, namespace and name are required (each at most "+strconv.Itoa(maxNameBytes)+" bytes)", http.StatusBadRequest)
			return args, false
		}
	}
	return args, true
}

func (s *Server) workload(w http.ResponseWriter, r *http.Request) {
	args, ok := workloadArgs(w, r)
	if !ok {
		return
	}
	timeout := s.DetailTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	d, err := s.Detail(ctx, args[0], args[1], args[2], args[3])
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	_ = json.NewEncoder(w).Encode(d)
}
