// Package app is the muster-podgrouper command: flags, leader election,
// health, readiness and metrics endpoints around podgrouper.Controller.
package app

import (
	"errors"
	"fmt"
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
}

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
