package webhookcert

import (
	"context"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
)

const (
	testNamespace = "muster-system"
	testSecret    = "webhook-tls"
	testMWC       = "muster-podgrouper"
	testDNS       = "muster-podgrouper-webhook.muster-system.svc"
)

// t0 is fixed: every date the tests check is relative to the fake clock.
var t0 = time.Date(2031, 3, 1, 12, 0, 0, 0, time.UTC)

// env is one fake cluster and clock shared by the Managers of a test (the
// replicas of the pod-grouper).
type env struct {
	t      *testing.T
	ctx    context.Context
	client *fake.Clientset
	clk    *testingclock.FakeClock
}

func newEnv(t *testing.T) *env {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	return &env{t: t, ctx: ctx, client: fake.NewClientset(), clk: testingclock.NewFakeClock(t0)}
}

func (e *env) config(mutate ...func(*Config)) Config {
	cfg := Config{
		SecretNamespace:      testNamespace,
		SecretName:           testSecret,
		WebhookConfiguration: testMWC,
		DNSNames:             []string{testDNS},
		Clock:                e.clk,
	}
	for _, f := range mutate {
		f(&cfg)
	}
	return cfg
}

func (e *env) manager(mutate ...func(*Config)) *Manager {
	e.t.Helper()
	m, err := New(e.client, e.config(mutate...))
	if err != nil {
		e.t.Fatalf("New: %v", err)
	}
	return m
}

// ensure runs Ensure on a new Manager, as another replica would.
func (e *env) ensure(mutate ...func(*Config)) *Manager {
	e.t.Helper()
	m := e.manager(mutate...)
	if err := m.Ensure(e.ctx); err != nil {
		e.t.Fatalf("Ensure: %v", err)
	}
	return m
}

// ensureCase runs the first Ensure of a new Manager configured by cfg (may
// be nil), with the actions recorded so far cleared, and checks its error:
// none when wantErr is empty, else one containing wantErr.
func (e *env) ensureCase(cfg func(*Config), wantErr string) *Manager {
	e.t.Helper()
	e.client.ClearActions()
	var mutate []func(*Config)
	if cfg != nil {
		mutate = append(mutate, cfg)
	}
	m := e.manager(mutate...)
	err := m.Ensure(e.ctx)
	switch {
	case wantErr == "" && err != nil:
		e.t.Fatalf("Ensure: %v", err)
	case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
		e.t.Fatalf("Ensure error %v, want one containing %q", err, wantErr)
	}
	return m
}

// secret returns the Secret as stored, nil when there is none.
func (e *env) secret() *corev1.Secret {
	e.t.Helper()
	list, err := e.client.CoreV1().Secrets(testNamespace).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatalf("listing Secrets: %v", err)
	}
	for i := range list.Items {
		if list.Items[i].Name == testSecret {
			return &list.Items[i]
		}
	}
	return nil
}

// store writes s into the fake's tracker, bypassing reactors and actions
// (so reactors may call it).
func (e *env) store(s *corev1.Secret) {
	e.t.Helper()
	gvr := corev1.SchemeGroupVersion.WithResource("secrets")
	tracker := e.client.Tracker()
	var err error
	if _, getErr := tracker.Get(gvr, s.Namespace, s.Name); apierrors.IsNotFound(getErr) {
		err = tracker.Create(gvr, s, s.Namespace)
	} else {
		err = tracker.Update(gvr, s, s.Namespace)
	}
	if err != nil {
		e.t.Errorf("storing Secret: %v", err)
	}
}

// writes counts the create, update, patch and delete calls on resource.
func (e *env) writes(resource string) map[string]int {
	n := map[string]int{}
	for _, a := range e.client.Actions() {
		if a.GetResource().Resource != resource {
			continue
		}
		switch a.GetVerb() {
		case "create", "update", "patch", "delete":
			n[a.GetVerb()]++
		}
	}
	return n
}

func (e *env) prependReactor(verb, resource string, f clienttesting.ReactionFunc) {
	e.client.PrependReactor(verb, resource, f)
}

// leafOf parses the serving certificate of a Secret.
func leafOf(t *testing.T, s *corev1.Secret) *x509.Certificate {
	t.Helper()
	certs, err := certutil.ParseCertsPEM(s.Data[KeyCert])
	if err != nil {
		t.Fatalf("Secret's %s: %v", KeyCert, err)
	}
	return certs[0]
}

// verifyServed checks that m serves the Secret's certificate and that a
// client trusting m's bundle accepts it for name at the fake clock's time.
func verifyServed(t *testing.T, m *Manager, s *corev1.Secret, name string, now time.Time) *x509.Certificate {
	t.Helper()
	got, err := m.GetCertificate(nil)
	if err != nil {
		t.Fatalf("GetCertificate: %v", err)
	}
	if want := leafOf(t, s); !got.Leaf.Equal(want) {
		t.Fatalf("served serial %x, the Secret holds %x", got.Leaf.SerialNumber, want.SerialNumber)
	}
	if err := verifyWith(m.CABundle(), got.Leaf, name, now); err != nil {
		t.Fatalf("served certificate not trusted through CABundle() for %q: %v", name, err)
	}
	return got.Leaf
}

func verifyWith(bundle []byte, leaf *x509.Certificate, name string, now time.Time) error {
	pool, err := certutil.NewPoolFromBytes(bundle)
	if err != nil {
		return err
	}
	_, err = leaf.Verify(x509.VerifyOptions{
		DNSName:     name,
		Roots:       pool,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err
}
