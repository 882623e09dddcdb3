// Package app runs muster on a throw-away in-process cluster: the
// control plane of localcluster, fake GPU nodes spread over zones and racks,
// muster-scheduler (kube-scheduler with the MusterGang plugin, on the
// shipped configuration) and the pod-grouper, the real operators the
// examples need (child processes), and the example workloads of package
// examples, each shown with `muster describe`. With NoMuster it runs the
// cluster without muster, for a developer's own builds. It is the body of
// cmd/muster-sandbox (`make run`).
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/examples"
	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/localcluster/operators"
	"github.com/muster-io/muster/plugins/gang"
)

// SchedulerName is the scheduler name muster serves; example workloads use it.
const SchedulerName = "muster-scheduler"

// KubeconfigContext is the context (and cluster) name of the kubeconfig the
// sandbox writes: it says what the cluster is in any kubectl context list.
const KubeconfigContext = "muster-sandbox"

// Config is what the command-line flags set.
type Config struct {
	Nodes       int
	GPUsPerNode int
	Zones       int
	// Kubeconfig is where the kubeconfig is written; empty means
	// DefaultKubeconfig().
	Kubeconfig string
	// LogFile receives the control plane's logs; empty means muster-sandbox.log
	// beside the kubeconfig.
	LogFile string
	// Keep stays up after the examples until ctx ends (Ctrl-C, SIGTERM).
	Keep bool
	// NoExamples starts an empty cluster.
	NoExamples bool
	// NoMuster starts the cluster, its controllers, the nodes and the
	// operators, but neither muster-scheduler nor the pod-grouper: a
	// developer runs their own builds against the kubeconfig (with the
	// scheduler configuration the sandbox writes beside it). No example is
	// applied (nothing would schedule it); Keep is implied.
	NoMuster bool
	// Native runs native gangs: the API server, controllers and
	// schedulers with the GenericWorkload gate (scheduling.k8s.io/v1beta1
	// served), the default kube-scheduler instead of muster-scheduler,
	// and the pod-grouper in native mode with its admission webhook; the
	// examples' namespaces are opted in (muster.io/native-gangs=enabled)
	// and their pods run on the default scheduler.
	Native bool
	// DRA publishes the fake GPUs only through Dynamic Resource
	// Allocation: no nvidia.com/gpu in the nodes' allocatable, one
	// ResourceSlice per node of GPUsPerNode devices of the driver and
	// DeviceClass gpu.nvidia.com (product, memory and an NVLink clique per
	// rack), and the class maps nvidia.com/gpu to its devices, so pods
	// asking for nvidia.com/gpu (the examples) get devices as well as pods
	// with ResourceClaims.
	DRA bool
	// Kueue runs the real Kueue in front of muster: a ResourceFlavor and
	// a ClusterQueue (KueueClusterQueue) with KueueGPUs of nvidia.com/gpu
	// quota (0: every GPU of the sandbox), a LocalQueue "default" in the
	// default namespace, and the examples of examples/kueue submitted to
	// it in place of the others.
	Kueue     bool
	KueueGPUs int

	// Stdout gets results (example summaries, the "ready:" line); Stderr
	// gets progress lines.
	Stdout, Stderr io.Writer
}

// SchedulerConfigFile is where, beside the kubeconfig, a sandbox started
// with NoMuster writes the scheduler configuration for the developer's own
// muster-scheduler: the shipped one, pointed at the sandbox.
const SchedulerConfigFile = "muster-sandbox-scheduler.yaml"

// DefaultKubeconfig is the kubeconfig path used when none is given.
func DefaultKubeconfig() string {
	return filepath.Join(os.TempDir(), "muster-sandbox", "kubeconfig")
}

