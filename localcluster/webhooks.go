package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/cert"
	"sigs.k8s.io/yaml"
)

// registerWebhooks creates the operator's webhook configurations from its
// kubebuilder manifest, pointed at url https://127.0.0.1:port<path> instead
// of a Service, named <operator>-<name>, with pod webhooks limited to pods
// carrying podLabel.
func registerWebhooks(ctx context.Context, cp *ControlPlane, op, manifest string, port int, caBundle []byte, podLabel string) ([]string, error) {
	data, err := os.ReadFile(manifest)
	if err != nil {
		return nil, err
	}
	docs, err := SplitYAML(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", manifest, err)
	}
	clientConfig := func(cc admissionv1.WebhookClientConfig) (admissionv1.WebhookClientConfig, error) {
		if cc.Service == nil || cc.Service.Path == nil {
			return cc, errors.New("webhook without service path")
		}
		u := fmt.Sprintf("https://127.0.0.1:%d%s", port, *cc.Service.Path)
		return admissionv1.WebhookClientConfig{URL: &u, CABundle: caBundle}, nil
	}
	podSelector := func(rules []admissionv1.RuleWithOperations) *metav1.LabelSelector {
		for _, r := range rules {
			for _, res := range r.Resources {
				if res == "pods" {
					return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: podLabel, Operator: metav1.LabelSelectorOpExists}}}
				}
			}
		}
		return nil
	}
	// toLoopback points one webhook at the operator's loopback URL and
	// narrows pod webhooks to its pods.
	toLoopback := func(w webhookFields) error {
		var err error
		if *w.clientConfig, err = clientConfig(*w.clientConfig); err != nil {
			return err
		}
		if s := podSelector(w.rules); s != nil {
			*w.objectSelector = s
		}
		return nil
	}
	adm := cp.Client.AdmissionregistrationV1()
	var names []string
	for i, doc := range docs {
		var meta metav1.TypeMeta
		if err := json.Unmarshal(doc, &meta); err != nil {
			return names, fmt.Errorf("%s document %d: %w", manifest, i+1, err)
		}
		var name string
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			name, err = createWebhookConfiguration(ctx, cp, op, doc, toLoopback, adm.MutatingWebhookConfigurations().Create,
				func(wc *admissionv1.MutatingWebhookConfiguration) []admissionv1.MutatingWebhook { return wc.Webhooks },
				func(w *admissionv1.MutatingWebhook) webhookFields {
					return webhookFields{&w.ClientConfig, &w.ObjectSelector, w.Rules}
				})
		case "ValidatingWebhookConfiguration":
			name, err = createWebhookConfiguration(ctx, cp, op, doc, toLoopback, adm.ValidatingWebhookConfigurations().Create,
				func(wc *admissionv1.ValidatingWebhookConfiguration) []admissionv1.ValidatingWebhook {
					return wc.Webhooks
				},
				func(w *admissionv1.ValidatingWebhook) webhookFields {
					return webhookFields{&w.ClientConfig, &w.ObjectSelector, w.Rules}
				})
		default:
			return names, fmt.Errorf("%s document %d: unexpected kind %q", manifest, i+1, meta.Kind)
		}
		if err != nil {
			return names, fmt.Errorf("%s document %d: %w", manifest, i+1, err)
		}
		names = append(names, name)
	}
	return names, nil
}

// webhookFields are the fields of one mutating or validating webhook that
// registerWebhooks rewrites: the two types share them but no Go type.
type webhookFields struct {
	clientConfig   *admissionv1.WebhookClientConfig
	objectSelector **metav1.LabelSelector
	rules          []admissionv1.RuleWithOperations
}

// createWebhookConfiguration decodes one mutating or validating webhook
// configuration (C) from doc, prefixes its name with the operator's, passes
// each of its webhooks (W) through rewrite, and creates it in place of any
// left by an earlier run. It returns the name created.
func createWebhookConfiguration[C any, PC interface {
	*C
	metav1.Object
}, W any](
	ctx context.Context, cp *ControlPlane, op string, doc []byte,
	rewrite func(webhookFields) error,
	create func(context.Context, PC, metav1.CreateOptions) (PC, error),
	webhooks func(PC) []W, fields func(*W) webhookFields,
) (string, error) {
	wc := PC(new(C))
	if err := yaml.Unmarshal(doc, wc); err != nil {
		return "", err
	}
	wc.SetName(op + "-" + wc.GetName())
	hooks := webhooks(wc)
	for j := range hooks {
		if err := rewrite(fields(&hooks[j])); err != nil {
			return "", err
		}
	}
	deleteWebhookConfiguration(cp, wc.GetName())
	if _, err := create(ctx, wc, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	return wc.GetName(), nil
}

// deleteWebhookConfiguration deletes a mutating or validating webhook
// configuration of that name, if any.
func deleteWebhookConfiguration(cp *ControlPlane, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := cp.Client.AdmissionregistrationV1()
	if err := adm.MutatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		fmt.Fprintf(cp.LogOutput(), "delete mutating webhook configuration %s: %v\n", name, err)
	}
	if err := adm.ValidatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		fmt.Fprintf(cp.LogOutput(), "delete validating webhook configuration %s: %v\n", name, err)
	}
}

