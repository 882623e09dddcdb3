package app

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/muster-io/muster/api"
	podgrouperapp "github.com/muster-io/muster/cmd/muster-podgrouper/app"
	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/podgrouper"
)

// Native mode: the names the sandbox gives what the shipped manifests
// install (manifests/native).
const (
	// NativeWebhookConfiguration is the MutatingWebhookConfiguration of
	// the pod-grouper's webhook, whose caBundle the pod-grouper keeps.
	NativeWebhookConfiguration = "muster-podgrouper"
	// NativeSystemNamespace holds the webhook's certificate Secret.
	NativeSystemNamespace = "muster-system"
	// NativeWebhookName is the one webhook of the configuration.
	NativeWebhookName = "pods.native.muster.io"
)

// NativeWebhook is the webhook configuration of native mode pointed at a
// pod-grouper on this machine's loopback port: pod CREATE in namespaces
// labelled muster.io/native-gangs=enabled, failing closed. The caBundle is
// left to the pod-grouper, which injects its CA.
func NativeWebhook(port int) *admissionregistrationv1.MutatingWebhookConfiguration {
	url := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + podgrouper.WebhookPath
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: NativeWebhookConfiguration},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         NativeWebhookName,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				api.LabelNativeGangs: api.NativeGangsEnabled,
			}},
		}},
	}
}

// NativePodGrouper starts the pod-grouper in native mode with its webhook
// on the loopback port, its certificate self-managed (in
// NativeSystemNamespace, for 127.0.0.1), as the shipped native install
// runs it. tweak, when set, changes the options after that (the e2e tests
// give each test its own scheduler names, Secret and configuration). stop
// stops it (the webhook goes down with it); the control plane's Stop calls
// it too.
func NativePodGrouper(ctx context.Context, cp *localcluster.ControlPlane, port int, tweak func(*podgrouperapp.Options)) (stop func(), err error) {
	return startPodGrouper(ctx, cp, func(o *podgrouperapp.Options) {
		o.PodGroupAPI = podgrouperapp.PodGroupAPINative
		o.WebhookBindAddress = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		o.WebhookSecret = NativeSystemNamespace + "/muster-podgrouper-webhook-tls"
		o.WebhookConfiguration = NativeWebhookConfiguration
		o.WebhookDNSNames = []string{"127.0.0.1"}
		if tweak != nil {
			tweak(o)
		}
	})
}

// StartNative runs native mode on cp (started with NativePodGroups): the
// webhook configuration, the pod-grouper in native mode, and the default
// kube-scheduler, whose in-tree GangScheduling plugin places the gangs.
// It returns the webhook's port and the pod-grouper's stop.
func StartNative(ctx context.Context, cp *localcluster.ControlPlane) (port int, stopGrouper func(), err error) {
	if port, err = localcluster.FreePort(); err != nil {
		return 0, nil, err
	}
	if err := createNamespace(ctx, cp, NativeSystemNamespace); err != nil {
		return 0, nil, err
	}
	adm := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := adm.Create(ctx, NativeWebhook(port), metav1.CreateOptions{}); err != nil {
		return 0, nil, fmt.Errorf("webhook configuration %s: %w", NativeWebhookConfiguration, err)
	}
	cp.OnStop("native webhook configuration", func() {
		// Best effort: the control plane goes right after.
		if err := adm.Delete(context.WithoutCancel(ctx), NativeWebhookConfiguration, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			fmt.Fprintf(cp.LogOutput(), "deleting webhook configuration %s: %v\n", NativeWebhookConfiguration, err)
		}
	})
	if stopGrouper, err = NativePodGrouper(ctx, cp, port, nil); err != nil {
		return 0, nil, fmt.Errorf("pod-grouper: %w", err)
	}
	if _, err := localcluster.StartScheduler(ctx, cp, localcluster.SchedulerOptions{}); err != nil {
		return 0, nil, fmt.Errorf("%s: %w", localcluster.DefaultSchedulerName, err)
	}
	return port, stopGrouper, nil
}

// OptInNative labels namespace ns for native gangs, creating it if needed.
func OptInNative(ctx context.Context, cp *localcluster.ControlPlane, ns string) error {
	if err := createNamespace(ctx, cp, ns); err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, api.LabelNativeGangs, api.NativeGangsEnabled)
	_, err := cp.Client.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// nativeExample is the example as native mode runs it: on the default
// scheduler, whose GangScheduling plugin places native PodGroups.
func nativeExample(yaml []byte) []byte {
	return bytes.ReplaceAll(yaml, []byte("schedulerName: "+SchedulerName), []byte("schedulerName: "+corev1.DefaultSchedulerName))
}

// WaitNativeWebhook waits until the API server calls the pod-grouper's
// webhook for namespace ns (opted in) with the CA the pod-grouper
// injected: a dry-run pod create there succeeds.
func WaitNativeWebhook(ctx context.Context, cp *localcluster.ControlPlane, ns string, timeout time.Duration) error {
	return localcluster.WaitFor(ctx, timeout, "the webhook answers", func(ctx context.Context) (bool, string, error) {
		_, err := cp.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
}
