package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
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

	// The dashboard says which gate each is behind: train-a admitted and
	// running, train-b queued with Kueue's words (it has no pods, so no
	// gang yet); live, train-b runs once train-a is gone.
	base := runDashboard(t, sb.kubeconfig, "--address", "127.0.0.1:0")
	bctx, _ := browser(t)
	do(t, bctx, "loading "+base, chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`body[data-version]`)))
	pageRows := func() map[string]pageRow {
		return eval[map[string]pageRow](t, bctx, `(() => { const m = {}; for (const r of document.querySelectorAll('#gangs tr[data-wl]')) m[r.dataset.wl] = {state: r.dataset.state + "/" + ((r.querySelector('.queue') || {}).textContent || ""), reason: r.querySelector('.reason').textContent}; return m; })()`)
	}
	const rowA, rowB = "JobSet/" + ns + "/train-a", "JobSet/" + ns + "/train-b"
	waitFor(t, localcluster.ShortTimeout, "train-a running and admitted, train-b queued for quota", func(context.Context) (bool, string, error) {
		rows := pageRows()
		return rows[rowA].State == "running/Admitted" && rows[rowB].State == "queued/Pending" &&
			strings.HasPrefix(rows[rowB].Reason, "waiting for quota in ClusterQueue "+sandboxapp.KueueClusterQueue+": needs 32 nvidia.com/gpu"), fmt.Sprint(rows), nil
	})

	if err := sb.dyn.Resource(jobsetsGVR).Namespace(ns).Delete(ctx, "train-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, localcluster.ShortTimeout, "train-b admitted and bound whole", func(context.Context) (bool, string, error) {
		b, n := bound("train-b")
		return b == 4 && n == 4, fmt.Sprintf("%d of %d pods bound", b, n), nil
	})
	waitFor(t, localcluster.ShortTimeout, "train-b running and admitted on the page, without a reload", func(context.Context) (bool, string, error) {
		rows := pageRows()
		return rows[rowB].State == "running/Admitted", fmt.Sprint(rows), nil
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
