package webhookcert

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	certutil "k8s.io/client-go/util/cert"
)

var secretsGR = schema.GroupResource{Resource: "secrets"}

func garbageSecret(labelled bool, typ corev1.SecretType) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: testSecret},
		Type:       typ,
		Data: map[string][]byte{
			KeyCert: []byte("not a certificate"), KeyKey: []byte("junk"),
			KeyCACert: []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
			"other":   []byte("kept"),
		},
	}
	if labelled {
		s.Labels = map[string]string{LabelManagedBy: ManagedBy}
	}
	return s
}

// disown removes the managed-by label from the stored Secret, as if a user
// had made it.
func (e *env) disown() {
	s := e.secret().DeepCopy()
	delete(s.Labels, LabelManagedBy)
	e.store(s)
}

// secretCase is one start of Ensure on the Secret.
type secretCase struct {
	name string
	// seed prepares the cluster (and clock) before the Manager under
	// test, configured with cfg, runs Ensure.
	seed    func(e *env)
	cfg     func(*Config)
	wantErr string
	// wantWrites are the write calls on Secrets by the Manager under test.
	wantWrites map[string]int
	// check looks at the Secret before and after, and at the Manager.
	check func(t *testing.T, e *env, before, after *corev1.Secret, m *Manager)
}

const validity, renew = DefaultValidity, DefaultRenewBefore

// lifecycleCases: creating, reusing and renewing our own Secret.
var lifecycleCases = []secretCase{{
	name:       "created from nothing",
	wantWrites: map[string]int{"create": 1},
	check: func(t *testing.T, e *env, _, after *corev1.Secret, m *Manager) {
		if after.Type != corev1.SecretTypeTLS || after.Labels[LabelManagedBy] != ManagedBy {
			t.Errorf("type %q labels %v, want %q labelled %s=%s", after.Type, after.Labels, corev1.SecretTypeTLS, LabelManagedBy, ManagedBy)
		}
		leaf := leafOf(t, after)
		if !leaf.NotAfter.Equal(t0.Add(validity)) {
			t.Errorf("serving certificate ends %v, want %v", leaf.NotAfter, t0.Add(validity))
		}
		cas, err := certutil.ParseCertsPEM(after.Data[KeyCACert])
		if err != nil || len(cas) != 1 || !cas[0].IsCA || !cas[0].NotAfter.Equal(t0.Add(DefaultCAValidity)) {
			t.Errorf("ca.crt: %d certificates (err %v), want one CA ending %v", len(cas), err, t0.Add(DefaultCAValidity))
		}
		if len(after.Data[KeyCAKey]) == 0 {
			t.Errorf("no %s", KeyCAKey)
		}
	},
}, {
	name:       "an existing valid Secret is reused",
	seed:       func(e *env) { e.ensure(); e.clk.Step(validity - renew - time.Hour) },
	wantWrites: map[string]int{},
	check:      unchanged,
}, {
	name:       "renewed when it expires within RenewBefore",
	seed:       func(e *env) { e.ensure(); e.clk.Step(validity - renew) },
	wantWrites: map[string]int{"update": 1},
	check: func(t *testing.T, e *env, before, after *corev1.Secret, m *Manager) {
		leafOnlyRenewed(t, before, after)
		if got, want := leafOf(t, after).NotAfter, e.clk.Now().Add(validity); !got.Equal(want) {
			t.Errorf("renewed certificate ends %v, want %v", got, want)
		}
	},
}, {
	name:       "renewed when the names change, an IP becoming an IP SAN",
	seed:       func(e *env) { e.ensure() },
	cfg:        func(c *Config) { c.DNSNames = []string{"127.0.0.1", testDNS, "extra.example.com"} },
	wantWrites: map[string]int{"update": 1},
	check: func(t *testing.T, e *env, before, after *corev1.Secret, m *Manager) {
		leafOnlyRenewed(t, before, after)
		leaf := leafOf(t, after)
		if got := sortedNames(leaf.DNSNames, leaf.IPAddresses); strings.Join(got, ",") != "127.0.0.1,extra.example.com,"+testDNS {
			t.Errorf("SANs %v", got)
		}
		if len(leaf.IPAddresses) != 1 {
			t.Errorf("IP SANs %v, want 127.0.0.1 only", leaf.IPAddresses)
		}
	},
}, {
	name: "a CA near its end is replaced, the old one kept in the bundle",
	seed: func(e *env) {
		e.ensure(func(c *Config) { c.CAValidity = 100 * 24 * time.Hour })
		e.clk.Step(71 * 24 * time.Hour)
	},
	cfg:        func(c *Config) { c.CAValidity = 100 * 24 * time.Hour },
	wantWrites: map[string]int{"update": 1},
	check: func(t *testing.T, e *env, before, after *corev1.Secret, m *Manager) {
		cas, err := certutil.ParseCertsPEM(after.Data[KeyCACert])
		if err != nil || len(cas) != 2 {
			t.Fatalf("ca.crt: %d certificates (err %v), want new and old", len(cas), err)
		}
		old, _ := certutil.ParseCertsPEM(before.Data[KeyCACert])
		if cas[0].Equal(old[0]) || !cas[1].Equal(old[0]) {
			t.Errorf("bundle is not [new CA, old CA]")
		}
		if err := leafOf(t, after).CheckSignatureFrom(cas[0]); err != nil {
			t.Errorf("new serving certificate not signed by the new CA: %v", err)
		}
		if err := verifyWith(m.CABundle(), leafOf(t, before), testDNS, e.clk.Now()); err != nil {
			t.Errorf("the old serving certificate (other replicas) is no longer trusted: %v", err)
		}
	},
}}

