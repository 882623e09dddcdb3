package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/cli"
	sandboxapp "github.com/muster-io/muster/cmd/muster-sandbox/app"
	"github.com/muster-io/muster/localcluster"
)

// runDashboard runs `muster dashboard` on kubeconfig with args until the
// test ends and returns the URL it printed.
func runDashboard(t testing.TB, kubeconfig string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	env := cli.NewEnv(genericiooptions.IOStreams{In: strings.NewReader(""), Out: pw, ErrOut: &stderr})
	env.Getenv = func(string) string { return "" }
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, env, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", t.TempDir(), "dashboard", "--no-browser"}, args...))
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		// 130: the interrupt that ends it, as Ctrl-C does.
		if code := <-done; code != 0 && code != 130 {
			t.Errorf("muster dashboard exited %d: %s", code, stderr.String())
		}
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if _, u, ok := strings.Cut(sc.Text(), "muster dashboard: "); ok {
				urls <- u
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case u := <-urls:
		return u
	case code := <-done:
		done <- code
		t.Fatalf("muster dashboard exited %d before printing its URL: %s", code, stderr.String())
	case <-time.After(localcluster.ShortTimeout):
		t.Fatalf("muster dashboard printed no URL in %s: %s", localcluster.ShortTimeout, stderr.String())
	}
	return ""
}

