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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/muster-io/muster/examples"
	"github.com/muster-io/muster/localcluster"
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
func Run(ctx context.Context, cfg Config) error {
	if cfg.Nodes < 1 {
		return fmt.Errorf("--nodes must be at least 1, got %d", cfg.Nodes)
	}
	if cfg.GPUsPerNode < 0 || cfg.Zones < 1 {
		return fmt.Errorf("--gpus-per-node must be >= 0 and --zones >= 1 (got %d, %d)", cfg.GPUsPerNode, cfg.Zones)
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
	kubeconfig, err := filepath.Abs(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	if err := checkOverwrite(kubeconfig); err != nil {
		return err
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	all, err := examples.All()
	if err != nil {
		return err
	}
	var exs []examples.Example
	if !cfg.NoExamples {
		exs = all
	}
	operators, err := operatorsFor(exs)
	if err != nil {
		return err
	}
	if cfg.LogFile == "" {
		cfg.LogFile = filepath.Join(filepath.Dir(kubeconfig), "muster-sandbox.log")
	}
	if err := os.MkdirAll(filepath.Dir(cfg.LogFile), 0o755); err != nil {
		return err
	}
	logFile, err := os.Create(cfg.LogFile)
	if err != nil {
		return fmt.Errorf("log file: %w", err)
	}
	defer logFile.Close()

	begin := time.Now()
	var progressMu sync.Mutex
	progress := func(format string, args ...any) {
		progressMu.Lock()
		defer progressMu.Unlock()
		fmt.Fprintf(cfg.Stderr, "%s (%.1fs)\n", fmt.Sprintf(format, args...), time.Since(begin).Seconds())
	}
	fmt.Fprintf(cfg.Stderr, "muster sandbox: kubeconfig %s, logs %s\n", kubeconfig, cfg.LogFile)

	// Operator builds (2–5 minutes on a first run, all at once) overlap with the
	// start-up and the examples; they end with Run.
	buildCtx, cancelBuilds := context.WithCancel(ctx)
	builds, waitBuilds := buildOperators(buildCtx, operators, progress)
	defer func() {
		cancelBuilds()
		waitBuilds()
	}()

	// The in-process components and operators use the control plane's own
	// kubeconfig (in its temp dir); people get one whose context says what
	// it is.
	cp, err := localcluster.Start(localcluster.Options{
		LogOutput: logFile,
		Progress: func(step string, _ time.Duration) {
			if !strings.HasPrefix(step, "starting ") {
				progress("%s", step)
			}
		},
	})
	if err != nil {
		return err
	}
	schedulerFile := filepath.Join(filepath.Dir(kubeconfig), SchedulerConfigFile)
	defer func() {
		stopBegin := time.Now()
		cp.Stop()
		// The kubeconfig points at a server that no longer exists.
		_ = os.Remove(kubeconfig)
		if cfg.NoMuster {
			_ = os.Remove(schedulerFile)
		}
		fmt.Fprintf(cfg.Stderr, "stopped in %.1fs\n", time.Since(stopBegin).Seconds())
	}()
	if err := writeKubeconfig(cp.KubeconfigPath, kubeconfig); err != nil {
		return err
	}
	// Components live until cp.Stop stops them in order, not until ctx
	// ends: a Ctrl-C must not tear them down underneath one another.
	compCtx := context.WithoutCancel(ctx)

	// CRDs before the controllers: the garbage collector learns the
	// resources it tracks when it starts.
	crds, err := installMusterCRDs(ctx, cp, root)
	if err != nil {
		return err
	}
	progress("CRDs installed: %s", strings.Join(crds, ", "))
	// Each operator's CRDs come from its module (a `go mod download` of a
	// second or two): fetch them side by side.
	crdErrs := make([]error, len(operators))
	var crdWG sync.WaitGroup
	for i, op := range operators {
		crdWG.Add(1)
		go func() {
			defer crdWG.Done()
			crdErrs[i] = cp.InstallOperatorCRDs(ctx, op)
		}()
	}
	crdWG.Wait()
	unavailable := map[string]string{}
	for i, op := range operators {
		if err := crdErrs[i]; err != nil {
			unavailable[op] = "its CRDs could not be had: " + firstLine(err)
			fmt.Fprintf(logFile, "operator %s CRDs: %v\n", op, err)
			progress("%s operator unavailable (%s; details in the log file); skipping the examples that need it", op, unavailable[op])
			continue
		}
		progress("%s operator CRDs installed", op)
	}
	if _, err := cp.StartControllers(compCtx); err != nil {
		return err
	}
	// kubectl delete ns must end as on a cluster, not stay Terminating.
	if _, err := cp.StartNamespaceController(compCtx); err != nil {
		return err
	}
	if _, err := cp.StartPodSimulator(compCtx, localcluster.PodSimulatorOptions{}); err != nil {
		return err
	}
	progress("controllers and pod simulator running")

	topo := localcluster.Topology{Nodes: cfg.Nodes, Zones: cfg.Zones, NodesPerRack: 2, RacksPerBlock: 2}
	if _, err := cp.CreateNodes(ctx, cfg.Nodes, localcluster.GPUNodes("gpu-node", cfg.GPUsPerNode, topo)); err != nil {
		return err
	}
	progress("%d nodes × %d GPUs in %d zones", cfg.Nodes, cfg.GPUsPerNode, min(cfg.Zones, cfg.Nodes))

	if cfg.NoMuster {
		sc, err := schedulerConfigFor(root, kubeconfig, true)
		if err != nil {
			return err
		}
		if err := os.WriteFile(schedulerFile, sc, 0o600); err != nil {
			return fmt.Errorf("scheduler configuration: %w", err)
		}
		progress("no %s and no pod-grouper (--no-muster); scheduler configuration for yours: %s", SchedulerName, schedulerFile)
	} else {
		if err := startScheduler(compCtx, cp, root); err != nil {
			return fmt.Errorf("%s: %w", SchedulerName, err)
		}
		progress("%s running (%s, plugin %s)", SchedulerName, schedulerConfig, gang.Name)
		if err := startPodGrouper(compCtx, cp); err != nil {
			return fmt.Errorf("pod-grouper: %w", err)
		}
		progress("pod-grouper running")
	}

	// Operators start when the first example that needs one comes, so the
	// first example runs while the next operator still builds.
	started := map[string]bool{}
	ensureOperator := func(op string) error {
		if op == "" || started[op] || unavailable[op] != "" {
			return nil
		}
		if err := startOperator(ctx, cp, builds[op], progress); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			unavailable[op] = firstLine(err)
			fmt.Fprintf(logFile, "operator %s: %v\n", op, err)
			progress("%s operator unavailable (%s; details in the log file); skipping the examples that need it", op, unavailable[op])
			return nil
		}
		started[op] = true
		progress("%s operator running", op)
		return nil
	}

	if cfg.NoMuster {
		// The operators, so the developer's builds meet real JobSets and
		// LeaderWorkerSets; the examples are theirs to apply.
		for _, op := range operators {
			if err := ensureOperator(op); err != nil {
				return err
			}
		}
		if len(exs) > 0 {
			if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ExampleNamespace}}, metav1.CreateOptions{}); err != nil && !isAlreadyExists(err) {
				return err
			}
		}
		exs = nil
	}

	gpusLeft := int64(cfg.Nodes * cfg.GPUsPerNode)
	for _, ex := range exs {
		if err := ensureOperator(ex.Operator); err != nil {
			return err
		}
		if ex.Operator != "" && unavailable[ex.Operator] != "" {
			progress("example %s skipped: the %s operator is not running", ex.File, ex.Operator)
			continue
		}
		needs, err := needsOf(ctx, cp, ex)
		if err != nil {
			return fmt.Errorf("example %s: %w", ex.File, err)
		}
		if ex.Expect == examples.ExpectScheduled {
			// A gang that cannot fit never binds: skip it rather than wait.
			if needs.gpus > gpusLeft || needs.gpusPerPod > int64(cfg.GPUsPerNode) {
				progress("example %s skipped: needs %d GPUs, up to %d in one pod; the sandbox has %d GPUs left on nodes of %d",
					ex.File, needs.gpus, needs.gpusPerPod, gpusLeft, cfg.GPUsPerNode)
				continue
			}
			gpusLeft -= needs.gpus
		}
		if err := runExample(ctx, cp, ex, cfg.Stdout); err != nil {
			return fmt.Errorf("example %s: %w", ex.File, err)
		}
		if ex.Expect == examples.ExpectUnschedulable {
			progress("example %s: the scheduler said why it does not fit", ex.File)
		} else {
			progress("example %s scheduled", ex.File)
		}
	}

	if !cfg.Keep {
		// No "ready" line for a cluster that stops a moment later: a
		// newcomer would try the kubeconfig and find nothing there.
		progress("done; the sandbox stops now (run with --keep to keep it up and use it)")
		return nil
	}
	progress("ready")
	fmt.Fprintf(cfg.Stdout, "ready: kubeconfig=%s\n", kubeconfig)
	fmt.Fprint(cfg.Stderr, nextSteps(cfg, kubeconfig, schedulerFile, all, started))
	<-ctx.Done()
	fmt.Fprintf(cfg.Stderr, "shutting down\n")
	return nil
}