// ownershipCases: garbage, foreign Secrets and races with other replicas.
var ownershipCases = []secretCase{{
	name:       "our Secret with garbage is rewritten, other keys kept",
	seed:       func(e *env) { e.store(garbageSecret(true, corev1.SecretTypeTLS)) },
	wantWrites: map[string]int{"update": 1},
	check: func(t *testing.T, e *env, _, after *corev1.Secret, m *Manager) {
		if string(after.Data["other"]) != "kept" {
			t.Errorf("key other: %q", after.Data["other"])
		}
	},
}, {
	name:       "our Secret of the wrong type is recreated",
	seed:       func(e *env) { e.store(garbageSecret(true, corev1.SecretTypeOpaque)) },
	wantWrites: map[string]int{"delete": 1, "create": 1},
	check: func(t *testing.T, e *env, _, after *corev1.Secret, m *Manager) {
		if after.Type != corev1.SecretTypeTLS {
			t.Errorf("type %q", after.Type)
		}
	},
}, {
	name:       "a foreign Secret with garbage is refused and left alone",
	seed:       func(e *env) { e.store(garbageSecret(false, corev1.SecretTypeTLS)) },
	wantErr:    "Secret muster-system/webhook-tls is not managed by muster-podgrouper (no label app.kubernetes.io/managed-by=muster-podgrouper), so it is left alone, and it cannot be used: ca.key is missing",
	wantWrites: map[string]int{},
	check:      unchanged,
}, {
	name:       "a foreign Secret for other names is refused and left alone",
	seed:       func(e *env) { e.ensure(); e.disown() },
	cfg:        func(c *Config) { c.DNSNames = []string{"other.example.com"} },
	wantErr:    "tls.crt is for [" + testDNS + "], want [other.example.com]",
	wantWrites: map[string]int{},
	check:      unchanged,
}, {
	name:       "a foreign Secret that expires soon is refused, not renewed",
	seed:       func(e *env) { e.ensure(); e.disown(); e.clk.Step(validity - renew) },
	wantErr:    "tls.crt expires at",
	wantWrites: map[string]int{},
	check:      unchanged,
}, {
	name:       "a fit foreign Secret is used as it is",
	seed:       func(e *env) { e.ensure(); e.disown() },
	wantWrites: map[string]int{},
	check:      unchanged,
}, {
	name: "a create race lost to another replica uses the winner's Secret",
	seed: func(e *env) {
		winner := winnerSecret(e, nil)
		e.prependReactor("create", "secrets", once(func() (runtime.Object, error) {
			e.store(winner)
			return nil, apierrors.NewAlreadyExists(secretsGR, testSecret)
		}))
	},
	wantWrites: map[string]int{"create": 1},
	check:      winnerServed,
}, {
	name: "an update conflict reads again and uses the other replica's renewal",
	seed: func(e *env) {
		e.ensure()
		e.clk.Step(validity - renew)
		winner := winnerSecret(e, e.secret())
		e.prependReactor("update", "secrets", once(func() (runtime.Object, error) {
			e.store(winner)
			return nil, apierrors.NewConflict(secretsGR, testSecret, errors.New("modified"))
		}))
	},
	wantWrites: map[string]int{"update": 1},
	check:      winnerServed,
}, {
	name: "endless conflicts end in an error",
	seed: func(e *env) {
		e.ensure()
		e.clk.Step(validity - renew)
		e.prependReactor("update", "secrets", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewConflict(secretsGR, testSecret, errors.New("modified"))
		})
	},
	wantErr:    "updating Secret muster-system/webhook-tls: Operation cannot be fulfilled",
	wantWrites: map[string]int{"update": maxAttempts},
	check:      unchanged,
}}

