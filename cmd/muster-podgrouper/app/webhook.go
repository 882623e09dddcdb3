package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/muster-io/muster/internal/webhookcert"
	"github.com/muster-io/muster/podgrouper"
)

// certRenewInterval is how often the self-managed certificate is checked
// (renewal, a caBundle someone reset).
const certRenewInterval = 10 * time.Minute

// resolveNative decides native mode from --podgroup-api: native needs the
// API served (an error says what to turn on), auto takes it when served.
func resolveNative(ctx context.Context, o *Options, clients podgrouper.Clients) (bool, error) {
	if o.PodGroupAPI == PodGroupAPISchedulerPlugins {
		return false, nil
	}
	served, err := podgrouper.ServesNative(ctx, clients.Kube.Discovery())
	logger := klog.FromContext(ctx)
	switch {
	case err != nil && o.PodGroupAPI == PodGroupAPIAuto:
		logger.Error(err, "Cannot tell whether the cluster serves native PodGroups; --podgroup-api=auto keeps scheduler-plugins PodGroups")
		return false, nil
	case err != nil:
		return false, fmt.Errorf("--podgroup-api=native: %w", err)
	case !served && o.PodGroupAPI == PodGroupAPINative:
		return false, fmt.Errorf("--podgroup-api=native: the cluster does not serve %s podgroups; turn on the GenericWorkload feature gate and --runtime-config=%s=true in kube-apiserver (and GenericWorkload in kube-scheduler and kube-controller-manager)",
			podgrouper.NativeGroupVersion, podgrouper.NativeGroupVersion)
	case !served:
		logger.Info("The cluster does not serve native PodGroups; --podgroup-api=auto keeps scheduler-plugins PodGroups", "groupVersion", podgrouper.NativeGroupVersion.String())
		return false, nil
	}
	logger.Info("Native mode: new gangs get native PodGroups", "groupVersion", podgrouper.NativeGroupVersion.String(), "nativeSchedulers", o.NativeSchedulerNames)
	return true, nil
}

// serveWebhook serves the admission webhook over TLS on
// --webhook-bind-address, with the self-managed certificate (kept current
// by a loop, the CA injected into --webhook-configuration) or the one in
// --webhook-cert-dir. It returns once the listener is open and a
// certificate is loaded, so the address is ready when it returns.
func serveWebhook(ctx context.Context, o *Options, clients podgrouper.Clients, ctrl *podgrouper.Controller, errs chan<- error) (*http.Server, error) {
	ns, name, _ := strings.Cut(o.WebhookSecret, "/")
	certs, err := webhookcert.New(clients.Kube, webhookcert.Config{
		SecretNamespace: ns, SecretName: name, WebhookConfiguration: o.WebhookConfiguration,
		DNSNames: o.WebhookDNSNames, CertDir: o.WebhookCertDir,
	})
	if err != nil {
		return nil, fmt.Errorf("webhook certificate: %w", err)
	}
	if err := certs.Ensure(ctx); err != nil {
		return nil, fmt.Errorf("webhook certificate: %w", err)
	}
	go certs.Run(ctx, certRenewInterval)

	ln, err := net.Listen("tcp", o.WebhookBindAddress)
	if err != nil {
		return nil, fmt.Errorf("--webhook-bind-address %s: %w", o.WebhookBindAddress, err)
	}
	mux := http.NewServeMux()
	mux.Handle(podgrouper.WebhookPath, ctrl.WebhookHandler())
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate},
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("webhook server: %w", err)
		}
	}()
	klog.FromContext(ctx).Info("Serving the admission webhook", "address", ln.Addr().String(), "path", podgrouper.WebhookPath, "certDir", o.WebhookCertDir)
	return srv, nil
}
