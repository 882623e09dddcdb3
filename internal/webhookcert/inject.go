package webhookcert

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// Injection is what the last Ensure found in the MutatingWebhookConfiguration.
type Injection int

const (
	// InjectionNotConfigured: Config.WebhookConfiguration is empty (or
	// CertDir mode), nothing is injected.
	InjectionNotConfigured Injection = iota
	// InjectionMissing: the configuration does not exist (yet). The
	// installer creates it; the next Ensure injects the bundle.
	InjectionMissing
	// InjectionDone: every webhook of the configuration has the bundle.
	InjectionDone
	// InjectionFailed: reading or patching the configuration failed (Ensure
	// returned the error); the certificate the API server trusted so far is
	// still served while it is valid.
	InjectionFailed
)

func (i Injection) String() string {
	switch i {
	case InjectionNotConfigured:
		return "NotConfigured"
	case InjectionMissing:
		return "Missing"
	case InjectionDone:
		return "Done"
	case InjectionFailed:
		return "Failed"
	}
	return fmt.Sprintf("Injection(%d)", int(i))
}

// inject sets the caBundle of every webhook of the configuration to bundle
// where it differs. It returns how many webhooks it changed.
//
// A strategic merge patch keyed by webhook name touches only caBundle, so
// fields this client does not know (a newer API server's) survive, and the
// resourceVersion in it makes the patch fail with Conflict when the
// configuration changed after we read it (a webhook added, renamed or reset
// meanwhile); then it is read again.
func (m *Manager) inject(ctx context.Context, bundle []byte) (Injection, int, error) {
	if m.cfg.WebhookConfiguration == "" {
		return InjectionNotConfigured, 0, nil
	}
	logger := klog.FromContext(ctx)
	mwcs := m.client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	state, changed := InjectionDone, 0
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		state, changed = InjectionDone, 0
		mwc, err := mwcs.Get(ctx, m.cfg.WebhookConfiguration, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			state = InjectionMissing
			return nil
		}
		if err != nil {
			return err
		}
		type clientConfig struct {
			CABundle []byte `json:"caBundle"`
		}
		type webhook struct {
			Name         string       `json:"name"`
			ClientConfig clientConfig `json:"clientConfig"`
		}
		var stale []webhook
		for _, w := range mwc.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, bundle) {
				stale = append(stale, webhook{Name: w.Name, ClientConfig: clientConfig{CABundle: bundle}})
			}
		}
		if len(stale) == 0 {
			return nil
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": mwc.ResourceVersion},
			"webhooks": stale,
		})
		if err != nil {
			return err
		}
		if _, err := mwcs.Patch(ctx, mwc.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
		changed = len(stale)
		return nil
	})
	if err != nil {
		return state, 0, fmt.Errorf("injecting the CA bundle into MutatingWebhookConfiguration %s: %w", m.cfg.WebhookConfiguration, err)
	}
	if changed > 0 {
		logger.Info("Injected the CA bundle", "configuration", m.cfg.WebhookConfiguration, "webhooks", changed)
	}
	return state, changed, nil
}
