// Package app is the muster-podgrouper command: flags, leader election,
// health, readiness and metrics endpoints around podgrouper.Controller.
package app

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/component-base/config/options"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"

	// Registers the JSON log format (--logging-format=json, zap).
	_ "k8s.io/component-base/logs/json/register"
	// The workqueue metrics (depth, adds, latency, retries) of the
	// pod-grouper's queues, as kube-controller-manager serves them.
	_ "k8s.io/component-base/metrics/prometheus/workqueue"
	// client-go's request metrics (rest_client_request_duration_seconds by
	// verb, rate-limiter wait, retries): whether a slow pod-grouper waits on
	// the API server.
	_ "k8s.io/component-base/metrics/prometheus/restclient"

	"github.com/muster-io/muster/podgrouper"
)

// Options are the command's flags.
type Options struct {
	Kubeconfig             string
	SchedulerNames         []string
	ScheduleTimeoutSeconds int32
	Workers                int
	MaxOwnerDepth          int
	BindAddress            string
	Profiling              bool
	KubeAPIQPS             float32
	KubeAPIBurst           int
	KubeAPIContentType     string
	LeaderElection         componentbaseconfig.LeaderElectionConfiguration
	Logs                   *logsapi.LoggingConfiguration
	FeatureGate            featuregate.MutableFeatureGate

	// Native mode (docs/native-gangs.md).
	PodGroupAPI          string
	NativeSchedulerNames []string
	WebhookBindAddress   string
	WebhookCertDir       string
	WebhookSecret        string
	WebhookConfiguration string
	WebhookDNSNames      []string
}

// Values of --podgroup-api.
const (
	PodGroupAPISchedulerPlugins = "scheduler-plugins"
	PodGroupAPINative           = "native"
	PodGroupAPIAuto             = "auto"
)

const (
	contentTypeProtobuf = "application/vnd.kubernetes.protobuf"
	contentTypeJSON     = "application/json"
)

// NewOptions returns the defaults.
func NewOptions() *Options {
	fg := featuregate.NewFeatureGate()
	if err := logsapi.AddFeatureGates(fg); err != nil {
		panic(err) // programmer error: the gates are registered once here
	}
	return &Options{
		SchedulerNames: []string{podgrouper.DefaultSchedulerName},
		Workers:        4,
		MaxOwnerDepth:  podgrouper.DefaultMaxOwnerDepth,
		BindAddress:    ":10261",
		// client-go's default (5 QPS) would cap the pod-grouper at a few
		// pods per second: each pod costs a patch, a gang one write more.
		KubeAPIQPS:   200,
		KubeAPIBurst: 400,
		// Protobuf costs the API server less than JSON for pods (the
		// pod-grouper's patches and watch); custom resources always
		// speak JSON (podgrouper.NewClients).
		KubeAPIContentType: contentTypeProtobuf,
		LeaderElection: componentbaseconfig.LeaderElectionConfiguration{
			LeaderElect:       true,
			LeaseDuration:     metav1.Duration{Duration: 15 * time.Second},
			RenewDeadline:     metav1.Duration{Duration: 10 * time.Second},
			RetryPeriod:       metav1.Duration{Duration: 2 * time.Second},
			ResourceLock:      "leases",
			ResourceName:      "muster-podgrouper",
			ResourceNamespace: "kube-system",
		},
		Logs:        logsapi.NewLoggingConfiguration(),
		FeatureGate: fg,

		PodGroupAPI:          PodGroupAPISchedulerPlugins,
		NativeSchedulerNames: []string{podgrouper.DefaultNativeSchedulerName},
		WebhookBindAddress:   ":9443",
		WebhookSecret:        "muster-system/muster-podgrouper-webhook-tls",
		WebhookConfiguration: "muster-podgrouper",
		WebhookDNSNames:      []string{"muster-podgrouper-webhook.muster-system.svc"},
	}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig; in-cluster configuration when empty.")
	fs.StringSliceVar(&o.SchedulerNames, "scheduler-name", o.SchedulerNames, "Scheduler whose pods are grouped; repeat or comma-separate for several.")
	fs.Int32Var(&o.ScheduleTimeoutSeconds, "schedule-timeout-seconds", o.ScheduleTimeoutSeconds, "scheduleTimeoutSeconds written into every PodGroup; 0 leaves it unset.")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Pods reconciled in parallel.")
	fs.IntVar(&o.MaxOwnerDepth, "max-owner-depth", o.MaxOwnerDepth, "Owner references followed from a pod at most.")
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "Address of the /healthz, /readyz and /metrics endpoints.")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "Serve Go profiles at /debug/pprof/ on --bind-address (no authentication: keep the address private).")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Queries per second to the API server.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst of queries to the API server.")
	fs.StringVar(&o.KubeAPIContentType, "kube-api-content-type", o.KubeAPIContentType, "Content type of requests for built-in resources: "+contentTypeProtobuf+" or "+contentTypeJSON+". Custom resources always use JSON.")
	fs.StringVar(&o.PodGroupAPI, "podgroup-api", o.PodGroupAPI, "Which PodGroups new gangs get: "+PodGroupAPISchedulerPlugins+" (scheduler-plugins v1alpha1, for muster-scheduler), "+
		PodGroupAPINative+" (Kubernetes' own scheduling.k8s.io/v1beta1, placed by the default kube-scheduler; the cluster must serve it), or "+
		PodGroupAPIAuto+" (native when the cluster serves it). Gangs that already run keep theirs.")
	fs.StringSliceVar(&o.NativeSchedulerNames, "native-scheduler-name", o.NativeSchedulerNames, "In native mode, schedulers besides --scheduler-name whose pods join native PodGroups; repeat or comma-separate; empty: none.")
	fs.StringVar(&o.WebhookBindAddress, "webhook-bind-address", o.WebhookBindAddress, "In native mode, the HTTPS address of the admission webhook ("+podgrouper.WebhookPath+") that joins pods to their PodGroup at create; empty turns it off.")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", o.WebhookCertDir, "A directory with tls.crt and tls.key for the webhook (cert-manager); empty: the pod-grouper makes and renews its own, in --webhook-secret.")
	fs.StringVar(&o.WebhookSecret, "webhook-secret", o.WebhookSecret, "NAMESPACE/NAME of the Secret holding the self-managed webhook CA and certificate, shared by every replica.")
	fs.StringVar(&o.WebhookConfiguration, "webhook-configuration", o.WebhookConfiguration, "The MutatingWebhookConfiguration whose caBundle the pod-grouper keeps current (self-managed certificates only).")
	fs.StringSliceVar(&o.WebhookDNSNames, "webhook-dns-name", o.WebhookDNSNames, "Names (or IPs) the self-managed serving certificate is for; repeat or comma-separate.")
	options.BindLeaderElectionFlags(&o.LeaderElection, fs)
	logsapi.AddFlags(o.Logs, fs)
	o.FeatureGate.AddFlag(fs)
}

