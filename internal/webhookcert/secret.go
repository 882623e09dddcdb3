package webhookcert

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// The Secret's keys and its ownership label.
const (
	KeyCert   = corev1.TLSCertKey       // tls.crt: the serving certificate
	KeyKey    = corev1.TLSPrivateKeyKey // tls.key: its key
	KeyCACert = "ca.crt"                // the CA bundle, current CA first
	// KeyCAKey holds the CA's key. It sits beside the serving key: whoever
	// can read one can read the other, and every replica must be able to
	// sign a renewal.
	KeyCAKey = "ca.key"

	// LabelManagedBy marks a Secret as the Manager's: only such a Secret is
	// ever rewritten or replaced.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "muster-podgrouper"
)

// maxAttempts bounds the re-reads after another replica won a race (create,
// update or delete); more than a few means something keeps rewriting the
// Secret, which a caller should see as an error.
const maxAttempts = 5

// ensureSecret returns the material of the Secret, creating or renewing it
// first when needed.
func (m *Manager) ensureSecret(ctx context.Context) (*material, error) {
	logger := klog.FromContext(ctx)
	for attempt := 1; ; attempt++ {
		mat, err := m.syncSecret(ctx)
		if err == nil {
			return mat, nil
		}
		raced := apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)
		if !raced || attempt >= maxAttempts || ctx.Err() != nil {
			return nil, err
		}
		logger.V(2).Info("Webhook certificate Secret changed meanwhile; reading it again", "secret", m.secretRef(), "attempt", attempt, "err", err)
	}
}

func (m *Manager) secretRef() klog.ObjectRef {
	return klog.KRef(m.cfg.SecretNamespace, m.cfg.SecretName)
}

// syncSecret is one read and at most one write of the Secret. An error
// wrapping Conflict, AlreadyExists or NotFound means another writer raced us
// and the caller reads again.
func (m *Manager) syncSecret(ctx context.Context) (*material, error) {
	secrets := m.client.CoreV1().Secrets(m.cfg.SecretNamespace)
	s, err := secrets.Get(ctx, m.cfg.SecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		mat, err := m.issueAll(nil)
		if err != nil {
			return nil, err
		}
		if _, err := secrets.Create(ctx, m.newSecret(mat), metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating Secret %s: %w", m.secretRef(), err)
		}
		klog.FromContext(ctx).Info("Created webhook certificate Secret", "secret", m.secretRef(), "notAfter", mat.cert.Leaf.NotAfter)
		return mat, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Secret %s: %w", m.secretRef(), err)
	}
	mat, ca, problems := m.inspect(s)
	if len(problems) == 0 {
		return mat, nil
	}
	if s.Labels[LabelManagedBy] != ManagedBy {
		return nil, fmt.Errorf("webhook certificate Secret %s is not managed by %s (no label %s=%s), so it is left alone, and it cannot be used: %s; delete it or fix it",
			m.secretRef(), ManagedBy, LabelManagedBy, ManagedBy, strings.Join(problems, "; "))
	}
	if ca == nil {
		mat, err = m.issueAll(previousOf(s))
	} else {
		mat, err = ca.issue(m.cfg.Clock.Now(), m.cfg.Validity, m.dns, m.ips)
	}
	if err != nil {
		return nil, err
	}
	if s.Type != corev1.SecretTypeTLS {
		if err := m.replaceSecret(ctx, s, mat, problems); err != nil {
			return nil, err
		}
		return mat, nil
	}
	s = s.DeepCopy()
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	mat.putInto(s.Data)
	if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("updating Secret %s: %w", m.secretRef(), err)
	}
	klog.FromContext(ctx).Info("Renewed webhook certificate", "secret", m.secretRef(), "why", problems, "notAfter", mat.cert.Leaf.NotAfter)
	return mat, nil
}

// replaceSecret deletes our Secret of the wrong type (the type is
// immutable) and creates it anew. The delete is conditional on the version
// we inspected, so a Secret rewritten meanwhile is never lost.
func (m *Manager) replaceSecret(ctx context.Context, old *corev1.Secret, mat *material, problems []string) error {
	secrets := m.client.CoreV1().Secrets(m.cfg.SecretNamespace)
	uid, rv := old.UID, old.ResourceVersion
	pre := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}
	if err := secrets.Delete(ctx, old.Name, pre); err != nil {
		return fmt.Errorf("deleting Secret %s of type %q to recreate it as %q: %w", m.secretRef(), old.Type, corev1.SecretTypeTLS, err)
	}
	if _, err := secrets.Create(ctx, m.newSecret(mat), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("recreating Secret %s: %w", m.secretRef(), err)
	}
	klog.FromContext(ctx).Info("Replaced webhook certificate Secret", "secret", m.secretRef(), "why", problems)
	return nil
}

// inspect parses s. With no problems it returns the material to serve.
// Otherwise it returns the problems and, when only the serving certificate
// is at fault, the CA to issue a new one with.
func (m *Manager) inspect(s *corev1.Secret) (*material, *authority, []string) {
	var problems []string
	if s.Type != corev1.SecretTypeTLS {
		problems = append(problems, fmt.Sprintf("its type is %q, want %q", s.Type, corev1.SecretTypeTLS))
	}
	now := m.cfg.Clock.Now()
	ca, err := parseAuthority(s.Data[KeyCACert], s.Data[KeyCAKey])
	if err != nil {
		return nil, nil, append(problems, err.Error())
	}
	if p := authorityProblem(ca.cert, now, m.cfg.RenewBefore); p != "" {
		return nil, nil, append(problems, p)
	}
	pair, err := parseServing(s.Data[KeyCert], s.Data[KeyKey])
	if err != nil {
		return nil, ca, append(problems, err.Error())
	}
	problems = append(problems, servingProblems(pair.Leaf, ca.cert, now, m.cfg.RenewBefore, m.dns, m.ips)...)
	if len(problems) > 0 {
		return nil, ca, problems
	}
	return &material{
		caBundle: s.Data[KeyCACert],
		caKey:    s.Data[KeyCAKey],
		certPEM:  s.Data[KeyCert],
		keyPEM:   s.Data[KeyKey],
		cert:     pair,
	}, ca, nil
}

// previousOf returns the CAs of s's bundle that may still have signed a
// serving certificate in use, to keep them trusted while a new CA takes
// over. Garbage yields none.
func previousOf(s *corev1.Secret) []*authority {
	ca, err := parseAuthority(s.Data[KeyCACert], s.Data[KeyCAKey])
	if err != nil {
		return nil
	}
	return []*authority{ca}
}

// issueAll makes a new CA, keeping the still valid CAs of previous in its
// bundle, and a serving certificate signed by it.
func (m *Manager) issueAll(previous []*authority) (*material, error) {
	now := m.cfg.Clock.Now()
	ca, err := newAuthority(now, m.cfg.CAValidity)
	if err != nil {
		return nil, err
	}
	for _, p := range previous {
		ca.previous = append(ca.previous, p.cert)
		ca.previous = append(ca.previous, p.previous...)
	}
	return ca.issue(now, m.cfg.Validity, m.dns, m.ips)
}

func (m *Manager) newSecret(mat *material) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: m.cfg.SecretNamespace,
			Name:      m.cfg.SecretName,
			Labels:    map[string]string{LabelManagedBy: ManagedBy},
		},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{},
	}
	mat.putInto(s.Data)
	return s
}

func (mat *material) putInto(data map[string][]byte) {
	data[KeyCert] = mat.certPEM
	data[KeyKey] = mat.keyPEM
	data[KeyCACert] = mat.caBundle
	data[KeyCAKey] = mat.caKey
}
