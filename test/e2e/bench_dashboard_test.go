package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/dashboard"
	"github.com/muster-io/muster/localcluster"
)

// dashRender is one first load of the page in a fresh tab, from the
// navigation's start (performance.timeOrigin), as app.js marks it.
type dashRender struct {
	Snapshot float64 `json:"snapshot"` // the snapshot fetched and parsed, ms
	Drawn    float64 `json:"drawn"`    // the DOM built, ms
	Painted  float64 `json:"painted"`  // the frame after the first paint, ms
	// Transfer and Decoded are the snapshot response's bytes on the wire
	// and after decoding (Resource Timing).
	Transfer int     `json:"transfer"`
	Decoded  int     `json:"decoded"`
	Cells    int     `json:"cells"`
	Rows     int     `json:"rows"`
	HeapMB   float64 `json:"heapMB"`
}

const dashRenderJS = `(() => {
  const m = (n) => { const e = performance.getEntriesByName(n)[0]; return e ? e.startTime : -1; };
  const r = performance.getEntriesByType('resource').find((e) => e.name.endsWith('/api/snapshot'));
  return { snapshot: m('muster-snapshot'), drawn: m('muster-drawn'), painted: m('muster-painted'),
    transfer: r ? r.transferSize : -1, decoded: r ? r.decodedBodySize : -1,
    cells: document.querySelectorAll('#map .cell').length, rows: document.querySelectorAll('#gangs tbody tr').length,
    heapMB: performance.memory ? performance.memory.usedJSHeapSize / 1048576 : -1 };
})()`

// dashBenchResult is what runDashboardBench measured.
type dashBenchResult struct {
	Renders []dashRender
	// RawBytes and GzipBytes are /api/snapshot's size plain and as a
	// browser gets it.
	RawBytes, GzipBytes int
	Allocated           int64
	Workloads           int
}

