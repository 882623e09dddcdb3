// Package sandbox runs muster on a throw-away in-process cluster: the
// control plane of test/harness, fake GPU nodes spread over zones, the
// scheduler and pod-grouper of muster, and example workloads. It is the body
// of cmd/muster-sandbox (`make run`).
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/muster-io/muster/test/harness"
)

// SchedulerName is the scheduler name muster serves; example workloads use it.
const SchedulerName = "muster-scheduler"

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

	// Stdout gets results (example summaries, the "ready:" line); Stderr
	// gets progress lines.
	Stdout, Stderr io.Writer
}

// DefaultKubeconfig is the kubeconfig path used when none is given.
func DefaultKubeconfig() string {
	return filepath.Join(os.TempDir(), "muster-sandbox", "kubeconfig")
}

// Run starts the sandbox, applies the examples, prints the ready line and,
// with Keep, waits for ctx to end; then it shuts everything down. The
// muster parts and the examples come from components().
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
	kubeconfig, err := filepath.Abs(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	if err := checkOverwrite(kubeconfig); err != nil {
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
	progress := func(format string, args ...any) {
		fmt.Fprintf(cfg.Stderr, "%-50s %5.1fs\n", fmt.Sprintf(format, args...), time.Since(begin).Seconds())
	}
	fmt.Fprintf(cfg.Stderr, "muster sandbox: kubeconfig %s, logs %s\n", kubeconfig, cfg.LogFile)

	cp, err := harness.Start(harness.Options{
		KubeconfigPath: kubeconfig,
		LogOutput:      logFile,
		Progress:       func(step string, _ time.Duration) { progress("%s", step) },
	})
	if err != nil {
		return err
	}
	defer func() {
		stopBegin := time.Now()
		cp.Stop()
		// The kubeconfig points at a server that no longer exists.
		_ = os.Remove(kubeconfig)
		fmt.Fprintf(cfg.Stderr, "stopped in %.1fs\n", time.Since(stopBegin).Seconds())
	}()

	parts := components()
	for _, crd := range parts.CRDs {
		if err := cp.InstallCRD(ctx, crd); err != nil {
			return err
		}
	}
	if len(parts.CRDs) > 0 {
		progress("%d CRDs installed", len(parts.CRDs))
	}
	if _, err := cp.StartControllers(ctx); err != nil {
		return err
	}
	if _, err := cp.StartPodSimulator(ctx, harness.PodSimulatorOptions{}); err != nil {
		return err
	}
	progress("controllers and pod simulator running")

	topo := harness.Topology{Nodes: cfg.Nodes, Zones: cfg.Zones, NodesPerRack: 2, RacksPerBlock: 2}
	if _, err := cp.CreateNodes(ctx, cfg.Nodes, harness.GPUNodes("gpu-node", cfg.GPUsPerNode, topo)); err != nil {
		return err
	}
	progress("%d nodes × %d GPUs in %d zones", cfg.Nodes, cfg.GPUsPerNode, min(cfg.Zones, cfg.Nodes))

	for _, c := range parts.Start {
		if _, err := c.Start(ctx, cp); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		progress("%s running", c.Name)
	}

	if !cfg.NoExamples {
		totalGPUs := cfg.Nodes * cfg.GPUsPerNode
		for _, ex := range parts.Examples {
			if ex.GPUs > totalGPUs {
				fmt.Fprintf(cfg.Stderr, "example %s skipped: needs %d GPUs, the sandbox has %d\n", ex.Name, ex.GPUs, totalGPUs)
				continue
			}
			if err := runExample(ctx, cp, ex, cfg.Stdout); err != nil {
				return fmt.Errorf("example %s: %w", ex.Name, err)
			}
			progress("example %s scheduled", ex.Name)
		}
	}

	fmt.Fprintf(cfg.Stdout, "ready: kubeconfig=%s\n", kubeconfig)
	if !cfg.Keep {
		return nil
	}
	fmt.Fprintf(cfg.Stderr, "up; try: kubectl --kubeconfig %s get nodes,pods -A -o wide   (Ctrl-C to stop)\n", kubeconfig)
	<-ctx.Done()
	fmt.Fprintf(cfg.Stderr, "shutting down\n")
	return nil
}

// runExample applies one example in its own namespace, waits until its pods
// are bound, and prints its summary.
func runExample(ctx context.Context, cp *harness.ControlPlane, ex Example, w io.Writer) error {
	ns := ex.Namespace
	if ns == "" {
		ns = "examples"
	}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !isAlreadyExists(err) {
		return err
	}
	if _, err := cp.Apply(ctx, ex.YAML, ns); err != nil {
		return err
	}
	if ex.Pods > 0 {
		if _, err := cp.WaitPodsBound(ctx, ns, ex.PodSelector, ex.Pods, harness.ShortTimeout); err != nil {
			return err
		}
	}
	describe := ex.Describe
	if describe == nil {
		describe = DescribePods
	}
	return describe(ctx, cp, ns, ex, w)
}

// DescribePods prints the example's pods and where they run: the summary
// used until `muster describe` can be printed instead.
func DescribePods(ctx context.Context, cp *harness.ControlPlane, ns string, ex Example, w io.Writer) error {
	pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: ex.PodSelector})
	if err != nil {
		return err
	}
	nodes, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	zoneOf := map[string]string{}
	for _, n := range nodes.Items {
		zoneOf[n.Name] = n.Labels[harness.ZoneLabel]
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	fmt.Fprintf(w, "\n%s (namespace %s): %s\n", ex.Name, ns, ex.Description)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  POD\tPHASE\tNODE\tZONE\tGPUS")
	for _, p := range pods.Items {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\n", p.Name, p.Status.Phase, p.Spec.NodeName, zoneOf[p.Spec.NodeName], podGPUs(&p))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return nil
}

func podGPUs(p *corev1.Pod) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Limits[harness.DefaultGPUResource]; ok {
			n += q.Value()
		} else if q, ok := c.Resources.Requests[harness.DefaultGPUResource]; ok {
			n += q.Value()
		}
	}
	return n
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
		if name != harness.KubeconfigContext {
			return fmt.Errorf("--kubeconfig %s exists and has context %q: not a sandbox kubeconfig, refusing to overwrite it; choose another path", path, name)
		}
	}
	return nil
}