// browser starts headless Chromium and returns its context; every URL the
// page requests is recorded in requests.
func browser(t testing.TB) (ctx context.Context, requests func() []string) {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Fatal("the dashboard tests need headless Chromium: apt-get install chromium (see README, Development)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1440, 1100))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	var mu sync.Mutex
	var seen []string
	if err := chromedp.Listen(bctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			seen = append(seen, e.Request.URL)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	if _, err := chromedp.Call(bctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return bctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// eval runs js in the page and returns its result.
func eval[T any](t testing.TB, ctx context.Context, js string) T {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(rctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluating %.60s…: %v", js, err)
	}
	return v
}

// do runs browser steps, bounded in time.
func do(t testing.TB, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, localcluster.ShortTimeout)
	defer cancel()
	if err := chromedp.Do(rctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// pageRow and pageDetail are what the tests read off the page (the JSON
// decoder chromedp uses matches names exactly).
type pageRow struct {
	State  string `json:"state"`
	Reason string `json:"reason"`
}

type pageDetail struct {
	Describe string `json:"describe"`
	Fit      string `json:"fit"`
	Hash     string `json:"hash"`
}

// heldCells is the page's map: node|Kind/namespace/name → GPU cells held.
const heldCellsJS = `(() => { const m = {}; for (const n of document.querySelectorAll('#map .node')) {
  for (const c of n.querySelectorAll('.cell.held')) { const k = n.dataset.node + '|' + c.dataset.wl; m[k] = (m[k] || 0) + 1; } } return m; })()`

// apiHeldCells is what the map must show, from the API: node|Kind/
// namespace/name → the GPUs the workload's bound gang members hold there,
// a member found through its native PodGroup (spec.schedulingGroup, owned
// by the workload its workload-uid label names) or its scheduler-plugins
// PodGroup label (controlled by the workload).
func apiHeldCells(t *testing.T, sb *runningSandbox, ns string) map[string]int {
	t.Helper()
	ctx := context.Background()
	pods, err := sb.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner, native := map[string]string{}, map[string]string{}
	pgs, err := sb.dyn.Resource(podGroupsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pg := range pgs.Items {
		if ref := metav1.GetControllerOfNoCopy(&pg); ref != nil {
			owner[pg.GetName()] = ref.Kind + "/" + ns + "/" + ref.Name
		}
	}
	npgs, err := sb.kube.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pg := range npgs.Items {
		for _, ref := range pg.OwnerReferences {
			if string(ref.UID) == pg.Labels[api.LabelWorkloadUID] && pg.Spec.SchedulingPolicy.Gang != nil {
				native[pg.Name] = ref.Kind + "/" + ns + "/" + ref.Name
			}
		}
	}
	// GPUs as DRA devices: those of the GPU driver allocated to the
	// claims reserved for a pod.
	claims, err := sb.kube.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	devices := map[types.UID]int{}
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			for _, ref := range c.Status.ReservedFor {
				if r.Driver == localcluster.DRAGPUDriver && ref.Resource == "pods" {
					devices[ref.UID]++
				}
			}
		}
	}
	m := map[string]int{}
	for _, p := range pods.Items {
		w, ok := owner[p.Labels[api.LabelPodGroup]]
		if sg := p.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
			w, ok = native[*sg.PodGroupName]
		}
		if !ok || p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		gpus := devices[p.UID]
		for _, c := range p.Spec.Containers {
			if q, ok := c.Resources.Requests["nvidia.com/gpu"]; ok {
				gpus = max(gpus, int(q.Value()))
			}
		}
		if gpus > 0 {
			m[p.Spec.NodeName+"|"+w] += gpus
		}
	}
	return m
}

// TestDashboard drives `muster dashboard` on the sandbox in headless
// Chromium: the GPU map shows every GPU with the cells of each gang on the
// nodes its pods are bound to; the gang too big to fit is listed as waiting
// with the scheduler's reason; its detail is the CLI's describe; deleting a
// workload frees its cells live, without a reload; the page requests
// nothing outside its own origin; on a non-loopback address every request
// needs the token.
func TestDashboard(t *testing.T) {
	sb := startSandbox(t, sandboxapp.Config{Nodes: 4, GPUsPerNode: 8, Zones: 2})
	ns := sandboxapp.ExampleNamespace
	base := runDashboard(t, sb.kubeconfig, "--address", "127.0.0.1:0")
	origin := strings.TrimSuffix(base, "/")
	ctx, requests := browser(t)

	want := func() map[string]int { return apiHeldCells(t, sb, ns) }
	do(t, ctx, "loading "+base, chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`body[data-version]`)))
	cells := eval[int](t, ctx, `document.querySelectorAll('#map .cell').length`)
	if cells != 32 {
		t.Errorf("the map has %d GPU cells, want the sandbox's 32", cells)
	}
	var got map[string]int
	waitFor(t, localcluster.ShortTimeout, "the map's held cells match the bound pods", func(context.Context) (bool, string, error) {
		got = eval[map[string]int](t, ctx, heldCellsJS)
		w := want()
		return fmt.Sprint(got) == fmt.Sprint(w) && w["|"] == 0 && len(w) > 0, fmt.Sprintf("page %v, API %v", got, w), nil
	})
	trainCells := 0
	for k, n := range got {
		if strings.HasSuffix(k, "|JobSet/"+ns+"/train") {
			trainCells += n
		}
	}
	if trainCells != 12 {
		t.Errorf("JobSet train holds %d cells, want its 12 GPUs", trainCells)
	}
	noGang := eval[int](t, ctx, `document.querySelectorAll('#map .cell.nogang').length`)
	if noGang != 2 {
		t.Errorf("%d cells held outside any gang, want the Deployment's 2", noGang)
	}

	// Hover names each gang member's role as describe does: the component
	// and instance describe puts the pod in.
	out, errOut, code := sb.muster(t, "describe", "jobset/train", "-n", ns, "-o", "json")
	if code != 0 {
		t.Fatalf("muster describe jobset/train: exit %d: %s", code, errOut)
	}
	var d cli.Description
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	wantRole := map[string]string{}
	for _, c := range d.Components {
		for _, in := range c.Instances {
			for _, p := range in.Items {
				wantRole[ns+"/"+p.Name] = strings.TrimSuffix(c.Name+"/"+in.ID, "/")
			}
		}
	}
	titles := eval[map[string]string](t, ctx, `(() => { const m = {}; for (const c of document.querySelectorAll('#map .cell.held[data-wl="JobSet/`+ns+`/train"]')) m[c.dataset.pod] = c.title; return m; })()`)
	if len(titles) == 0 {
		t.Fatal("no cell of train on the page")
	}
	for pod, title := range titles {
		if r, ok := wantRole[pod]; !ok || !strings.Contains(title, "\nrole "+r+"\n") {
			t.Errorf("cell of %s: title %q, want the role describe gives (%q)", pod, title, r)
		}
	}

	// The gang that cannot fit: waiting, with the scheduler's own words.
	const pretrainRow = `#gangs tr[data-wl="JobSet/examples/pretrain"]`
	waitGangWaiting(t, ctx, sb, ns, pretrainRow, "jobset.sigs.k8s.io/jobset-name=pretrain")

	// What would let it start: muster fit's own answer, as the CLI gives it.
	out, errOut, code = sb.muster(t, "fit", "jobset/pretrain", "-n", ns, "-o", "json")
	if code != 0 {
		t.Fatalf("muster fit jobset/pretrain: exit %d: %s", code, errOut)
	}
	var report cli.FitReport
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatal(err)
	}
	cliVerdict := report.Clusters[0].Workloads[0].Verdict
	var fitCell pageRow
	waitFor(t, localcluster.ShortTimeout, "pretrain's row with fit's verdict", func(context.Context) (bool, string, error) {
		fitCell = eval[pageRow](t, ctx, `(() => { const c = document.querySelector('`+pretrainRow+` .fit'); return c ? {state: c.dataset.verdict || "", reason: c.textContent} : {}; })()`)
		return fitCell.State == cliVerdict, fmt.Sprintf("cell %+v, CLI %q", fitCell, cliVerdict), nil
	})
	if !strings.HasPrefix(fitCell.Reason, cliVerdict) {
		t.Errorf("pretrain's fit cell says %q, want fit's %q first", fitCell.Reason, cliVerdict)
	}
	if cliVerdict == "does not fit" && !strings.Contains(fitCell.Reason, report.Clusters[0].Workloads[0].Gangs[0].Reason) {
		t.Errorf("pretrain's fit cell %q lacks fit's reason %q", fitCell.Reason, report.Clusters[0].Workloads[0].Gangs[0].Reason)
	}
	t.Logf("pretrain: %s", fitCell.Reason)
	if n := eval[int](t, ctx, `[...document.querySelectorAll('#gangs tbody tr[data-state="running"] .fit')].filter((c) => c.textContent !== "").length`); n != 0 {
		t.Errorf("%d running workloads have a fit verdict, want none", n)
	}

	// Its detail is muster describe's view (and fit's answer).
	do(t, ctx, "clicking pretrain's row", chromedp.Click(chromedp.CSS(pretrainRow)))
	gangRow := regexp.MustCompile(`(?m)^\s+pretrain\s+5\s+0/5\s`)
	var detail pageDetail
	waitFor(t, localcluster.ShortTimeout, "the detail of pretrain", func(context.Context) (bool, string, error) {
		detail = eval[pageDetail](t, ctx, `({describe: document.getElementById('detail-describe').textContent, fit: document.getElementById('detail-fit').textContent, hash: location.hash})`)
		return gangRow.MatchString(detail.Describe) && detail.Fit != "", fmt.Sprintf("%+v", detail), nil
	})
	if !strings.Contains(detail.Hash, "w=") {
		t.Errorf("the URL does not keep the open workload: %q", detail.Hash)
	}
	if strings.HasPrefix(detail.Fit, "fit: ") || strings.Contains(detail.Fit, "error") {
		t.Errorf("fit's answer in the detail: %q", detail.Fit)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(shot)); err != nil {
		t.Errorf("the screenshot is not a PNG: %v", err)
	}
	if os.Getenv("MUSTER_UPDATE_SCREENSHOT") != "" {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "images", "dashboard.png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Live: deleting train frees its cells without a reload.
	eval[int](t, ctx, `window.__sameDocument = 1`)
	if err := sb.dyn.Resource(jobsetsGVR).Namespace(ns).Delete(context.Background(), "train", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, localcluster.ShortTimeout, "train's cells freed on the page", func(context.Context) (bool, string, error) {
		n := eval[int](t, ctx, `document.querySelectorAll('#map .cell[data-wl="JobSet/examples/train"]').length`)
		return n == 0, fmt.Sprintf("%d cells of train", n), nil
	})
	same := eval[int](t, ctx, `window.__sameDocument || 0`)
	if same != 1 {
		t.Error("the page was reloaded to show the change")
	}

	for _, u := range requests() {
		if !strings.HasPrefix(u, origin+"/") && !strings.HasPrefix(u, "data:") {
			t.Errorf("the page requested %s, outside its origin %s", u, origin)
		}
	}
}

// waitGangWaiting waits until the gangs table's row shows the workload
// waiting with exactly a pod's PodScheduled message (the scheduler's own
// words).
func waitGangWaiting(t *testing.T, ctx context.Context, sb *runningSandbox, ns, row, selector string) {
	t.Helper()
	waitFor(t, localcluster.ShortTimeout, row+" waiting with the scheduler's reason", func(context.Context) (bool, string, error) {
		got := eval[pageRow](t, ctx, `(() => { const r = document.querySelector('`+row+`'); return r ? {state: r.dataset.state, reason: r.querySelector('.reason').textContent} : {}; })()`)
		msgs := map[string]bool{}
		for _, p := range sb.pods(t, ns, selector) {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Message != "" {
					msgs[c.Message] = true
				}
			}
		}
		return got.State == "waiting" && msgs[got.Reason], fmt.Sprintf("row %+v, pods' reasons %v", got, msgs), nil
	})
}

