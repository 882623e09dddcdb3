package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/test/manifestrender"
)

// Native mode's install (docs/native-gangs.md; manifests/components/native
// and native-cert-manager, the chart's podGrouper values), on the RBAC
// control plane of install_test.go.

const (
	nativeComponent      = "components/native"
	certManagerComponent = "components/native-cert-manager"
	nativeWebhookConfig  = "muster-podgrouper"
	nativeWebhookName    = "pods.native.muster.io"
)

// certManagerCRDs stand in for cert-manager's (not a dependency of muster):
// the cert-manager variant's Issuer and Certificate need their kinds served
// to pass a dry run; their schemas are cert-manager's business.
func certManagerCRDs() []*apiextensionsv1.CustomResourceDefinition {
	return []*apiextensionsv1.CustomResourceDefinition{
		localcluster.PermissiveCRD("cert-manager.io", "v1", "Issuer", "issuers", apiextensionsv1.NamespaceScoped),
		localcluster.PermissiveCRD("cert-manager.io", "v1", "Certificate", "certificates", apiextensionsv1.NamespaceScoped),
	}
}

// kustomizeNative renders the kustomize base with component, the way a
// user's kustomization beside the checkout does.
func kustomizeNative(t *testing.T, component string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifestrender.KustomizeComponents(t.TempDir(), manifestsDir(), filepath.Join(manifestsDir(), component))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// installNativeManifestsApply: every object of both native Components and
// of the chart in native, auto and cert-manager mode passes server-side
// apply with dryRun=All.
func installNativeManifestsApply(t *testing.T, cp *localcluster.ControlPlane) {
	ctx := context.Background()
	for _, c := range []string{nativeComponent, certManagerComponent} {
		if err := apply(ctx, cp, kustomizeNative(t, c), true); err != nil {
			t.Errorf("kustomize with %s: %v", c, err)
		}
	}
	for _, pg := range []map[string]any{
		{"podGroupAPI": "native"},
		{"podGroupAPI": "auto"},
		{"podGroupAPI": "native", "webhook": map[string]any{"certManager": map[string]any{"enabled": true}}},
	} {
		hobjs, err := manifestrender.Helm(filepath.Join(manifestsDir(), "helm", "muster"), map[string]any{"podGrouper": pg})
		if err != nil {
			t.Fatal(err)
		}
		hobjs = append(hobjs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": manifestrender.Namespace}}})
		if err := apply(ctx, cp, hobjs, true); err != nil {
			t.Errorf("helm chart (podGrouper %v): %v", pg, err)
		}
	}
}

// installNative applies components/native for real over the installed
// base, then asks the authorizer what the pod-grouper may do now and checks
// that the webhook configuration, with no pod-grouper serving it, refuses
// pods in an opted-in namespace only.
func installNative(t *testing.T, cp *localcluster.ControlPlane) {
	ctx := context.Background()
	if err := apply(ctx, cp, kustomizeNative(t, nativeComponent), false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, nativeWebhookConfig, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	})
	t.Run("RBAC", func(t *testing.T) { installNativeRBAC(t, cp) })
	t.Run("FailsClosedInOptedInNamespacesOnly", func(t *testing.T) { installNativeFailClosed(t, cp) })
}

func installNativeRBAC(t *testing.T, cp *localcluster.ControlPlane) {
	type ra = authorizationv1.ResourceAttributes
	const sys = "muster-system"
	for _, tc := range []struct {
		user string
		attr ra
		want bool
	}{
		{podgrouperSA, ra{Verb: "create", Group: "scheduling.k8s.io", Resource: "podgroups", Namespace: "team-a"}, true},
		{podgrouperSA, ra{Verb: "delete", Group: "scheduling.k8s.io", Resource: "podgroups", Namespace: "team-a"}, true},
		{podgrouperSA, ra{Verb: "watch", Group: "scheduling.k8s.io", Resource: "workloads"}, true},
		{podgrouperSA, ra{Verb: "patch", Group: "scheduling.k8s.io", Resource: "workloads", Namespace: "team-a"}, true},
		{podgrouperSA, ra{Verb: "update", Group: "scheduling.k8s.io", Resource: "podgroups", Subresource: "status", Namespace: "team-a"}, false},
		{podgrouperSA, ra{Verb: "create", Resource: "secrets", Namespace: sys}, true},
		{podgrouperSA, ra{Verb: "get", Resource: "secrets", Namespace: sys, Name: "muster-podgrouper-webhook-tls"}, true},
		{podgrouperSA, ra{Verb: "update", Resource: "secrets", Namespace: sys, Name: "muster-podgrouper-webhook-tls"}, true},
		{podgrouperSA, ra{Verb: "delete", Resource: "secrets", Namespace: sys, Name: "muster-podgrouper-webhook-tls"}, true}, // recreated when its type is wrong (webhookcert)
		{podgrouperSA, ra{Verb: "get", Resource: "secrets", Namespace: sys, Name: "muster-podgrouper-token"}, false},
		{podgrouperSA, ra{Verb: "list", Resource: "secrets", Namespace: sys}, false},
		{podgrouperSA, ra{Verb: "create", Resource: "secrets", Namespace: "team-a"}, false},
		{podgrouperSA, ra{Verb: "patch", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations", Name: nativeWebhookConfig}, true},
		{podgrouperSA, ra{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations", Name: nativeWebhookConfig}, true},
		{podgrouperSA, ra{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations", Name: "jobset-mutating-webhook-configuration"}, false},
		{podgrouperSA, ra{Verb: "create", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}, false},
		{podgrouperSA, ra{Verb: "delete", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations", Name: nativeWebhookConfig}, false},
		{podgrouperSA, ra{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Name: nativeWebhookConfig}, false},
		// GangUnknown events on workloads: the base role's grant.
		{podgrouperSA, ra{Verb: "create", Resource: "events", Namespace: "team-a"}, true},
		// The scheduler gains nothing.
		{schedulerSA, ra{Verb: "create", Group: "scheduling.k8s.io", Resource: "podgroups", Namespace: "team-a"}, false},
		{schedulerSA, ra{Verb: "get", Resource: "secrets", Namespace: sys, Name: "muster-podgrouper-webhook-tls"}, false},
	} {
		a := tc.attr
		name := fmt.Sprintf("%s %s %s.%s/%s %s/%s", strings.TrimPrefix(tc.user, "system:serviceaccount:muster-system:"), a.Verb, a.Resource, a.Group, a.Subresource, a.Namespace, a.Name)
		if got := sar(t, cp, tc.user, a); got != tc.want {
			t.Errorf("%s: allowed=%v, want %v", name, got, tc.want)
		}
	}
}

// installNativeFailClosed: no pod-grouper runs, so the webhook cannot be
// reached and holds no CA. A pod create in an opted-in namespace must be
// refused (failurePolicy Fail: never created ungrouped); one in a namespace
// without the label, or in muster-system even labelled, must pass. The
// creates are dry runs (the webhook has no side effects, so it is called
// for them too).
func installNativeFailClosed(t *testing.T, cp *localcluster.ControlPlane) {
	ctx := context.Background()
	optIn := map[string]string{api.LabelNativeGangs: api.NativeGangsEnabled}
	newNS := func(prefix string, l map[string]string) string {
		ns, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{GenerateName: prefix, Labels: l}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ns.Name
	}
	optedIn, plain := newNS("native-on-", optIn), newNS("native-off-", nil)
	sys, err := cp.Client.CoreV1().Namespaces().Get(ctx, manifestrender.Namespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sys.Labels[api.LabelNativeGangs] = api.NativeGangsEnabled
	if _, err := cp.Client.CoreV1().Namespaces().Update(ctx, sys, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod := func(ns string) error {
		_, err := cp.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "member-"},
			Spec: corev1.PodSpec{
				// muster-system enforces Pod Security "restricted".
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/main", SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
			},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	// The apiserver loads webhook configurations through an informer: wait
	// until the new one answers, then check the namespaces it must spare.
	err = localcluster.WaitFor(ctx, localcluster.ShortTimeout, "pod create refused in an opted-in namespace", func(context.Context) (bool, string, error) {
		err := createPod(optedIn)
		if err == nil {
			return false, "pod create accepted", nil
		}
		if !strings.Contains(err.Error(), nativeWebhookName) {
			return false, "", fmt.Errorf("refused, but not by the webhook: %w", err)
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{plain, manifestrender.Namespace} {
		if err := createPod(ns); err != nil {
			t.Errorf("pod create in %s (not opted in, or muster's own) refused: %v", ns, err)
		}
	}
}