// runDashboardBench fills the cluster with nodes × 8 GPUs (4 zones, racks
// of 8) and pods bound pods, 7 of every 10 with one GPU in gangs of 8 (a
// PodGroup each) and the rest CPU-only outside any gang, plus 25 gangs of 8
// pending pods; starts `muster dashboard` on it; waits until its snapshot
// holds every GPU pod; then loads the page reps times
// (a fresh navigation of one headless Chromium tab), and reads app.js's
// marks.
func runDashboardBench(tb testing.TB, nodes, pods, reps int) dashBenchResult {
	ctx := context.Background()
	ns := testNamespace(tb, "bench-dash-")
	tb.Cleanup(func() { cleanupRunOrFail(tb, ns) })
	topo := localcluster.Topology{Nodes: nodes, Zones: 4, NodesPerRack: 8, RacksPerBlock: 4}
	if err := parallel(nodes, 16, func(i int) error {
		node, err := topo.Apply(i, localcluster.NodeSpec{Name: fmt.Sprintf("%s-%d", ns, i), GPUs: 8, Pool: ns}).Node()
		if err != nil {
			return err
		}
		_, err = controlPlane.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	const gangSize, waitingGangs = 8, 25
	// GPU pods go round the nodes by themselves (7 of each node's 8 GPUs
	// held at 10 pods per node); binding by nodeName skips every check.
	gpuPods := 0
	gangOf := make([]string, pods) // "" outside any gang
	nodeOf := make([]int, pods)
	for i := range pods {
		nodeOf[i] = i % nodes
		if i%10 < 7 {
			gangOf[i] = fmt.Sprintf("g%d", gpuPods/gangSize)
			nodeOf[i] = gpuPods % nodes
			gpuPods++
		}
	}
	gangs := (gpuPods + gangSize - 1) / gangSize
	pgc := podGroups(tb).SchedulingV1alpha1().PodGroups(ns)
	if err := parallel(gangs+waitingGangs, 16, func(i int) error {
		name := fmt.Sprintf("g%d", i)
		if i >= gangs {
			name = fmt.Sprintf("waiting%d", i-gangs)
		}
		_, err := pgc.Create(ctx, &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: schedv1alpha1.PodGroupSpec{MinMember: gangSize}}, metav1.CreateOptions{})
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	pod := func(name, node, gang string, gpu bool) *corev1.Pod {
		req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
		if gpu {
			req[localcluster.DefaultGPUResource] = resource.MustParse("1")
		}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench": "1"}},
			Spec: corev1.PodSpec{NodeName: node, SchedulerName: "none-" + ns, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/none", Resources: corev1.ResourceRequirements{Requests: req, Limits: req}}}},
		}
		if gang != "" {
			p.Labels[api.LabelPodGroup] = gang
		}
		return p
	}
	start := time.Now()
	if err := createPods(ctx, ns, pods, 16, func(i int) *corev1.Pod {
		return pod(fmt.Sprintf("p%d", i), fmt.Sprintf("%s-%d", ns, nodeOf[i]), gangOf[i], gangOf[i] != "")
	}); err != nil {
		tb.Fatal(err)
	}
	if err := createPods(ctx, ns, waitingGangs*gangSize, 16, func(i int) *corev1.Pod {
		return pod(fmt.Sprintf("w%d", i), "", fmt.Sprintf("waiting%d", i/gangSize), true)
	}); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("%d nodes × 8 GPUs, %d bound pods (%d with a GPU, in %d gangs) and %d pending made in %s",
		nodes, pods, gpuPods, gangs, waitingGangs*gangSize, time.Since(start).Round(time.Millisecond))

	base := runDashboard(tb, controlPlane.KubeconfigPath, "--address", "127.0.0.1:0")
	var res dashBenchResult
	var raw []byte
	waitFor(tb, localcluster.LongTimeout, "the dashboard's snapshot holds every GPU pod", func(context.Context) (bool, string, error) {
		resp, err := http.Get(base + "api/snapshot")
		if err != nil {
			return false, "", err
		}
		defer resp.Body.Close()
		if raw, err = io.ReadAll(resp.Body); err != nil {
			return false, "", err
		}
		var s dashboard.Snapshot
		if err := json.Unmarshal(raw, &s); err != nil {
			return false, "", err
		}
		res.Allocated, res.Workloads = s.Totals.Allocated, len(s.Workloads)
		return s.Totals.Allocated >= int64(gpuPods) && len(s.Workloads) >= gangs+waitingGangs,
			fmt.Sprintf("%d GPUs allocated of %d, %d workloads", s.Totals.Allocated, gpuPods, len(s.Workloads)), nil
	})
	res.RawBytes = len(raw)

	bctx, _ := browser(tb)
	for r := range reps {
		// The same tab each time: a tab opened beside it is in the
		// background, where Chromium holds animation frames back.
		tctx := bctx
		do(tb, tctx, "loading the dashboard", chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`body[data-version]`)))
		var m dashRender
		waitFor(tb, localcluster.ShortTimeout, "the first paint marked", func(context.Context) (bool, string, error) {
			m = eval[dashRender](tb, tctx, dashRenderJS)
			return m.Painted > 0, fmt.Sprintf("%+v", m), nil
		})
		tb.Logf("load %d: snapshot parsed at %.0f ms, DOM built at %.0f ms, painted at %.0f ms; snapshot %d bytes on the wire, %d decoded; %d cells, %d rows; JS heap %.1f MB",
			r+1, m.Snapshot, m.Drawn, m.Painted, m.Transfer, m.Decoded, m.Cells, m.Rows, m.HeapMB)
		if m.Decoded > 0 {
			res.GzipBytes = m.Transfer
		}
		res.Renders = append(res.Renders, m)
	}
	return res
}

// BenchmarkDashboard measures the dashboard's first render in headless
// Chromium on MUSTER_BENCH_DASH_NODES (1000) nodes × 8 GPUs holding
// MUSTER_BENCH_DASH_PODS (10 000) bound pods (BENCHMARKS.md, row
// dashboard): the time from navigation to the frame after the first
// paint, and the snapshot's bytes. At least 5 loads, each a fresh navigation.
//
//	hack/bench-run.sh dashboard BenchmarkDashboard
func BenchmarkDashboard(b *testing.B) {
	res := runDashboardBench(b, envInt("MUSTER_BENCH_DASH_NODES", 1000), envInt("MUSTER_BENCH_DASH_PODS", 10000), max(b.N, 5))
	med := func(f func(dashRender) float64) float64 {
		var v []float64
		for _, r := range res.Renders {
			v = append(v, f(r))
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	b.ReportMetric(med(func(r dashRender) float64 { return r.Painted }), "ms-painted")
	b.ReportMetric(med(func(r dashRender) float64 { return r.Drawn }), "ms-drawn")
	b.ReportMetric(med(func(r dashRender) float64 { return r.Snapshot }), "ms-snapshot")
	b.ReportMetric(float64(res.RawBytes), "snapshot-bytes")
	b.ReportMetric(float64(res.GzipBytes), "wire-bytes")
	b.ReportMetric(float64(res.Renders[0].Cells), "cells")
	b.Logf("median of %d loads: painted %.0f ms (goal ≤ 1000), snapshot %d bytes plain, %d gzipped (goal ≤ 2 MB); %d GPUs allocated, %d workloads",
		len(res.Renders), med(func(r dashRender) float64 { return r.Painted }), res.RawBytes, res.GzipBytes, res.Allocated, res.Workloads)
}

// TestBenchDashboardSmoke runs BenchmarkDashboard's machinery at a tiny
// size: every GPU is a cell, every gang a row, and the marks are set.
func TestBenchDashboardSmoke(t *testing.T) {
	const nodes = 10
	res := runDashboardBench(t, nodes, 100, 1)
	m := res.Renders[0]
	if m.Cells < nodes*8 || m.Rows < 9+25 || m.Snapshot <= 0 || m.Drawn < m.Snapshot || m.Painted < m.Drawn {
		t.Errorf("render %+v: want ≥ %d cells, ≥ 34 rows, and snapshot ≤ drawn ≤ painted marks", m, nodes*8)
	}
	if res.GzipBytes <= 0 || res.GzipBytes >= res.RawBytes {
		t.Errorf("snapshot %d bytes plain, %d on the wire: want it gzipped", res.RawBytes, res.GzipBytes)
	}
}