// Run starts the sandbox, applies the examples, prints the ready line and,
// with Keep, waits for ctx to end; then it shuts everything down: operators
// stopped and their webhooks deleted, the control plane stopped, its temp
// dirs and the kubeconfig removed.
//
// What runs, in order: the control plane; the CRDs muster ships and those of
// the operators the examples need; the cluster's controllers and the pod
// simulator; the fake GPU nodes; muster-scheduler (the shipped
// configuration) and the pod-grouper, unless NoMuster; the operators (built
// on first use); then the examples of package examples, unless NoMuster.
// Each is a phase of its own below, so a flag that changes what starts
// changes which phases run, not what is inside them.
func Run(ctx context.Context, cfg Config) error {
	sb, err := newSandbox(cfg)
	if err != nil {
		return err
	}
	defer sb.logFile.Close()
	cfg = sb.cfg
	fmt.Fprintf(cfg.Stderr, "muster sandbox: kubeconfig %s, logs %s\n", sb.kubeconfig, cfg.LogFile)

	// Operator builds (2–5 minutes on a first run, all at once) overlap with the
	// start-up and the examples; they end with Run.
	buildCtx, cancelBuilds := context.WithCancel(ctx)
	var waitBuilds func()
	sb.builds, waitBuilds = buildOperators(buildCtx, sb.operators, sb.progress)
	defer func() {
		cancelBuilds()
		waitBuilds()
	}()

	if err := sb.startControlPlane(); err != nil {
		return err
	}
	defer sb.stopControlPlane()
	if err := writeKubeconfig(sb.cp.KubeconfigPath, sb.kubeconfig); err != nil {
		return err
	}
	// Components live until cp.Stop stops them in order, not until ctx
	// ends: a Ctrl-C must not tear them down underneath one another.
	compCtx := context.WithoutCancel(ctx)

	if err := sb.installCRDs(ctx); err != nil {
		return err
	}
	if err := sb.startControllers(compCtx); err != nil {
		return err
	}
	if err := sb.createNodes(ctx); err != nil {
		return err
	}
	if cfg.Kueue {
		if err := sb.startKueue(ctx); err != nil {
			return err
		}
	}
	if cfg.NoMuster {
		if err := sb.readyForOwnMuster(ctx); err != nil {
			return err
		}
	} else {
		if err := sb.startMuster(compCtx); err != nil {
			return err
		}
		if err := sb.runExamples(ctx); err != nil {
			return err
		}
	}

	if !cfg.Keep {
		// No "ready" line for a cluster that stops a moment later: a
		// newcomer would try the kubeconfig and find nothing there.
		sb.progress("done; the sandbox stops now (run with --keep to keep it up and use it)")
		return nil
	}
	sb.stayUp(ctx)
	return nil
}

// sandbox is one Run: its settings, what it has started, and what the
// phases of Run tell one another.
type sandbox struct {
	cfg Config // completed: see newSandbox
	// kubeconfig is the absolute path of the kubeconfig written for
	// people; schedulerFile the scheduler configuration written beside it
	// with NoMuster.
	kubeconfig, schedulerFile string
	root                      string // the muster source tree
	logFile                   *os.File

	// all is every example (what to suggest next), apply those Run applies
	// (none with NoExamples), operators the operators they name.
	all, apply []examples.Example
	operators  []string

	begin      time.Time
	progressMu sync.Mutex

	cp     *localcluster.ControlPlane
	builds map[string]*operatorBuild
	// unavailable says why an operator is not running (its CRDs or its
	// start failed); the examples that need it are skipped. started holds
	// the operators that run.
	unavailable map[string]string
	started     map[string]bool
	// operatorOptions are how an operator is run, where not as its
	// operator.yaml says (Kueue: on the configuration muster ships).
	operatorOptions map[string]localcluster.OperatorOptions
}

