package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	utilcompatibility "k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/configz"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler"
	schedulerconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/profile"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// DefaultSchedulerName is the scheduler name of pods that name none.
const DefaultSchedulerName = "default-scheduler"

// SchedulerOptions configures StartScheduler.
type SchedulerOptions struct {
	// Config is the versioned scheduler configuration; its profiles decide
	// the scheduler names served and the plugins. Nil means one profile
	// with the default plugins named "default-scheduler". Defaults are
	// applied as kube-scheduler would (clientConnection and leaderElection
	// are ignored: the scheduler uses the control plane's client and never
	// elects).
	Config *configv1.KubeSchedulerConfiguration
	// OutOfTreeRegistry holds the factories of plugins that are not in tree,
	// by the names the profiles enable them under.
	OutOfTreeRegistry frameworkruntime.Registry
	// RestConfig replaces the admin config, for example to impersonate the
	// scheduler's service account when testing RBAC.
	RestConfig *rest.Config
}

// DefaultProfile is a configuration with one profile of the default
// plugins under schedulerName.
func DefaultProfile(schedulerName string) *configv1.KubeSchedulerConfiguration {
	return &configv1.KubeSchedulerConfiguration{
		Profiles: []configv1.KubeSchedulerProfile{{SchedulerName: ptr.To(schedulerName)}},
	}
}

// StartScheduler builds a scheduler with pkg/scheduler.New (the same
// sequence as kube-scheduler without its command, server and leader
// election), starts it, and returns once its informers have synced. stop
// cancels it and waits until it has returned; Stop of the control plane
// calls it too.
//
// Only one scheduler may serve a given scheduler name at a time: two would
// race to bind the same pods.
func StartScheduler(ctx context.Context, cp *ControlPlane, opts SchedulerOptions) (stop func(), err error) {
	if err := cp.live(); err != nil {
		return nil, err
	}
	versioned := opts.Config
	if versioned == nil {
		versioned = DefaultProfile(DefaultSchedulerName)
	}
	versioned = versioned.DeepCopy()
	scheme.Scheme.Default(versioned)
	var cfg schedulerconfig.KubeSchedulerConfiguration
	if err := scheme.Scheme.Convert(versioned, &cfg, nil); err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	// Validation wants a client connection and leader election that make
	// sense; neither is used here.
	cfg.LeaderElection.LeaderElect = false
	if err := validation.ValidateKubeSchedulerConfiguration(&cfg); err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}

	restCfg := opts.RestConfig
	if restCfg == nil {
		restCfg = cp.RestConfig
	}
	restCfg = rest.CopyConfig(restCfg)
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	informerFactory := scheduler.NewInformerFactory(cs, 0, nil)
	bc := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	sched, err := scheduler.New(ctx, cs, informerFactory, nil, profile.NewRecorderFactory(bc),
		scheduler.WithKubeConfig(restCfg),
		scheduler.WithProfiles(cfg.Profiles...),
		scheduler.WithPercentageOfNodesToScore(cfg.PercentageOfNodesToScore),
		scheduler.WithPodInitialBackoffSeconds(cfg.PodInitialBackoffSeconds),
		scheduler.WithPodMaxBackoffSeconds(cfg.PodMaxBackoffSeconds),
		scheduler.WithParallelism(cfg.Parallelism),
		scheduler.WithExtenders(cfg.Extenders...),
		scheduler.WithFrameworkOutOfTreeRegistry(opts.OutOfTreeRegistry),
	)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("create scheduler: %w", err)
	}
	bc.StartRecordingToSink(ctx.Done())
	informerFactory.Start(ctx.Done())
	err = waitForSync(ctx, informerFactory.WaitForCacheSync)
	if err == nil {
		err = sched.WaitForHandlersSync(ctx)
	}
	if err != nil {
		cancel()
		informerFactory.Shutdown()
		bc.Shutdown()
		return nil, fmt.Errorf("start scheduler: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sched.Run(ctx)
	}()
	stop = sync.OnceFunc(func() {
		// Cancel first, then wait: Run returns only after its context ends.
		cancel()
		<-done
		informerFactory.Shutdown()
		bc.Shutdown()
	})
	cp.OnStop("scheduler", stop)
	return stop, nil
}

// appSchedulers counts running StartSchedulerApp schedulers: kube-scheduler's
// app registers the process-global configz "componentconfig", so only one
// may run at a time.
var appSchedulers atomic.Int32