// Validate checks the options, the logging flags included. It changes
// nothing outside o: applying the logging configuration is ApplyLogging's.
func (o *Options) Validate() error {
	var errs []error
	if len(o.SchedulerNames) == 0 {
		errs = append(errs, errors.New("--scheduler-name: at least one scheduler name is required"))
	}
	for _, n := range o.SchedulerNames {
		if n == "" {
			errs = append(errs, errors.New("--scheduler-name: empty name"))
		}
	}
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers: %d; must be at least 1", o.Workers))
	}
	if o.ScheduleTimeoutSeconds < 0 {
		errs = append(errs, fmt.Errorf("--schedule-timeout-seconds: %d; must be 0 (unset) or positive", o.ScheduleTimeoutSeconds))
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-qps %v / --kube-api-burst %d: both must be positive", o.KubeAPIQPS, o.KubeAPIBurst))
	}
	if o.KubeAPIContentType != contentTypeProtobuf && o.KubeAPIContentType != contentTypeJSON {
		errs = append(errs, fmt.Errorf("--kube-api-content-type: %q; must be %s or %s", o.KubeAPIContentType, contentTypeProtobuf, contentTypeJSON))
	}
	if o.MaxOwnerDepth < 1 {
		errs = append(errs, fmt.Errorf("--max-owner-depth: %d; must be at least 1", o.MaxOwnerDepth))
	}
	if o.LeaderElection.LeaderElect && o.LeaderElection.ResourceName == "" {
		errs = append(errs, errors.New("--leader-elect-resource-name: required with --leader-elect"))
	}
	errs = append(errs, o.validateNative()...)
	if err := logsapi.Validate(o.Logs, o.FeatureGate, nil).ToAggregate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ApplyLogging applies the logging flags (format, verbosity, flush
// frequency) to the process: klog's logger, output and verbosity are
// process-global, so only the binary's main should call it. A program
// that runs the pod-grouper in-process (the e2e tests) keeps its own klog
// set-up by not calling it.
func (o *Options) ApplyLogging() error {
	return logsapi.ValidateAndApply(o.Logs, o.FeatureGate)
}

// validateNative checks the native-mode flags.
func (o *Options) validateNative() []error {
	var errs []error
	switch o.PodGroupAPI {
	case PodGroupAPISchedulerPlugins, PodGroupAPINative, PodGroupAPIAuto:
	default:
		errs = append(errs, fmt.Errorf("--podgroup-api: %q; must be %s, %s or %s", o.PodGroupAPI, PodGroupAPISchedulerPlugins, PodGroupAPINative, PodGroupAPIAuto))
	}
	if o.PodGroupAPI == PodGroupAPISchedulerPlugins || o.WebhookBindAddress == "" {
		return errs
	}
	if o.WebhookCertDir != "" {
		return errs
	}
	if ns, name, ok := strings.Cut(o.WebhookSecret, "/"); !ok || ns == "" || name == "" {
		errs = append(errs, fmt.Errorf("--webhook-secret: %q; must be NAMESPACE/NAME", o.WebhookSecret))
	}
	if len(o.WebhookDNSNames) == 0 {
		errs = append(errs, errors.New("--webhook-dns-name: at least one name is required for a self-managed certificate"))
	}
	for _, n := range o.WebhookDNSNames {
		if n == "" {
			errs = append(errs, errors.New("--webhook-dns-name: empty name"))
		}
	}
	return errs
}