// newSandbox checks the flags, fills in the defaults, finds the source tree
// and the examples, and creates the log file: everything that can fail
// before anything has started.
func newSandbox(cfg Config) (*sandbox, error) {
	if cfg.Nodes < 1 {
		return nil, fmt.Errorf("--nodes must be at least 1, got %d", cfg.Nodes)
	}
	if cfg.GPUsPerNode < 0 || cfg.Zones < 1 {
		return nil, fmt.Errorf("--gpus-per-node must be >= 0 and --zones >= 1 (got %d, %d)", cfg.GPUsPerNode, cfg.Zones)
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Kubeconfig == "" {
		cfg.Kubeconfig = DefaultKubeconfig()
	}
	if cfg.NoMuster {
		// Without muster nothing schedules; a cluster that stopped at once
		// would be no use to anyone.
		cfg.Keep = true
	}
	sb := &sandbox{unavailable: map[string]string{}, started: map[string]bool{}, operatorOptions: map[string]localcluster.OperatorOptions{}}
	var err error
	if sb.kubeconfig, err = filepath.Abs(cfg.Kubeconfig); err != nil {
		return nil, err
	}
	if err := checkOverwrite(sb.kubeconfig); err != nil {
		return nil, err
	}
	sb.schedulerFile = filepath.Join(filepath.Dir(sb.kubeconfig), SchedulerConfigFile)
	if sb.root, err = repoRoot(); err != nil {
		return nil, err
	}
	if cfg.Kueue {
		if cfg.KueueGPUs < 0 {
			return nil, fmt.Errorf("--kueue-gpus must be >= 0, got %d", cfg.KueueGPUs)
		}
		if cfg.KueueGPUs == 0 {
			cfg.KueueGPUs = cfg.Nodes * cfg.GPUsPerNode
		}
		sb.all, err = examples.Kueue()
	} else {
		sb.all, err = examples.All()
	}
	if err != nil {
		return nil, err
	}
	if !cfg.NoExamples {
		sb.apply = sb.all
	}
	if sb.operators, err = operatorsFor(sb.apply); err != nil {
		return nil, err
	}
	if cfg.Kueue {
		// First: its webhook must hold every queued workload from its
		// creation on.
		sb.operators = append([]string{KueueOperator}, sb.operators...)
	}
	if cfg.LogFile == "" {
		cfg.LogFile = filepath.Join(filepath.Dir(sb.kubeconfig), "muster-sandbox.log")
	}
	if err := os.MkdirAll(filepath.Dir(cfg.LogFile), 0o755); err != nil {
		return nil, err
	}
	if sb.logFile, err = os.Create(cfg.LogFile); err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	sb.cfg = cfg
	sb.begin = time.Now()
	return sb, nil
}

// progress prints a progress line with the time since the start; operator
// builds call it from their own goroutines.
func (sb *sandbox) progress(format string, args ...any) {
	sb.progressMu.Lock()
	defer sb.progressMu.Unlock()
	fmt.Fprintf(sb.cfg.Stderr, "%s (%.1fs)\n", fmt.Sprintf(format, args...), time.Since(sb.begin).Seconds())
}

// startControlPlane starts the control plane. The in-process components
// and operators use its own kubeconfig (in its temp dir); people get one
// whose context says what it is (writeKubeconfig).
func (sb *sandbox) startControlPlane() error {
	cp, err := localcluster.Start(localcluster.Options{
		NativePodGroups: sb.cfg.Native,
		LogOutput:       sb.logFile,
		Progress: func(step string, _ time.Duration) {
			if !strings.HasPrefix(step, "starting ") {
				sb.progress("%s", step)
			}
		},
	})
	if err != nil {
		return err
	}
	sb.cp = cp
	return nil
}

// stopControlPlane stops everything the control plane runs and removes
// the files written for people.
func (sb *sandbox) stopControlPlane() {
	stopBegin := time.Now()
	sb.cp.Stop()
	// The kubeconfig points at a server that no longer exists.
	_ = os.Remove(sb.kubeconfig)
	if sb.cfg.NoMuster {
		_ = os.Remove(sb.schedulerFile)
	}
	fmt.Fprintf(sb.cfg.Stderr, "stopped in %.1fs\n", time.Since(stopBegin).Seconds())
}

// installCRDs installs the CRDs muster ships and those of the operators.
// An operator whose CRDs cannot be had is unavailable; the sandbox goes on
// without it. CRDs come before the controllers: the garbage collector
// learns the resources it tracks when it starts.
func (sb *sandbox) installCRDs(ctx context.Context) error {
	crds, err := installMusterCRDs(ctx, sb.cp, sb.root)
	if err != nil {
		return err
	}
	sb.progress("CRDs installed: %s", strings.Join(crds, ", "))
	// Each operator's CRDs come from its module (a `go mod download` of a
	// second or two): fetch them side by side.
	crdErrs := make([]error, len(sb.operators))
	var crdWG sync.WaitGroup
	for i, op := range sb.operators {
		crdWG.Add(1)
		go func() {
			defer crdWG.Done()
			crdErrs[i] = sb.cp.InstallOperatorCRDs(ctx, op)
		}()
	}
	crdWG.Wait()
	for i, op := range sb.operators {
		if err := crdErrs[i]; err != nil {
			sb.setUnavailable(op, "its CRDs could not be had: "+firstLine(err), "operator "+op+" CRDs", err)
			continue
		}
		sb.progress("%s operator CRDs installed", op)
	}
	return nil
}

// startControllers starts the controllers of kube-controller-manager, the
// namespace controller and the pod simulator.
func (sb *sandbox) startControllers(ctx context.Context) error {
	if _, err := sb.cp.StartControllers(ctx); err != nil {
		return err
	}
	// kubectl delete ns must end as on a cluster, not stay Terminating.
	if _, err := sb.cp.StartNamespaceController(ctx); err != nil {
		return err
	}
	if _, err := sb.cp.StartPodSimulator(ctx, localcluster.PodSimulatorOptions{}); err != nil {
		return err
	}
	sb.progress("controllers and pod simulator running")
	return nil
}

// createNodes creates the fake GPU nodes, spread over zones and racks.
func (sb *sandbox) createNodes(ctx context.Context) error {
	cfg := sb.cfg
	topo := localcluster.Topology{Nodes: cfg.Nodes, Zones: cfg.Zones, NodesPerRack: 2, RacksPerBlock: 2}
	gpus := cfg.GPUsPerNode
	if cfg.DRA {
		gpus = 0
	}
	nodes, err := sb.cp.CreateNodes(ctx, cfg.Nodes, localcluster.GPUNodes("gpu-node", gpus, topo))
	if err != nil {
		return err
	}
	if cfg.DRA {
		if err := sb.cp.EnsureGPUDeviceClass(ctx, true); err != nil {
			return err
		}
		if err := sb.cp.PublishGPUs(ctx, nodes, localcluster.DRAGPUs{PerNode: cfg.GPUsPerNode}); err != nil {
			return err
		}
		sb.progress("%d nodes × %d GPUs in %d zones, published through DRA (DeviceClass %s, one ResourceSlice per node; nvidia.com/gpu maps to its devices)",
			cfg.Nodes, cfg.GPUsPerNode, min(cfg.Zones, cfg.Nodes), localcluster.DRAGPUDriver)
		return nil
	}
	sb.progress("%d nodes × %d GPUs in %d zones", cfg.Nodes, cfg.GPUsPerNode, min(cfg.Zones, cfg.Nodes))
	return nil
}

// startMuster runs muster-scheduler and the pod-grouper in this process,
// or in native mode the default scheduler and the pod-grouper with its
// webhook.
func (sb *sandbox) startMuster(ctx context.Context) error {
	if sb.cfg.Native {
		port, _, err := StartNative(ctx, sb.cp)
		if err != nil {
			return err
		}
		sb.progress("native gangs: pod-grouper in native mode, its webhook on 127.0.0.1:%d (namespaces labelled %s=%s), %s with the GenericWorkload gate",
			port, api.LabelNativeGangs, api.NativeGangsEnabled, localcluster.DefaultSchedulerName)
		return nil
	}
	if err := startScheduler(ctx, sb.cp, sb.root); err != nil {
		return fmt.Errorf("%s: %w", SchedulerName, err)
	}
	sb.progress("%s running (%s, plugin %s)", SchedulerName, schedulerConfig, gang.Name)
	if _, err := startPodGrouper(ctx, sb.cp, nil); err != nil {
		return fmt.Errorf("pod-grouper: %w", err)
	}
	sb.progress("pod-grouper running")
	return nil
}

// readyForOwnMuster readies the sandbox for a developer's own muster
// builds (NoMuster): the scheduler configuration for theirs, and the
// operators, so their builds meet real JobSets and LeaderWorkerSets. The
// examples are theirs to apply; only their namespace is made.
func (sb *sandbox) readyForOwnMuster(ctx context.Context) error {
	sc, err := schedulerConfigFor(sb.root, sb.kubeconfig, true)
	if err != nil {
		return err
	}
	if err := os.WriteFile(sb.schedulerFile, sc, 0o600); err != nil {
		return fmt.Errorf("scheduler configuration: %w", err)
	}
	sb.progress("no %s and no pod-grouper (--no-muster); scheduler configuration for yours: %s", SchedulerName, sb.schedulerFile)
	for _, op := range sb.operators {
		if err := sb.ensureOperator(ctx, op); err != nil {
			return err
		}
	}
	if len(sb.apply) > 0 {
		return createNamespace(ctx, sb.cp, ExampleNamespace)
	}
	return nil
}

// operatorsFor lists the operators the examples name, once each in order of
// first use, and refuses names the harness cannot run.
func operatorsFor(exs []examples.Example) ([]string, error) {
	known := operators.Names()
	seen := map[string]bool{}
	var out []string
	for _, ex := range exs {
		op := ex.Operator
		if op == "" || seen[op] {
			continue
		}
		if !slices.Contains(known, op) {
			return nil, fmt.Errorf("example %s: metadata.annotations[%s]: unknown operator %q (the sandbox can run %s)",
				ex.File, examples.AnnotationOperator, op, strings.Join(known, ", "))
		}
		seen[op] = true
		out = append(out, op)
	}
	return out, nil
}

func isAlreadyExists(err error) bool {
	var s interface{ Status() metav1.Status }
	return errors.As(err, &s) && s.Status().Reason == metav1.StatusReasonAlreadyExists
}
