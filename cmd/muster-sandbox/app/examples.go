package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/muster-io/muster/cli"
	"github.com/muster-io/muster/examples"
	"github.com/muster-io/muster/localcluster"
)

// ExampleNamespace is where examples without a namespace of their own go.
const ExampleNamespace = "examples"

// exampleTimeout bounds the wait for one example: operator, controllers,
// pod-grouper and scheduler each take a step, usually seconds in all.
const exampleTimeout = localcluster.LongTimeout

// musterCLI runs the muster command line in this process against the
// sandbox, as a user would run it with --kubeconfig. Its discovery cache
// lives in the control plane's temp dir, so nothing is left in ~/.kube.
func musterCLI(ctx context.Context, cp *localcluster.ControlPlane, stdin []byte, stdout io.Writer, args ...string) (stderr string, code int) {
	var errOut bytes.Buffer
	env := cli.NewEnv(genericiooptions.IOStreams{In: bytes.NewReader(stdin), Out: stdout, ErrOut: &errOut})
	full := append([]string{"--kubeconfig", cp.KubeconfigPath, "--cache-dir", filepath.Join(cp.Dir(), "muster-cli-cache")}, args...)
	code = cli.Run(ctx, env, full)
	return errOut.String(), code
}

// describeJSON runs `muster describe ... -o json`.
func describeJSON(ctx context.Context, cp *localcluster.ControlPlane, stdin []byte, args ...string) (*cli.Description, error) {
	var out bytes.Buffer
	args = append(args, "-o", "json")
	if stderr, code := musterCLI(ctx, cp, stdin, &out, args...); code != 0 {
		return nil, fmt.Errorf("muster %s: exit %d: %s", strings.Join(args, " "), code, strings.TrimSpace(stderr))
	}
	var d cli.Description
	if err := json.Unmarshal(out.Bytes(), &d); err != nil {
		return nil, fmt.Errorf("muster %s: %w", strings.Join(args, " "), err)
	}
	return &d, nil
}

// workloadRef is how the example is named on the muster command line:
// lower-case kind, as people type it ("<kind>/<name>").
func workloadRef(ex examples.Example) string {
	return strings.ToLower(ex.Kind) + "/" + ex.Name
}

// exampleNeeds is what the engine says the example asks for, read from its
// spec alone (`muster describe -f`): GPUs in all and the most one pod asks.
type exampleNeeds struct {
	gpus, gpusPerPod int64
}

func needsOf(ctx context.Context, cp *localcluster.ControlPlane, ex examples.Example) (exampleNeeds, error) {
	d, err := describeJSON(ctx, cp, ex.YAML, "describe", "-f", "-")
	if err != nil {
		return exampleNeeds{}, err
	}
	n := exampleNeeds{gpus: d.Totals.GPUs}
	for _, c := range d.Components {
		for _, in := range c.Instances {
			n.gpusPerPod = max(n.gpusPerPod, in.GPUsPerPod)
		}
	}
	return n, nil
}

// runExamples applies the examples one by one, each once its operator
// runs, and skips those that cannot run here: their operator is
// unavailable, or a gang expected to schedule needs more GPUs than are
// left.
func (sb *sandbox) runExamples(ctx context.Context) error {
	cfg := sb.cfg
	gpusLeft := int64(cfg.Nodes * cfg.GPUsPerNode)
	if cfg.Kueue {
		// What Kueue admits is what its quota leaves.
		gpusLeft = min(gpusLeft, int64(cfg.KueueGPUs))
	}
	for _, ex := range sb.apply {
		if err := sb.ensureOperator(ctx, ex.Operator); err != nil {
			return err
		}
		if ex.Operator != "" && sb.unavailable[ex.Operator] != "" {
			sb.progress("example %s skipped: the %s operator is not running", ex.File, ex.Operator)
			continue
		}
		needs, err := needsOf(ctx, sb.cp, ex)
		if err != nil {
			return fmt.Errorf("example %s: %w", ex.File, err)
		}
		if ex.Expect == examples.ExpectScheduled {
			// A gang that cannot fit never binds: skip it rather than wait.
			if needs.gpus > gpusLeft || needs.gpusPerPod > int64(cfg.GPUsPerNode) {
				sb.progress("example %s skipped: needs %d GPUs, up to %d in one pod; the sandbox has %d GPUs left on nodes of %d",
					ex.File, needs.gpus, needs.gpusPerPod, gpusLeft, cfg.GPUsPerNode)
				continue
			}
			gpusLeft -= needs.gpus
		}
		if err := runExample(ctx, sb.cp, ex, cfg.Native, cfg.Stdout); err != nil {
			return fmt.Errorf("example %s: %w", ex.File, err)
		}
		switch ex.Expect {
		case examples.ExpectUnschedulable:
			sb.progress("example %s: the scheduler said why it does not fit", ex.File)
		case examples.ExpectQueued:
			sb.progress("example %s: queued by Kueue", ex.File)
		default:
			sb.progress("example %s scheduled", ex.File)
		}
	}
	return nil
}