// StartSchedulerApp runs the real kube-scheduler command path (app.Setup +
// app.Run) with a KubeSchedulerConfiguration YAML, as the shipped
// muster-scheduler binary does, with out-of-tree plugins registered by
// app.WithPlugin options. The harness fills in clientConnection.kubeconfig
// (the control plane's) and turns leader election off unless the YAML sets
// them; no secure port is served. Only one may run at a time in a process.
func StartSchedulerApp(ctx context.Context, cp *ControlPlane, configYAML []byte, outOfTree ...app.Option) (stop func(), err error) {
	if err := cp.live(); err != nil {
		return nil, err
	}
	if !appSchedulers.CompareAndSwap(0, 1) {
		return nil, fmt.Errorf("a StartSchedulerApp scheduler is already running in this process (configz is global)")
	}
	defer func() {
		if err != nil {
			appSchedulers.Store(0)
		}
	}()
	cfgJSON, err := yaml.YAMLToJSON(configYAML)
	if err != nil {
		return nil, fmt.Errorf("scheduler config YAML: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(cfgJSON, &doc); err != nil || doc == nil {
		return nil, fmt.Errorf("scheduler config YAML: not an object: %v", err)
	}
	setDefault(doc, cp.KubeconfigPath, "clientConnection", "kubeconfig")
	setDefault(doc, int64(1000), "clientConnection", "qps")
	setDefault(doc, int64(2000), "clientConnection", "burst")
	setDefault(doc, false, "leaderElection", "leaderElect")
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(cp.Dir(), "scheduler-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		return nil, err
	}

	opts := options.NewOptions()
	// A registry of its own, like upstream's scheduler test server, so the
	// global one is never Set twice; the feature gates are the process's.
	reg := basecompatibility.NewComponentGlobalsRegistry()
	if err := reg.Register(basecompatibility.DefaultKubeComponent, utilcompatibility.DefaultBuildEffectiveVersion(), utilfeature.DefaultMutableFeatureGate); err != nil {
		return nil, err
	}
	opts.ComponentGlobalsRegistry = reg
	opts.ConfigFile = path
	// Port 0: no HTTPS healthz/metrics server, hence no authn/authz
	// delegation to set up.
	opts.SecureServing.BindPort = 0
	if err := opts.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	cc, sched, err := app.Setup(ctx, opts, outOfTree...)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("kube-scheduler setup: %w", err)
	}
	// app.Run would start and sync the informers itself, in its goroutine;
	// doing it here first makes the scheduler ready when this returns (Run's
	// own Start is then a no-op).
	cc.InformerFactory.Start(ctx.Done())
	err = waitForSync(ctx, cc.InformerFactory.WaitForCacheSync)
	if err == nil {
		err = sched.WaitForHandlersSync(ctx)
	}
	if err != nil {
		cancel()
		cc.InformerFactory.Shutdown()
		return nil, fmt.Errorf("start kube-scheduler: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Without leader election Run always ends with an error ("finished
		// without leader elect"); only one before cancellation matters.
		if err := app.Run(ctx, cc, sched); err != nil && ctx.Err() == nil {
			fmt.Fprintf(cp.LogOutput(), "kube-scheduler app stopped: %v\n", err)
		}
	}()
	stop = sync.OnceFunc(func() {
		cancel()
		<-done
		cc.InformerFactory.Shutdown()
		if cc.DynInformerFactory != nil {
			cc.DynInformerFactory.Shutdown()
		}
		configz.Delete("componentconfig")
		appSchedulers.Store(0)
	})
	cp.OnStop("scheduler app", stop)
	return stop, nil
}

// SyncTimeout bounds the wait for a component's informer caches. A cache
// that never syncs usually means an API the component watches is not served
// (for example a feature gate on without its API group).
const SyncTimeout = 30 * time.Second

// waitForSync waits for an informer factory's caches for at most
// SyncTimeout and names the types that did not sync.
func waitForSync(ctx context.Context, wait func(stop <-chan struct{}) map[reflect.Type]bool) error {
	ctx, cancel := context.WithTimeout(ctx, SyncTimeout)
	defer cancel()
	var notSynced []string
	for typ, ok := range wait(ctx.Done()) {
		if !ok {
			notSynced = append(notSynced, typ.String())
		}
	}
	if len(notSynced) > 0 {
		sort.Strings(notSynced)
		return fmt.Errorf("informer caches not synced after %s: %s (is the API served?)", SyncTimeout, strings.Join(notSynced, ", "))
	}
	return nil
}

// setDefault sets doc[path...] = v unless it is already set.
func setDefault(doc map[string]any, v any, path ...string) {
	m := doc
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	last := path[len(path)-1]
	if _, ok := m[last]; !ok {
		m[last] = v
	}
}