// TestDashboardNative: on native gangs (muster-sandbox --native: the
// default scheduler places Kubernetes' own PodGroups) the map and the
// table show the same gangs as with muster-scheduler: each workload's
// cells are its bound members' GPUs, found through the native PodGroups,
// with their roles, and the gang too big waits with the scheduler's words.
func TestDashboardNative(t *testing.T) {
	sb := startSandbox(t, sandboxapp.Config{Nodes: 4, GPUsPerNode: 8, Zones: 2, Native: true})
	ns := sandboxapp.ExampleNamespace
	base := runDashboard(t, sb.kubeconfig, "--address", "127.0.0.1:0")
	ctx, _ := browser(t)
	do(t, ctx, "loading "+base, chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`body[data-version]`)))
	var got map[string]int
	waitFor(t, localcluster.ShortTimeout, "the map's held cells match the natively ganged bound pods", func(context.Context) (bool, string, error) {
		got = eval[map[string]int](t, ctx, heldCellsJS)
		w := apiHeldCells(t, sb, ns)
		return fmt.Sprint(got) == fmt.Sprint(w) && len(w) > 0, fmt.Sprintf("page %v, API %v", got, w), nil
	})
	byWorkload := map[string]int{}
	for k, n := range got {
		byWorkload[k[strings.Index(k, "|")+1:]] += n
	}
	if byWorkload["JobSet/"+ns+"/train"] != 12 || byWorkload["LeaderWorkerSet/"+ns+"/serve"] == 0 {
		t.Errorf("cells per workload %v: want JobSet train's 12 GPUs and LeaderWorkerSet serve's", byWorkload)
	}
	rows := eval[map[string]pageRow](t, ctx, `(() => { const m = {}; for (const r of document.querySelectorAll('#gangs tr[data-wl]')) m[r.dataset.wl] = {state: r.dataset.state, reason: r.querySelector('.reason').textContent}; return m; })()`)
	for _, w := range []string{"JobSet/" + ns + "/train", "LeaderWorkerSet/" + ns + "/serve"} {
		if rows[w].State != "running" {
			t.Errorf("gangs table row %s: %+v, want running (rows %v)", w, rows[w], rows)
		}
	}
	titles := eval[[]string](t, ctx, `[...document.querySelectorAll('#map .cell.held')].map(c => c.title)`)
	for _, title := range titles {
		if !strings.Contains(title, "\nrole ") || !strings.Contains(title, "\ngang ") {
			t.Errorf("a held cell's title %q names no role or gang", title)
		}
	}
	const pretrainRow = `#gangs tr[data-wl="JobSet/examples/pretrain"]`
	waitGangWaiting(t, ctx, sb, ns, pretrainRow, "jobset.sigs.k8s.io/jobset-name=pretrain")
}

