package app

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-io/muster/examples"
)

// stayUp prints the ready line and what to type next, and waits for ctx to
// end (Keep).
func (sb *sandbox) stayUp(ctx context.Context) {
	sb.progress("ready")
	fmt.Fprintf(sb.cfg.Stdout, "ready: kubeconfig=%s\n", sb.kubeconfig)
	fmt.Fprint(sb.cfg.Stderr, nextSteps(sb.cfg, sb.kubeconfig, sb.schedulerFile, sb.all, sb.started))
	<-ctx.Done()
	fmt.Fprintf(sb.cfg.Stderr, "shutting down\n")
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
		if cfg.Kueue {
			steps = append(steps, kueueSteps(cfg, all)...)
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

// kueueSteps are the next steps with Kueue: which gate the queued example
// waits at, and how to open it.
func kueueSteps(cfg Config, all []examples.Example) [][2]string {
	var steps [][2]string
	if ex, ok := exampleFile(all, examples.ExpectQueued); ok {
		steps = append(steps, [2]string{fmt.Sprintf("go run ./cmd/muster describe %s/%s -n %s", strings.ToLower(ex.Kind), ex.Name, ex.Namespace),
			"waiting for quota in ClusterQueue " + KueueClusterQueue})
	}
	if ex, ok := exampleFile(all, examples.ExpectScheduled); ok && !cfg.NoExamples {
		steps = append(steps, [2]string{fmt.Sprintf("kubectl delete %s %s -n %s", strings.ToLower(ex.Kind), ex.Name, ex.Namespace),
			"frees the quota: Kueue admits the next, muster places it whole"})
	}
	return append(steps, [2]string{"labels: {kueue.x-k8s.io/queue-name: " + KueueLocalQueue + "}", "in your own workload's metadata, namespace default: Kueue queues it"})
}