// runExample applies one example, waits for what it expects (every pod
// bound, or the scheduler's reason for each gang), and prints the `muster
// describe` view of it to w.
func runExample(ctx context.Context, cp *localcluster.ControlPlane, ex examples.Example, native bool, w io.Writer) error {
	ns := ex.Namespace
	if ns == "" {
		ns = ExampleNamespace
	}
	doc, prepare := ex.YAML, createNamespace
	if native {
		doc, prepare = nativeExample(ex.YAML), OptInNative
	}
	if err := prepare(ctx, cp, ns); err != nil {
		return err
	}
	if _, err := cp.Apply(ctx, doc, ns); err != nil {
		return err
	}
	ref := workloadRef(ex)
	if err := waitExample(ctx, cp, ex, ns, ref); err != nil {
		return err
	}
	title := ex.Description
	if title == "" {
		title = ex.File
	}
	fmt.Fprintf(w, "\n── %s/%s: %s\n$ muster describe %s -n %s\n\n", ns, ex.Name, title, ref, ns)
	if stderr, code := musterCLI(ctx, cp, nil, w, "describe", ref, "-n", ns); code != 0 {
		return fmt.Errorf("muster describe %s -n %s: exit %d: %s", ref, ns, code, strings.TrimSpace(stderr))
	}
	return nil
}

// createNamespace creates namespace ns unless it exists.
func createNamespace(ctx context.Context, cp *localcluster.ControlPlane, ns string) error {
	_, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !isAlreadyExists(err) {
		return err
	}
	return nil
}

// waitExample polls `muster describe` of the workload until it shows what
// the example expects. The CLI does the work of finding the workload's pods
// and gangs through its definition, so this needs no knowledge of the kind.
func waitExample(ctx context.Context, cp *localcluster.ControlPlane, ex examples.Example, ns, ref string) error {
	want := "every pod bound"
	switch ex.Expect {
	case examples.ExpectUnschedulable:
		want = "the scheduler's reason for every gang"
	case examples.ExpectQueued:
		want = "Kueue holding it back for quota"
	}
	ctx, cancel := context.WithTimeout(ctx, exampleTimeout)
	defer cancel()
	var seen string
	for {
		d, err := describeJSON(ctx, cp, nil, "describe", ref, "-n", ns)
		if err != nil {
			seen = err.Error()
		} else {
			var done bool
			done, seen = exampleState(d, ex.Expect)
			if done {
				if ex.Expect == examples.ExpectScheduled {
					settle(ctx, cp, d, ref, ns)
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return fmt.Errorf("timed out after %s waiting for %s of %s -n %s; last seen: %s", exampleTimeout, want, ref, ns, seen)
			}
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// exampleState says whether a workload's description shows what is
// expected, and sums it up for the timeout message. Scheduled: every desired
// pod exists and is bound, and every gang the definition plans has its
// PodGroup with at least min-member pods bound. Unschedulable: every planned
// gang's PodGroup exists and the scheduler gave a reason (or it got
// scheduled after all, on a sandbox big enough).
func exampleState(d *cli.Description, expect examples.Expect) (bool, string) {
	planned := 0
	for _, p := range d.Plans {
		planned += p.Instances
	}
	found, bound, reasons := 0, 0, 0
	var reason string
	for _, g := range d.Gangs {
		if !g.PodGroupFound {
			continue
		}
		found++
		if g.Bound >= int(g.MinMember) && g.MinMember > 0 {
			bound++
		}
		if g.Reason != "" {
			reasons++
			reason = g.Reason
		}
	}
	t := d.Totals
	if expect == examples.ExpectQueued {
		if d.Queue == nil {
			return false, fmt.Sprintf("no queue holds it (%d/%d pods bound)", t.BoundPods, t.Pods)
		}
		return d.Queue.State == cli.QueuePending && t.ObservedPods == 0, d.Queue.Summary
	}
	scheduled := t.Pods > 0 && t.ObservedPods >= t.Pods && t.BoundPods >= t.Pods && bound >= planned
	seen := fmt.Sprintf("%d/%d pods bound, %d/%d gangs with a PodGroup, %d bound", t.BoundPods, t.Pods, found, planned, bound)
	if expect == examples.ExpectUnschedulable {
		if reason != "" {
			seen += ", scheduler: " + reason
		}
		return scheduled || (planned > 0 && found >= planned && reasons >= found), seen
	}
	return scheduled, seen
}

// settleTimeout bounds the wait for a scheduled workload to look settled.
const settleTimeout = 10 * time.Second

// settle gives a workload whose pods are bound a few more seconds to have
// them all ready and its status past Initializing (its operator writes the
// status a moment after the pods run), so the view printed is the steady
// one. It is cosmetic: a workload that does not settle is printed as it is.
func settle(ctx context.Context, cp *localcluster.ControlPlane, d *cli.Description, ref, ns string) {
	deadline := time.Now().Add(settleTimeout)
	for !settled(d) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
		next, err := describeJSON(ctx, cp, nil, "describe", ref, "-n", ns)
		if err != nil {
			return
		}
		d = next
	}
}

// settled: every desired pod ready and the definition's status no longer
// Initializing.
func settled(d *cli.Description) bool {
	return d.Totals.ReadyPods >= d.Totals.Pods && !slices.Contains(d.Phases, "Initializing")
}