// TestDashboardDRA: on muster-sandbox --dra the GPUs exist only as DRA
// devices; the map draws each node's published GPU devices as its cells,
// a bound gang's cells are the devices allocated to its pods' claims, and
// a second Job that the devices cannot hold waits with the scheduler's
// words.
func TestDashboardDRA(t *testing.T) {
	sb := startSandbox(t, sandboxapp.Config{Nodes: 4, GPUsPerNode: 4, Zones: 1, DRA: true, NoExamples: true})
	ctx := context.Background()
	ns := "dra"
	draNamespace(t, sb, ns)
	if _, err := sb.kube.BatchV1().Jobs(ns).Create(ctx, draJob("first"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	base := runDashboard(t, sb.kubeconfig, "--address", "127.0.0.1:0")
	bctx, _ := browser(t)
	do(t, bctx, "loading "+base, chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`body[data-version]`)))
	if cells := eval[int](t, bctx, `document.querySelectorAll('#map .cell').length`); cells != 16 {
		t.Errorf("the map has %d GPU cells, want the 16 DRA devices", cells)
	}
	var got map[string]int
	waitFor(t, localcluster.ShortTimeout, "the map's held cells match the devices allocated to Job first", func(context.Context) (bool, string, error) {
		got = eval[map[string]int](t, bctx, heldCellsJS)
		w := apiHeldCells(t, sb, ns)
		return fmt.Sprint(got) == fmt.Sprint(w) && len(w) == 4, fmt.Sprintf("page %v, API %v", got, w), nil
	})
	for k, n := range got {
		if !strings.HasSuffix(k, "|Job/"+ns+"/first") || n != 4 {
			t.Errorf("cells %s: %d, want Job first's 4 devices on each node", k, n)
		}
	}
	if _, err := sb.kube.BatchV1().Jobs(ns).Create(ctx, draJob("second"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGangWaiting(t, bctx, sb, ns, `#gangs tr[data-wl="Job/`+ns+`/second"]`, "app=second")
}

// TestDashboardToken: bound to 0.0.0.0 the dashboard answers 401 without
// the token it printed, in a browser and to a client, and serves the page
// with it.
func TestDashboardToken(t *testing.T) {
	sb := startSandbox(t, sandboxapp.Config{Nodes: 2, GPUsPerNode: 8, Zones: 1, NoExamples: true})
	printed := runDashboard(t, sb.kubeconfig, "--address", "0.0.0.0:0")
	u, err := url.Parse(printed)
	if err != nil {
		t.Fatal(err)
	}
	token := u.Query().Get("token")
	if len(token) < 32 {
		t.Fatalf("printed URL %s has no token of at least 32 characters", printed)
	}
	local := "http://127.0.0.1:" + u.Port()
	for _, path := range []string{"/", "/static/app.js", "/api/snapshot", "/api/events", "/api/workload?apiVersion=v1&kind=Pod&namespace=a&name=b"} {
		resp, err := http.Get(local + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", path, resp.StatusCode)
		}
	}
	ctx, _ := browser(t)
	do(t, ctx, "loading without the token", chromedp.Navigate(local+"/"))
	text := eval[string](t, ctx, `document.body.innerText`)
	if !strings.Contains(text, "unauthorized") {
		t.Errorf("the page without the token says %q", text)
	}
	do(t, ctx, "loading with the token", chromedp.Navigate(local+"/?token="+token), chromedp.WaitVisible(chromedp.CSS(`body[data-version]`)))
	cells := eval[int](t, ctx, `document.querySelectorAll('#map .cell').length`)
	if cells != 16 {
		t.Errorf("with the token the map has %d cells, want 16", cells)
	}
	href := eval[string](t, ctx, `location.href`)
	if strings.Contains(href, token) {
		t.Errorf("the token stays in the address bar: %s", href)
	}
	req, err := http.NewRequest(http.MethodGet, local+"/api/snapshot", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var snap struct{ Totals struct{ Capacity int } }
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil || snap.Totals.Capacity != 16 {
		t.Errorf("snapshot with the token: %v, capacity %d", err, snap.Totals.Capacity)
	}
}
