package localcluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLocalMutatingWebhookConfiguration(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\n")
	valid := LocalMutatingWebhook{Name: "pods.webhook.example.com", URL: "https://127.0.0.1:8443/mutate", CABundle: ca}
	tests := []struct {
		name    string
		edit    func(*LocalMutatingWebhook)
		wantErr string // "" means valid
	}{
		{name: "valid", edit: func(*LocalMutatingWebhook) {}},
		{name: "IPv6 loopback", edit: func(w *LocalMutatingWebhook) { w.URL = "https://[::1]:8443/mutate" }},
		{name: "localhost", edit: func(w *LocalMutatingWebhook) { w.URL = "https://localhost:8443/mutate" }},
		{name: "no name", edit: func(w *LocalMutatingWebhook) { w.Name = "" }, wantErr: "Name is required"},
		{name: "http", edit: func(w *LocalMutatingWebhook) { w.URL = "http://127.0.0.1:8443/mutate" }, wantErr: "want https://<loopback address>"},
		{name: "not loopback", edit: func(w *LocalMutatingWebhook) { w.URL = "https://10.0.0.1:8443/mutate" }, wantErr: "want https://<loopback address>"},
		{name: "no port", edit: func(w *LocalMutatingWebhook) { w.URL = "https://127.0.0.1/mutate" }, wantErr: "want https://<loopback address>"},
		{name: "no CA", edit: func(w *LocalMutatingWebhook) { w.CABundle = nil }, wantErr: "CABundle is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := valid
			tt.edit(&w)
			wc, err := w.configuration()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			h := wc.Webhooks[0]
			if *h.FailurePolicy != admissionregv1.Fail || *h.SideEffects != admissionregv1.SideEffectClassNone ||
				*h.ClientConfig.URL != w.URL || len(h.Rules) != 1 || h.Rules[0].Resources[0] != "pods" {
				t.Errorf("webhook = %+v, want Fail, no side effects, the URL and the default pod rule", h)
			}
		})
	}
}

// podLabeller is a mutating webhook that adds the label seen=yes to every
// pod it admits and records the namespaces it was asked about.
type podLabeller struct {
	mu         sync.Mutex
	namespaces map[string]int
}

func (l *podLabeller) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "bad admission review", http.StatusBadRequest)
		return
	}
	l.mu.Lock()
	l.namespaces[review.Request.Namespace]++
	l.mu.Unlock()
	patch := `[{"op":"add","path":"/metadata/labels/seen","value":"yes"}]`
	pt := admissionv1.PatchTypeJSONPatch
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true, Patch: []byte(patch), PatchType: &pt}
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

func (l *podLabeller) calls(ns string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.namespaces[ns]
}

// The apiserver calls a webhook served on loopback by URL with the caBundle:
// pods of selected namespaces are mutated, others never reach it; with its
// server down, Fail refuses the selected namespaces' pods; removed, pods are
// admitted again unmutated.
func TestApplyMutatingWebhookCallsLoopbackServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane; not in -short")
	}
	cp, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	ctx := t.Context()

	certPEM, keyPEM, err := LoopbackServingCert()
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	labeller := &podLabeller{namespaces: map[string]int{}}
	srv := httptest.NewUnstartedServer(labeller)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	on, off := newLabelledNamespace(t, cp, "webhook-on-", "on"), newLabelledNamespace(t, cp, "webhook-off-", "off")
	remove, err := cp.ApplyMutatingWebhook(ctx, LocalMutatingWebhook{
		Name:              "label-pods.webhook.localcluster.test",
		URL:               srv.URL + "/mutate",
		CABundle:          certPEM,
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"webhook-test": "on"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The apiserver learns of the configuration through its informer.
	waitDryRunSeen(t, cp, on, "yes")

	if p, err := createPod(ctx, cp, on, "mutated", false); err != nil || p.Labels["seen"] != "yes" {
		t.Fatalf("pod in the selected namespace: err %v, labels %v; want seen=yes", err, labelList(p))
	}
	if p, err := createPod(ctx, cp, off, "untouched", false); err != nil || p.Labels["seen"] != "" {
		t.Fatalf("pod in another namespace: err %v, labels %v; want no seen label", err, labelList(p))
	}
	if n := labeller.calls(off); n != 0 {
		t.Errorf("the webhook was called %d times for namespace %s, which the selector leaves out", n, off)
	}

	srv.Close()
	if _, err := createPod(ctx, cp, on, "refused", false); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Errorf("pod create with the webhook down: err %v, want failed calling webhook", err)
	}
	if _, err := createPod(ctx, cp, off, "still-admitted", false); err != nil {
		t.Errorf("pod create in an unselected namespace with the webhook down: %v", err)
	}

	remove()
	waitDryRunSeen(t, cp, on, "")
}

// waitDryRunSeen waits until a dry-run pod create in ns is admitted with the
// label seen=want ("": without it), retrying refusals.
func waitDryRunSeen(t *testing.T, cp *ControlPlane, ns, want string) {
	t.Helper()
	desc := fmt.Sprintf("a dry-run pod in %s admitted with seen=%q", ns, want)
	err := WaitFor(t.Context(), ShortTimeout, desc, func(ctx context.Context) (bool, string, error) {
		p, err := createPod(ctx, cp, ns, "probe", true)
		if err != nil {
			return false, err.Error(), nil
		}
		return p.Labels["seen"] == want, "labels " + strings.Join(labelList(p), ","), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func newLabelledNamespace(t *testing.T, cp *ControlPlane, prefix, value string) string {
	t.Helper()
	ns, err := cp.Client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix, Labels: map[string]string{"webhook-test": value}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// createPod creates a labelled pod in ns, for real or as a dry run.
func createPod(ctx context.Context, cp *ControlPlane, ns, name string, dryRun bool) (*corev1.Pod, error) {
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return cp.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "webhook-test"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}},
	}, opts)
}

func labelList(p *corev1.Pod) []string {
	if p == nil {
		return nil
	}
	var out []string
	for k, v := range p.Labels {
		out = append(out, k+"="+v)
	}
	return out
}