func TestEnsureSecret(t *testing.T) {
	for _, tc := range append(slices.Clone(lifecycleCases), ownershipCases...) {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.seed != nil {
				tc.seed(e)
			}
			before := e.secret()
			m := e.ensureCase(tc.cfg, tc.wantErr)
			if got := e.writes("secrets"); !equalCounts(got, tc.wantWrites) {
				t.Errorf("writes on Secrets %v, want %v", got, tc.wantWrites)
			}
			after := e.secret()
			if tc.wantErr == "" {
				verifyServed(t, m, after, testDNS, e.clk.Now())
			} else if _, err := m.GetCertificate(nil); err == nil {
				t.Errorf("GetCertificate serves a certificate after a failed first Ensure")
			}
			tc.check(t, e, before, after, m)
		})
	}
}

func unchanged(t *testing.T, _ *env, before, after *corev1.Secret, _ *Manager) {
	t.Helper()
	for k, v := range before.Data {
		if !bytes.Equal(after.Data[k], v) {
			t.Errorf("Secret key %s changed", k)
		}
	}
	if len(after.Data) != len(before.Data) {
		t.Errorf("Secret keys %d, were %d", len(after.Data), len(before.Data))
	}
}

func leafOnlyRenewed(t *testing.T, before, after *corev1.Secret) {
	t.Helper()
	if !bytes.Equal(before.Data[KeyCACert], after.Data[KeyCACert]) || !bytes.Equal(before.Data[KeyCAKey], after.Data[KeyCAKey]) {
		t.Errorf("the CA changed, only the serving certificate should have")
	}
	if bytes.Equal(before.Data[KeyCert], after.Data[KeyCert]) || bytes.Equal(before.Data[KeyKey], after.Data[KeyKey]) {
		t.Errorf("the serving certificate or key was not renewed")
	}
}

// winnerServed: the stored Secret is the other replica's (the Manager under
// test wrote nothing that stuck) and the Manager serves it.
func winnerServed(t *testing.T, e *env, _, after *corev1.Secret, m *Manager) {
	t.Helper()
	if after.Annotations["winner"] != "true" {
		t.Errorf("the stored Secret is not the other replica's")
	}
}

// winnerSecret is what another replica writes, starting from existing (nil:
// no Secret yet) on a cluster of its own.
func winnerSecret(e *env, existing *corev1.Secret) *corev1.Secret {
	e.t.Helper()
	other := &env{t: e.t, ctx: e.ctx, client: fake.NewClientset(), clk: e.clk}
	if existing != nil {
		other.store(existing.DeepCopy())
	}
	other.ensure()
	s := other.secret()
	s.Annotations = map[string]string{"winner": "true"}
	return s
}

// once makes a reactor that answers the first call with f and passes the
// rest on.
func once(f func() (runtime.Object, error)) clienttesting.ReactionFunc {
	done := false
	return func(clienttesting.Action) (bool, runtime.Object, error) {
		if done {
			return false, nil, nil
		}
		done = true
		obj, err := f()
		return true, obj, err
	}
}

func equalCounts(got, want map[string]int) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