// LocalMutatingWebhook describes a mutating admission webhook served by a
// process on this machine (a test's own server, or a binary under test), for
// ApplyMutatingWebhook. The apiserver calls it by URL: no Service, no
// egress selector (the harness configures none, so the apiserver dials the
// loopback address directly; proxy variables never apply to loopback).
type LocalMutatingWebhook struct {
	// Name names the MutatingWebhookConfiguration and its one webhook. The
	// apiserver wants webhook names of at least three dot-separated parts,
	// for example "pods.webhook.example.com".
	Name string
	// URL is where the webhook is served: https on a loopback address
	// (127.0.0.1, [::1] or localhost), with its path, for example
	// https://127.0.0.1:8443/mutate-pods.
	URL string
	// CABundle is the PEM certificate chain that verifies the server's
	// certificate (LoopbackServingCert returns one).
	CABundle []byte
	// Rules default to CREATE of core/v1 pods.
	Rules []admissionv1.RuleWithOperations
	// NamespaceSelector and ObjectSelector limit the requests sent; nil
	// means all. Scope a Fail webhook with them: every matching request
	// fails while the server is down.
	NamespaceSelector *metav1.LabelSelector
	ObjectSelector    *metav1.LabelSelector
	// FailurePolicy defaults to Fail: a request the webhook cannot answer
	// is refused.
	FailurePolicy admissionv1.FailurePolicyType
	// TimeoutSeconds defaults to 10.
	TimeoutSeconds int32
}

// configuration builds the MutatingWebhookConfiguration for w, or says
// which field is wrong.
func (w LocalMutatingWebhook) configuration() (*admissionv1.MutatingWebhookConfiguration, error) {
	if w.Name == "" {
		return nil, errors.New("local mutating webhook: Name is required")
	}
	u, err := url.Parse(w.URL)
	if err != nil {
		return nil, fmt.Errorf("local mutating webhook %s: URL %q: %w", w.Name, w.URL, err)
	}
	if u.Scheme != "https" || !isLoopbackHost(u.Hostname()) || u.Port() == "" {
		return nil, fmt.Errorf("local mutating webhook %s: URL %q: want https://<loopback address>:<port>/<path>", w.Name, w.URL)
	}
	if len(w.CABundle) == 0 {
		return nil, fmt.Errorf("local mutating webhook %s: CABundle is required (the apiserver verifies the server)", w.Name)
	}
	rules := w.Rules
	if len(rules) == 0 {
		rules = []admissionv1.RuleWithOperations{{
			Operations: []admissionv1.OperationType{admissionv1.Create},
			Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
		}}
	}
	policy := w.FailurePolicy
	if policy == "" {
		policy = admissionv1.Fail
	}
	timeout := w.TimeoutSeconds
	if timeout == 0 {
		timeout = 10
	}
	// No side effects: dry-run requests are sent to it too, so a dry-run
	// create shows what the webhook would do.
	sideEffects := admissionv1.SideEffectClassNone
	return &admissionv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name},
		Webhooks: []admissionv1.MutatingWebhook{{
			Name:                    w.Name,
			ClientConfig:            admissionv1.WebhookClientConfig{URL: &w.URL, CABundle: w.CABundle},
			Rules:                   rules,
			NamespaceSelector:       w.NamespaceSelector,
			ObjectSelector:          w.ObjectSelector,
			FailurePolicy:           &policy,
			SideEffects:             &sideEffects,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}, nil
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// ApplyMutatingWebhook registers w, in place of any configuration of that
// name left by an earlier run. The apiserver picks it up through its own
// informer, a moment after this returns: a caller that must not miss the
// first request waits until the webhook is seen to act (for example on a
// dry-run create). remove deletes the configuration; Stop of the control
// plane calls it too, since a Fail webhook whose server is gone makes every
// matching request fail. Remove it before stopping its server.
func (cp *ControlPlane) ApplyMutatingWebhook(ctx context.Context, w LocalMutatingWebhook) (remove func(), err error) {
	if err := cp.live(); err != nil {
		return nil, err
	}
	wc, err := w.configuration()
	if err != nil {
		return nil, err
	}
	deleteWebhookConfiguration(cp, wc.Name)
	if _, err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, wc, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("local mutating webhook %s: %w", w.Name, err)
	}
	remove = sync.OnceFunc(func() { deleteWebhookConfiguration(cp, wc.Name) })
	cp.OnStop("webhook "+wc.Name, remove)
	return remove, nil
}

// LoopbackServingCert returns a self-signed serving certificate and its key
// (PEM) for 127.0.0.1, [::1] and localhost. The certificate is its own CA:
// pass certPEM as a webhook's CABundle.
func LoopbackServingCert() (certPEM, keyPEM []byte, err error) {
	certPEM, keyPEM, err = cert.GenerateSelfSignedCertKey("127.0.0.1",
		[]net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}, []string{"localhost"})
	if err != nil {
		return nil, nil, fmt.Errorf("loopback serving certificate: %w", err)
	}
	return certPEM, keyPEM, nil
}
