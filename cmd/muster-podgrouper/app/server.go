package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/muster-io/muster/catalog"
	"github.com/muster-io/muster/definition"
	"github.com/muster-io/muster/internal/version"
	"github.com/muster-io/muster/podgrouper"
)

// NewCommand returns the muster-podgrouper command for use in-process: it
// validates every flag, the logging ones included, but leaves the process's
// logging (klog) as the caller set it up, so the logging flags do not take
// effect. The binary uses NewMainCommand.
func NewCommand() *cobra.Command { return newCommand(false) }

// NewMainCommand is the command of the muster-podgrouper binary: NewCommand
// that also applies the logging flags to the process (Options.ApplyLogging)
// before it runs.
func NewMainCommand() *cobra.Command { return newCommand(true) }

func newCommand(applyLogging bool) *cobra.Command {
	o := NewOptions()
	cmd := &cobra.Command{
		Use:   "muster-podgrouper",
		Short: "Put the pods of every defined workload into scheduler-plugins PodGroups",
		Long: `muster-podgrouper watches the pods of muster's scheduler, finds the workload each
belongs to through its owners and the workload definitions (the embedded catalog plus
cluster Karta objects), and writes one PodGroup per gang with the pods labelled for it.`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			if applyLogging {
				if err := o.ApplyLogging(); err != nil {
					return err
				}
			}
			return Run(cmd.Context(), o)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// Run runs the pod-grouper until ctx is done (or, with leader election,
// until the lease is lost: the process then exits so it restarts clean).
func Run(ctx context.Context, o *Options) error {
	if ctx == nil {
		ctx = context.Background()
	}
	logger := klog.FromContext(ctx)
	logger.Info("Starting muster-podgrouper", "version", version.Version)

	clients, err := newClients(o)
	if err != nil {
		return err
	}
	recorder, stopEvents := newRecorder(ctx, clients)
	defer stopEvents()
	native, err := resolveNative(ctx, o, clients)
	if err != nil {
		return err
	}
	ctrl, err := newController(ctx, o, clients, recorder, native)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srvErr := make(chan error, 2)
	// With the webhook on, every replica that has synced its caches
	// answers it, leader or not, and is ready; otherwise only the leader,
	// whose workers run, is.
	// --podgroup-api=auto serves the webhook even when it falls back: the
	// installed webhook configuration must find a server, which then
	// leaves every pod as it is.
	webhook := o.PodGroupAPI != PodGroupAPISchedulerPlugins && o.WebhookBindAddress != ""
	ready := ctrl.HasSynced
	if webhook {
		ready = ctrl.Started
	}
	srv, err := serve(ctx, o.BindAddress, o.Profiling, ready, srvErr)
	if err != nil {
		return err
	}
	defer func() { _ = srv.Close() }()
	if webhook {
		go func() {
			if err := ctrl.Start(ctx); err != nil {
				srvErr <- fmt.Errorf("starting the pod-grouper's caches: %w", err)
			}
		}()
		wsrv, err := serveWebhook(ctx, o, clients, ctrl, srvErr)
		if err != nil {
			return err
		}
		defer func() { _ = wsrv.Close() }()
	}

	run := func(ctx context.Context) {
		if err := ctrl.Run(ctx, o.Workers); err != nil {
			logger.Error(err, "Pod-grouper stopped")
		}
	}
	if !o.LeaderElection.LeaderElect {
		go func() { run(ctx); cancel() }()
		select {
		case <-ctx.Done():
			return nil
		case err := <-srvErr:
			return err
		}
	}
	return runLeaderElected(ctx, o, clients, recorder, run, srvErr)
}

// newClients builds the API clients from the kubeconfig and the client
// flags.
func newClients(o *Options) (podgrouper.Clients, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return podgrouper.Clients{}, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = "muster-podgrouper/" + version.Version
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	cfg.ContentType = o.KubeAPIContentType
	return podgrouper.NewClients(cfg)
}

// newRecorder records events through the API server (and logs them at
// V(3)); stop flushes and stops the recording.
func newRecorder(ctx context.Context, clients podgrouper.Clients) (recorder record.EventRecorder, stop func()) {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: clients.Kube.CoreV1().Events("")})
	return broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: podgrouper.FieldManager}), broadcaster.Shutdown
}

