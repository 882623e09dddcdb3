package webhookcert

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

var mwcGR = schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}

// mwc is the installer's configuration: two webhooks with their own
// caBundle values (nil: none yet).
func mwc(bundles ...[]byte) *admissionregistrationv1.MutatingWebhookConfiguration {
	c := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: testMWC}}
	for i, b := range bundles {
		c.Webhooks = append(c.Webhooks, admissionregistrationv1.MutatingWebhook{
			Name: []string{"pods.muster.io", "pods-extra.muster.io"}[i],
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service:  &admissionregistrationv1.ServiceReference{Namespace: testNamespace, Name: "muster-podgrouper-webhook", Path: ptr.To("/mutate-v1-pod")},
				CABundle: b,
			},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			AdmissionReviewVersions: []string{"v1"},
		})
	}
	return c
}

func (e *env) getMWC() *admissionregistrationv1.MutatingWebhookConfiguration {
	e.t.Helper()
	c, err := e.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(e.ctx, testMWC, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("reading the MutatingWebhookConfiguration: %v", err)
	}
	return c
}

func (e *env) createMWC(c *admissionregistrationv1.MutatingWebhookConfiguration) {
	e.t.Helper()
	if _, err := e.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(e.ctx, c, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("creating the MutatingWebhookConfiguration: %v", err)
	}
}

func TestInject(t *testing.T) {
	cases := []struct {
		name string
		// seed runs before the Manager's first Ensure; bundle is the CA
		// bundle another replica already made (the Secret exists).
		seed          func(e *env, bundle []byte)
		cfg           func(*Config)
		wantErr       string
		wantInjection Injection
		wantUpdated   int
		wantPatches   int
	}{{
		name:          "both webhooks get the bundle, nothing else changes",
		seed:          func(e *env, _ []byte) { e.createMWC(mwc(nil, []byte("stale"))) },
		wantInjection: InjectionDone, wantUpdated: 2, wantPatches: 1,
	}, {
		name:          "a webhook already right is not counted",
		seed:          func(e *env, b []byte) { e.createMWC(mwc(b, nil)) },
		wantInjection: InjectionDone, wantUpdated: 1, wantPatches: 1,
	}, {
		name:          "nothing to do when every webhook is right",
		seed:          func(e *env, b []byte) { e.createMWC(mwc(b, b)) },
		wantInjection: InjectionDone, wantUpdated: 0, wantPatches: 0,
	}, {
		name:          "a missing configuration is a state, not an error",
		wantInjection: InjectionMissing,
	}, {
		name:          "no configuration named, none touched",
		cfg:           func(c *Config) { c.WebhookConfiguration = "" },
		wantInjection: InjectionNotConfigured,
	}, {
		name: "a patch conflict reads again and patches again",
		seed: func(e *env, _ []byte) {
			e.createMWC(mwc(nil, nil))
			e.prependReactor("patch", "mutatingwebhookconfigurations", once(func() (runtime.Object, error) {
				return nil, apierrors.NewConflict(mwcGR, testMWC, errors.New("modified"))
			}))
		},
		wantInjection: InjectionDone, wantUpdated: 2, wantPatches: 2,
	}, {
		name: "a refused read is an error naming the configuration",
		seed: func(e *env, _ []byte) {
			e.prependReactor("get", "mutatingwebhookconfigurations", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(mwcGR, testMWC, errors.New("RBAC"))
			})
		},
		wantErr:       "injecting the CA bundle into MutatingWebhookConfiguration " + testMWC,
		wantInjection: InjectionFailed,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			bundle := e.ensure(func(c *Config) { c.WebhookConfiguration = "" }).CABundle()
			if tc.seed != nil {
				tc.seed(e, bundle)
			}
			m := e.ensureCase(tc.cfg, tc.wantErr)
			st := m.Status()
			if st.Injection != tc.wantInjection || st.WebhooksUpdated != tc.wantUpdated {
				t.Errorf("status %v/%d updated, want %v/%d", st.Injection, st.WebhooksUpdated, tc.wantInjection, tc.wantUpdated)
			}
			if got := e.writes("mutatingwebhookconfigurations"); got["patch"] != tc.wantPatches || len(got) > 1 {
				t.Errorf("writes on the configuration %v, want %d patches", got, tc.wantPatches)
			}
			if !bytes.Equal(m.CABundle(), bundle) {
				t.Errorf("CABundle() is not the Secret's bundle")
			}
			if tc.wantInjection == InjectionDone {
				checkInjected(t, e, bundle)
			}
		})
	}
}