// operatorsFor lists the operators the examples name, once each in order of
// first use, and refuses names the harness cannot run.
func operatorsFor(exs []examples.Example) ([]string, error) {
	known := localcluster.Operators()
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

// checkOverwrite refuses to replace (and at exit delete) a kubeconfig that
// is not a sandbox's own, such as ~/.kube/config given by mistake.
func checkOverwrite(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return fmt.Errorf("--kubeconfig %s exists and is not a kubeconfig (%v); choose another path", path, err)
	}
	for name := range kc.Contexts {
		// Earlier sandboxes named the context after the harness.
		if name != KubeconfigContext && name != localcluster.KubeconfigContext {
			return fmt.Errorf("--kubeconfig %s exists and has context %q: not a sandbox kubeconfig, refusing to overwrite it; choose another path", path, name)
		}
	}
	return nil
}

// writeKubeconfig writes the control plane's admin kubeconfig (from) to
// path with its cluster, user and context named KubeconfigContext.
func writeKubeconfig(from, path string) error {
	kc, err := clientcmd.LoadFromFile(from)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cur := kc.Contexts[kc.CurrentContext]
	if cur == nil {
		return fmt.Errorf("kubeconfig %s: no current context", from)
	}
	out := clientcmdapi.NewConfig()
	out.Clusters[KubeconfigContext] = kc.Clusters[cur.Cluster]
	out.AuthInfos[KubeconfigContext] = kc.AuthInfos[cur.AuthInfo]
	out.Contexts[KubeconfigContext] = &clientcmdapi.Context{Cluster: KubeconfigContext, AuthInfo: KubeconfigContext, Namespace: cur.Namespace}
	out.CurrentContext = KubeconfigContext
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("kubeconfig dir: %w", err)
	}
	if err := clientcmd.WriteToFile(*out, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// nextSteps is what to type next, printed once the sandbox is up: three
// commands, run from the source tree as `make run` is, each with what it
// shows.
func nextSteps(cfg Config, kubeconfig, schedulerFile string, all []examples.Example, operators map[string]bool) string {
	var head string
	var steps [][2]string
	if cfg.NoMuster {
		head = fmt.Sprintf("up without %s and the pod-grouper (context %s); run your own builds against it, each in a terminal of its own:", SchedulerName, KubeconfigContext)
		steps = append(steps,
			[2]string{"go run ./cmd/muster-podgrouper --kubeconfig " + kubeconfig, "your pod-grouper"},
			[2]string{"go run ./cmd/muster-scheduler --config " + schedulerFile, "your scheduler, on the shipped configuration"})
		if ex, ns, ok := exampleToApply(cfg, all, operators); ok {
			steps = append(steps, [2]string{fmt.Sprintf("kubectl --kubeconfig %s apply -n %s -f examples/%s", kubeconfig, ns, ex.File), "a workload for them"})
		}
	} else {
		head = fmt.Sprintf("up (context %s); next:", KubeconfigContext)
		steps = append(steps,
			[2]string{"export KUBECONFIG=" + kubeconfig, "for kubectl and muster"},
			[2]string{"go run ./cmd/muster get -A", "every workload: pods, GPUs, gangs"})
		if ex, ok := exampleFile(all, examples.ExpectUnschedulable); ok {
			steps = append(steps, [2]string{"go run ./cmd/muster fit -f examples/" + ex.File, "would it fit now, where, and if not, why"})
		}
	}
	width := 0
	for _, st := range steps {
		width = max(width, len(st[0]))
	}
	var b strings.Builder
	b.WriteString(head + "\n")
	for _, st := range steps {
		fmt.Fprintf(&b, "  %-*s  # %s\n", width, st[0], st[1])
	}
	b.WriteString("(Ctrl-C to stop)\n")
	return b.String()
}

// exampleToApply picks the first example expected to schedule whose
// operator runs (or that needs none), and its namespace.
func exampleToApply(cfg Config, all []examples.Example, operators map[string]bool) (examples.Example, string, bool) {
	for _, ex := range all {
		if ex.Expect != examples.ExpectScheduled || (ex.Operator != "" && !operators[ex.Operator]) {
			continue
		}
		ns := ex.Namespace
		switch {
		case ns != "":
		case cfg.NoExamples:
			ns = metav1.NamespaceDefault
		default:
			ns = ExampleNamespace
		}
		return ex, ns, true
	}
	return examples.Example{}, "", false
}

// exampleFile is the first example with the given expectation.
func exampleFile(all []examples.Example, expect examples.Expect) (examples.Example, bool) {
	for _, ex := range all {
		if ex.Expect == expect {
			return ex, true
		}
	}
	return examples.Example{}, false
}
