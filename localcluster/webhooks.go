package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