// checkInjected: every webhook has bundle and keeps its other settings.
func checkInjected(t *testing.T, e *env, bundle []byte) {
	t.Helper()
	c := e.getMWC()
	want := mwc(bundle, bundle)
	if len(c.Webhooks) != len(want.Webhooks) {
		t.Fatalf("%d webhooks, want %d", len(c.Webhooks), len(want.Webhooks))
	}
	for i, w := range c.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, bundle) {
			t.Errorf("webhook %s: caBundle is not the CA bundle", w.Name)
		} else if !apiequality.Semantic.DeepEqual(w, want.Webhooks[i]) {
			t.Errorf("webhook %s changed beyond its caBundle: %s", w.Name, cmp.Diff(want.Webhooks[i], w))
		}
	}
}

// A configuration that appears later, and a caBundle someone resets, get
// the bundle from Run, which repeats Ensure.
func TestRunInjectsLaterAndAfterReset(t *testing.T) {
	e := newEnv(t)
	m := e.manager()
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx, 10*time.Millisecond) }()
	defer func() { cancel(); <-done }()

	waitFor(t, "the missing configuration reported", func() bool { return m.Status().Injection == InjectionMissing })
	e.createMWC(mwc(nil, nil))
	waitFor(t, "the bundle injected into the new configuration", func() bool {
		c := e.getMWC()
		return bytes.Equal(c.Webhooks[0].ClientConfig.CABundle, m.CABundle()) && bytes.Equal(c.Webhooks[1].ClientConfig.CABundle, m.CABundle())
	})

	c := e.getMWC()
	c.Webhooks[1].ClientConfig.CABundle = nil
	if _, err := e.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(e.ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("resetting caBundle: %v", err)
	}
	waitFor(t, "the reset caBundle restored", func() bool {
		return bytes.Equal(e.getMWC().Webhooks[1].ClientConfig.CABundle, m.CABundle())
	})
}

// A failed injection keeps serving the certificate the API server trusted
// until it succeeds.
func TestFailedInjectionKeepsTheTrustedCertificate(t *testing.T) {
	e := newEnv(t)
	e.createMWC(mwc(nil, nil))
	m := e.ensure()
	old := verifyServed(t, m, e.secret(), testDNS, e.clk.Now())

	e.clk.Step(DefaultValidity - DefaultRenewBefore)
	failing := true
	e.prependReactor("get", "mutatingwebhookconfigurations", func(clienttesting.Action) (bool, runtime.Object, error) {
		if failing {
			return true, nil, apierrors.NewServiceUnavailable("etcd down")
		}
		return false, nil, nil
	})
	if err := m.Ensure(e.ctx); err == nil || !strings.Contains(err.Error(), "etcd down") {
		t.Fatalf("Ensure error %v, want the failed read", err)
	}
	if got, _ := m.GetCertificate(nil); !got.Leaf.Equal(old) {
		t.Errorf("a new certificate is served before the injection succeeded")
	}
	if leafOf(t, e.secret()).Equal(old) {
		t.Fatalf("the Secret was not renewed")
	}
	failing = false
	if err := m.Ensure(e.ctx); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if renewed := verifyServed(t, m, e.secret(), testDNS, e.clk.Now()); renewed.Equal(old) {
		t.Errorf("the renewed certificate is not served")
	}
}

// waitFor polls cond for up to 30 seconds (a generous bound, not a timing
// assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