// newController builds the pod-grouper's controller on the embedded
// catalog and the cluster's Kartas.
func newController(ctx context.Context, o *Options, clients podgrouper.Clients, recorder record.EventRecorder, native bool) (*podgrouper.Controller, error) {
	reg, err := catalog.NewRegistry(definition.Options{})
	if err != nil {
		return nil, fmt.Errorf("embedded catalog: %w", err)
	}
	opts := podgrouper.Options{SchedulerNames: o.SchedulerNames, MaxOwnerDepth: o.MaxOwnerDepth}
	if native {
		opts.Native = true
		opts.NativeSchedulerNames = append([]string{}, o.NativeSchedulerNames...)
	}
	if o.ScheduleTimeoutSeconds > 0 {
		opts.ScheduleTimeoutSeconds = ptr.To(o.ScheduleTimeoutSeconds)
	}
	return podgrouper.NewController(ctx, clients, podgrouper.NewCheckedCatalogDefinitions(ctx, reg, clients), recorder, opts)
}

// runLeaderElected runs run while this process holds the lease, until ctx
// is done, the health server fails, or the lease is lost.
func runLeaderElected(ctx context.Context, o *Options, clients podgrouper.Clients, recorder record.EventRecorder, run func(context.Context), srvErr <-chan error) error {
	id, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("leader election identity: %w", err)
	}
	id += "_" + string(uuid.NewUUID())
	lock, err := resourcelock.New(o.LeaderElection.ResourceLock, o.LeaderElection.ResourceNamespace, o.LeaderElection.ResourceName,
		clients.Kube.CoreV1(), clients.Kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id, EventRecorder: recorder})
	if err != nil {
		return fmt.Errorf("leader election lock: %w", err)
	}
	lost := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.LeaderElection.LeaseDuration.Duration,
		RenewDeadline:   o.LeaderElection.RenewDeadline.Duration,
		RetryPeriod:     o.LeaderElection.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		Name:            o.LeaderElection.ResourceName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: run,
			OnStoppedLeading: func() { close(lost) },
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	go le.Run(ctx)
	select {
	case <-ctx.Done():
		// le.Run hands the lease back (ReleaseOnCancel) and then calls
		// OnStoppedLeading: wait for that, bounded, so that the standby
		// takes over at once rather than when the lease expires.
		select {
		case <-lost:
		case <-time.After(o.LeaderElection.RenewDeadline.Duration):
		}
		return nil
	case err := <-srvErr:
		return err
	case <-lost:
		if ctx.Err() != nil {
			return nil
		}
		// Informers and queues are not restartable; exit and let the
		// Deployment start a fresh process that competes again.
		return errors.New("leader election lost")
	}
}

// serve starts the endpoints of newMux on addr.
func serve(ctx context.Context, addr string, profiling bool, synced func() bool, errs chan<- error) (*http.Server, error) {
	mux := newMux(profiling, synced)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--bind-address %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("health server: %w", err)
		}
	}()
	return srv, nil
}

// newMux serves /healthz, /readyz and /metrics. readyz is OK once the
// controller's caches are synced and its workers run (only the leader is
// ready; a standby answers 503), or with the admission webhook on, once
// the caches are synced (every replica answers the webhook). With profiling, /debug/pprof/ serves the Go
// profiles too; it is off by default because the endpoint has no
// authentication.
func newMux(profiling bool, synced func() bool) *http.ServeMux {
	mux := http.NewServeMux()
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !synced() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.Handle("/metrics", legacyregistry.Handler())
	return mux
}
