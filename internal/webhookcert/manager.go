// Package webhookcert gives the pod-grouper's admission webhook its TLS
// serving certificate.
//
// Self-managed (the default): a CA and a serving certificate live in one
// Secret of type kubernetes.io/tls that every replica reads and the first to
// need it writes (races settle through AlreadyExists and resourceVersion
// conflicts, then a fresh read). The CA goes into the caBundle of each
// webhook of the pod-grouper's MutatingWebhookConfiguration. Run renews the
// serving certificate RenewBefore ahead of its end, replaces the CA the same
// way (keeping the old one in the bundle while it lives), and puts the bundle
// back when someone resets it. A Secret the Manager did not create (it lacks
// the label app.kubernetes.io/managed-by=muster-podgrouper) is used when it
// is fit and never changed: when unfit, Ensure says which Secret and why.
//
// CertDir: with cert-manager, tls.crt and tls.key come from a mounted
// directory and are reloaded when they change; cert-manager's CA injector
// keeps the caBundle.
//
// GetCertificate serves the current certificate to tls.Config, switching to
// a new one on the next handshake after a renewal.
package webhookcert

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// DefaultInterval is Run's interval when given none: how long a reset
// caBundle stays wrong at most.
const DefaultInterval = time.Minute

// Manager keeps a webhook's serving certificate. It is safe for concurrent use.
type Manager struct {
	client kubernetes.Interface
	cfg    Config
	dns    []string
	ips    []net.IP

	state atomic.Pointer[state]

	// ensureMu serializes Ensure (Run and a caller's own call).
	ensureMu sync.Mutex
	// loadMu serializes CertDir reloads; badStamp and badErr remember the
	// files that failed last, so a broken pair is not parsed per handshake.
	loadMu   sync.Mutex
	badStamp *dirStamp
	badErr   error
}

// state is what the Manager serves, replaced whole.
type state struct {
	cert *tls.Certificate
	// bundle is the CA bundle of the Secret last read (or CertDir's ca.crt).
	bundle []byte
	// stamp identifies the files cert came from (CertDir mode).
	stamp dirStamp
	// injection and updated are what the last Ensure did to the
	// MutatingWebhookConfiguration.
	injection Injection
	updated   int
}

// Status is what the last Ensure left. An Ensure that failed before it had
// a certificate (the Secret unreadable or unfit) leaves the previous Status.
type Status struct {
	// NotAfter is when the served certificate expires (zero: none yet).
	NotAfter time.Time
	// Injection is the state of the MutatingWebhookConfiguration.
	Injection Injection
	// WebhooksUpdated is how many webhooks' caBundle the last Ensure set.
	WebhooksUpdated int
}

// New checks cfg and returns a Manager that serves nothing until the first
// successful Ensure. client may be nil in CertDir mode only.
func New(client kubernetes.Interface, cfg Config) (*Manager, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if client == nil && cfg.CertDir == "" {
		return nil, errors.New("webhookcert: a Kubernetes client is required when CertDir is empty")
	}
	m := &Manager{client: client, cfg: cfg}
	m.dns, m.ips = cfg.sans()
	return m, nil
}

// Ensure brings the certificate up to date once. Self-managed: it reads the
// Secret, creates or renews it where needed, injects the CA bundle into the
// MutatingWebhookConfiguration (a missing one is not an error: Status says
// so), then serves the Secret's certificate. CertDir: it reloads the files
// if they changed.
//
// A new serving certificate is served only once the API server trusts it
// (the bundle is injected, or there is no configuration to inject into), so
// a failed injection keeps the old certificate while it is valid.
func (m *Manager) Ensure(ctx context.Context) error {
	m.ensureMu.Lock()
	defer m.ensureMu.Unlock()
	if m.cfg.CertDir != "" {
		return m.loadDir(ctx)
	}
	mat, err := m.ensureSecret(ctx)
	if err != nil {
		return err
	}
	prev := m.state.Load()
	injection, updated, injectErr := m.inject(ctx, mat.caBundle)
	next := &state{cert: mat.cert, bundle: mat.caBundle, injection: injection, updated: updated}
	if injectErr != nil {
		next.injection = InjectionFailed
		if prev != nil && m.cfg.Clock.Now().Before(prev.cert.Leaf.NotAfter) {
			// Keep serving what the API server trusted so far.
			next.cert = prev.cert
		}
	}
	m.logChange(ctx, prev, next)
	m.state.Store(next)
	return injectErr
}

// logChange logs what an Ensure changed in the served certificate or the
// state of the injection, and nothing when it changed nothing.
func (m *Manager) logChange(ctx context.Context, prev, next *state) {
	logger := klog.FromContext(ctx)
	if prev == nil || prev.injection != next.injection {
		switch next.injection {
		case InjectionMissing:
			logger.Info("MutatingWebhookConfiguration not found; the CA bundle goes in once it exists", "configuration", m.cfg.WebhookConfiguration)
		case InjectionDone:
			logger.Info("CA bundle in place", "configuration", m.cfg.WebhookConfiguration)
		}
	}
	if prev == nil || !prev.cert.Leaf.Equal(next.cert.Leaf) {
		leaf := next.cert.Leaf
		logger.Info("Serving webhook certificate", "secret", m.secretRef(), "serial", leaf.SerialNumber.Text(16), "notAfter", leaf.NotAfter)
	}
}

// GetCertificate is for tls.Config.GetCertificate: the current serving
// certificate. In CertDir mode it first reloads changed files.
func (m *Manager) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if m.cfg.CertDir != "" {
		ctx := context.Background()
		if hello != nil && hello.Context() != nil {
			ctx = hello.Context()
		}
		if err := m.loadDir(ctx); err != nil {
			// The last good pair, if any, is still served.
			klog.FromContext(ctx).Error(err, "Reloading the webhook serving certificate")
		}
	}
	s := m.state.Load()
	if s == nil {
		return nil, errNoCertificate
	}
	return s.cert, nil
}

// CABundle returns the PEM CA bundle that clients must trust: the Secret's
// ca.crt as last read, or in CertDir mode the directory's ca.crt (nil when
// it has none). Nil before the first successful Ensure.
func (m *Manager) CABundle() []byte {
	s := m.state.Load()
	if s == nil {
		return nil
	}
	return bytes.Clone(s.bundle)
}

// Status reports what the last Ensure left.
func (m *Manager) Status() Status {
	s := m.state.Load()
	if s == nil {
		return Status{}
	}
	return Status{NotAfter: s.cert.Leaf.NotAfter, Injection: s.injection, WebhooksUpdated: s.updated}
}

// Run calls Ensure now and then every interval (DefaultInterval when not
// positive) until ctx ends. After a failure it retries sooner, from one
// second doubling up to interval, and logs each failure.
func (m *Manager) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	logger := klog.FromContext(ctx)
	newBackoff := func() wait.Backoff {
		return wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 64, Cap: interval}
	}
	backoff := newBackoff()
	for {
		delay := interval
		if err := m.Ensure(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			delay = backoff.Step()
			logger.Error(err, "Keeping the webhook certificate", "retryIn", delay)
		} else {
			backoff = newBackoff()
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
