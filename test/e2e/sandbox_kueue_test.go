package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/muster-io/muster/cli"
	sandboxapp "github.com/muster-io/muster/cmd/muster-sandbox/app"
	"github.com/muster-io/muster/localcluster"
)

// TestSandboxKueue: `muster-sandbox --kueue` runs the real Kueue with a
// ClusterQueue of the sandbox's 32 GPUs and submits its two JobSets, each
// needing all of them. The first is admitted and bound whole; the second
// waits with no pods, and `muster describe` names the ClusterQueue and the
// quota it needs. Deleting the first admits the second, bound whole.
func TestSandboxKueue(t *testing.T) {
	sb := startSandbox(t, sandboxapp.Config{Nodes: 4, GPUsPerNode: 8, Zones: 2, Kueue: true})
	t.Logf("progress:\n%s", sb.progress.String())
	ctx := context.Background()
	const ns = "default"
	bound := func(name string) (int, int) {
		n := 0
		pods := sb.pods(t, ns, "jobset.sigs.k8s.io/jobset-name="+name)
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				n++
			}
		}
		return n, len(pods)
	}
	if b, n := bound("train-a"); b != 4 || n != 4 {
		t.Errorf("train-a: %d of %d pods bound, want 4 of 4", b, n)
	}
	if _, n := bound("train-b"); n != 0 {
		t.Errorf("train-b: %d pods while the quota is taken, want none", n)
	}
	out := sb.stdout.String()
	want := "waiting for quota in ClusterQueue " + sandboxapp.KueueClusterQueue + ": needs 32 nvidia.com/gpu, 0 free"
	if !strings.Contains(out, "$ muster describe jobset/train-b -n default") || !strings.Contains(out, want) {
		t.Errorf("the sandbox's describe of train-b does not say %q:\n%s", want, out)
	}
	if !strings.Contains(sb.progress.String(), "kueue.x-k8s.io/queue-name=default") {
		t.Errorf("the sandbox does not say how to submit to Kueue:\n%s", sb.progress.String())
	}

	if err := sb.dyn.Resource(jobsetsGVR).Namespace(ns).Delete(ctx, "train-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, localcluster.ShortTimeout, "train-b admitted and bound whole", func(context.Context) (bool, string, error) {
		b, n := bound("train-b")
		return b == 4 && n == 4, fmt.Sprintf("%d of %d pods bound", b, n), nil
	})
	var stdout, stderr bytes.Buffer
	env := cli.NewEnv(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr})
	env.Getenv = func(string) string { return "" }
	if code := cli.Run(ctx, env, []string{"--kubeconfig", sb.kubeconfig, "--cache-dir", t.TempDir(), "describe", "jobset/train-b", "-n", ns, "-o", "json"}); code != 0 {
		t.Fatalf("muster describe jobset/train-b: exit %d: %s", code, stderr.String())
	}
	var d cli.Description
	if err := json.Unmarshal(stdout.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	if d.Queue == nil || d.Queue.State != cli.QueueAdmitted || d.Queue.ClusterQueue != sandboxapp.KueueClusterQueue {
		t.Errorf("describe jobset/train-b after train-a: queue %+v, want Admitted in %s", d.Queue, sandboxapp.KueueClusterQueue)
	}
}
