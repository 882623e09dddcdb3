package e2e

// Scenario 1b of BENCHMARKS.md: scheduler-bound throughput. Scenario 1
// times pods from their first create, so on this machine it mostly measures
// how fast the in-process API server takes creates. Here every pod (and
// PodGroup) exists before the scheduler starts, as scheduler_perf does it:
// the clock runs from the scheduler's start to the last bind, so it measures
// the scheduler. Each variant is the shipped muster-scheduler binary as a
// separate process (the default and native variants run it with the default
// profile, without the gang plugin), so its CPU time is its own.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/test/benchreport"
)

// schedBoundRun is one variant's run of scenario 1b.
type schedBoundRun struct {
	Variant string
	Rep     int
	Pods    int
	// Elapsed is scheduler process start → last bind; FirstBind is start →
	// first bind (process start, informer sync of every node and pod).
	Elapsed, FirstBind time.Duration
	// CPU is the scheduler process's user+system time over its life.
	CPU time.Duration
	// Writes counts the API server's write requests (POST, PUT, PATCH,
	// DELETE) while the scheduler ran; nothing else writes then.
	Writes float64
	// WritesByKind is Writes by request kind (writesDelta).
	WritesByKind string
	PeakMiB      float64
}

func (r schedBoundRun) podsPerSec() float64 {
	return float64(r.Pods) / (r.Elapsed - r.FirstBind).Seconds()
}

// procCPU is the user+system CPU time of pid (from /proc/<pid>/stat, in
// clock ticks of 1/100 s, the Linux USER_HZ).
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after its
	// closing parenthesis are fixed: utime is field 14, stime 15.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	u, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, err
	}
	st, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, err
	}
	return time.Duration(u+st) * 10 * time.Millisecond, nil
}

// apiWrites sums the API server's write requests so far.
func apiWrites() float64 {
	var n float64
	for _, v := range apiWritesByKind() {
		n += v
	}
	return n
}

// apiWritesByKind counts the API server's write requests so far by
// "VERB resource[/subresource]" (say, "PATCH pods/status"): which writes a
// variant adds is what separates the variants when the API server is the
// shared bottleneck.
func apiWritesByKind() map[string]float64 {
	out := map[string]float64{}
	for k, v := range counterSnapshot("apiserver_request_total") {
		var verb, resource, sub string
		for _, l := range strings.Split(k, ",")[1:] {
			name, val, _ := strings.Cut(l, "=")
			switch name {
			case "verb":
				verb = val
			case "resource":
				resource = val
			case "subresource":
				sub = val
			}
		}
		switch verb {
		case "POST", "PUT", "PATCH", "DELETE":
		default:
			continue
		}
		if sub != "" {
			resource += "/" + sub
		}
		out[verb+" "+resource] += v
	}
	return out
}

// writesDelta formats after−before per kind as "kind=n", largest first.
func writesDelta(before, after map[string]float64) string {
	type kv struct {
		k string
		n float64
	}
	var d []kv
	for k, v := range after {
		if n := v - before[k]; n > 0 {
			d = append(d, kv{k, n})
		}
	}
	sort.Slice(d, func(i, j int) bool { return d[i].n > d[j].n || d[i].n == d[j].n && d[i].k < d[j].k })
	parts := make([]string, len(d))
	for i, x := range d {
		parts[i] = fmt.Sprintf("%s=%.0f", x.k, x.n)
	}
	return strings.Join(parts, ", ")
}

// schedulerBinaryConfig writes a scheduler configuration for variant under
// schedulerName that the muster-scheduler binary reads with --config.
func schedulerBinaryConfig(tb testing.TB, variant, schedulerName string, contention bool) string {
	tb.Helper()
	var cfg *configv1.KubeSchedulerConfiguration
	if variant == variantMuster {
		cfg = benchSchedulerConfig(tb, schedulerName)
	} else {
		cfg = localcluster.DefaultProfile(schedulerName)
		cfg.APIVersion, cfg.Kind = configv1.SchemeGroupVersion.String(), "KubeSchedulerConfiguration"
	}
	cfg.ClientConnection.Kubeconfig = controlPlane.KubeconfigPath
	// The same client limits for every variant: MUSTER_BENCH_SB_QPS (1000),
	// burst twice that.
	qps := envInt("MUSTER_BENCH_SB_QPS", 1000)
	cfg.ClientConnection.QPS = float32(qps)
	cfg.ClientConnection.Burst = int32(2 * qps)
	cfg.LeaderElection.LeaderElect = ptrTo(false)
	if contention {
		cfg.EnableProfiling = ptrTo(true)
		cfg.EnableContentionProfiling = ptrTo(true)
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "scheduler-"+variant+".yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// runSchedBound creates s's nodes, PodGroups and pods with nobody serving
// their scheduler name, then starts the scheduler binary and times it.
// profileTo, when set, saves muster's CPU profile of the first seconds and
// its block (lock wait) profile at the end under that file prefix.
//
// muster runs with the feature gates of the shipped Deployment. A variant
// may carry more kube-scheduler feature gates after a "+", e.g.
// "muster+SchedulerAsyncAPICalls=false" (several joined by "+"): the same
// scheduler and pods, the binary started with --feature-gates set to them.
func runSchedBound(ctx context.Context, b *testing.B, bin string, s benchSizes, spec string, rep int, profileTo string) (schedBoundRun, error) {
	res := schedBoundRun{Variant: spec, Rep: rep, Pods: s.pods()}
	variant, gates, _ := strings.Cut(spec, "+")
	gates = strings.ReplaceAll(gates, "+", ",")
	base, dra := draVariant(variant)
	ns, gangs, err := prepareBenchRun(ctx, b, s, variant, "bench-sb-")
	if ns != "" {
		defer cleanupRunOrFail(b, ns)
	}
	if err != nil {
		return res, err
	}
	sched := "bench-sb-" + variant + "-" + ns
	tr, err := trackPods(ctx, ns, s.GangSize, nil)
	if err != nil {
		return res, err
	}
	defer tr.stop()
	if err := createGangPodsConcurrently(ctx, s, variant, sched, ns, gangs); err != nil {
		return res, err
	}
	if !waitUntil(ctx, time.Minute, func() bool { tr.mu.Lock(); defer tr.mu.Unlock(); return len(tr.pods) == s.pods() }) {
		return res, fmt.Errorf("%s: the tracker saw fewer than %d pods", variant, s.pods())
	}
	if dra {
		// The ResourceClaim controller's pace is not the scheduler's: the
		// clock starts once every pod's claim exists.
		if err := waitClaims(ctx, ns, s.pods()); err != nil {
			return res, fmt.Errorf("%s: %w", variant, err)
		}
	}

	profile := profileTo != "" && (spec == variantMuster || spec == variantMuster+"-dra")
	args := []string{"--config", schedulerBinaryConfig(b, base, sched, profile), "--secure-port=0"}
	port := 0
	if profile {
		port = freePort(b)
		args = []string{args[0], args[1], "--secure-port", strconv.Itoa(port), "--bind-address=127.0.0.1",
			"--authorization-always-allow-paths=/healthz,/readyz,/livez,/debug/pprof/*"}
	}
	switch base {
	case variantMuster:
		// The shipped settings: the gates the Deployment sets, then the
		// variant's own (the later value of a gate wins).
		shipped, err := shippedSchedulerGates()
		if err != nil {
			return res, err
		}
		gates = strings.Trim(shipped+","+gates, ",")
	case variantNative, variantNativePgr:
		gates = strings.Trim(gates+",GenericWorkload=true", ",")
	}
	if gates != "" {
		args = append(args, "--feature-gates="+gates)
	}
	// MUSTER_BENCH_SB_ARGS: more flags for the scheduler binary, e.g. -v=3.
	args = append(args, strings.Fields(os.Getenv("MUSTER_BENCH_SB_ARGS"))...)
	var kaiBin string
	if base == variantKAI {
		// Built before the clock starts (once per source; cached).
		if kaiBin, err = kaiBinaries(ctx); err != nil {
			return res, err
		}
	}
	writesBefore := apiWritesByKind()
	start := time.Now()
	var cmd *exec.Cmd
	procs := []*exec.Cmd{}
	if base == variantKAI {
		procs = startKAI(b, kaiBin, sched)
		cmd = procs[0]
	} else {
		cmd = startBinary(b, filepath.Join(bin, "muster-scheduler"), args...)
		procs = append(procs, cmd)
	}
	defer func() {
		for _, c := range procs {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}()
	cpuProfile := make(chan error, 1)
	if profile {
		go func() {
			// The secure port comes up after the informers start.
			if !waitUntil(ctx, time.Minute, func() bool {
				r, err := insecureClient.Get(fmt.Sprintf("https://127.0.0.1:%d/healthz", port))
				if err == nil {
					r.Body.Close()
				}
				return err == nil
			}) {
				cpuProfile <- fmt.Errorf("scheduler serves no /healthz after a minute")
				return
			}
			cpuProfile <- fetchProfile(fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/profile?seconds=%d", port, envInt("MUSTER_BENCH_SB_PROFILE_SECONDS", 20)), profileTo+".cpu.pprof")
		}()
	} else {
		cpuProfile <- nil
	}
	if !waitUntil(ctx, s.Timeout, func() bool { n, _ := tr.counts(); return n == s.pods() }) {
		n, _ := tr.counts()
		return res, fmt.Errorf("%s: %d of %d pods bound after %s", variant, n, s.pods(), s.Timeout)
	}
	writesAfter := apiWritesByKind()
	for k, v := range writesAfter {
		res.Writes += v - writesBefore[k]
	}
	res.WritesByKind = writesDelta(writesBefore, writesAfter)
	// KAI is two processes (scheduler and binder): both count.
	for _, c := range procs {
		cpu, err := procCPU(c.Process.Pid)
		if err != nil {
			return res, err
		}
		_, peak, err := procMem(c.Process.Pid)
		if err != nil {
			return res, err
		}
		res.CPU += cpu
		res.PeakMiB += peak
	}
	tr.mu.Lock()
	times := append([]time.Time(nil), tr.boundTimes...)
	tr.mu.Unlock()
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	res.FirstBind, res.Elapsed = times[0].Sub(start), times[len(times)-1].Sub(start)
	if profile {
		if err := <-cpuProfile; err != nil {
			return res, err
		}
		if err := fetchProfile(fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/block", port), profileTo+".block.pprof"); err != nil {
			return res, err
		}
	}
	return res, nil
}

// BenchmarkSchedulerBound is scenario 1b: MUSTER_BENCH_SB_NODES (1000)
// nodes × 8 GPUs, MUSTER_BENCH_SB_PODS (4000) pods in gangs of 8, every
// variant MUSTER_BENCH_REPS (3) times in rotated order, medians reported.
// MUSTER_BENCH_VARIANTS picks the variants, each optionally with feature
// gates (see runSchedBound). MUSTER_BENCH_SB_PROFILE=1 saves muster's CPU
// and block profiles of its last repetition under MUSTER_BENCH_OUT. Run it
// with -benchtime=1x.
func BenchmarkSchedulerBound(b *testing.B) {
	s := benchSizes{
		Nodes: envInt("MUSTER_BENCH_SB_NODES", 1000), GPUsPerNode: 8,
		GangSize: 8, Reps: envInt("MUSTER_BENCH_REPS", 3), Workers: 16,
		Timeout: time.Duration(envInt("MUSTER_BENCH_SB_TIMEOUT_SECONDS", 1200)) * time.Second,
	}
	s.Gangs = envInt("MUSTER_BENCH_SB_PODS", 4000) / s.GangSize
	variants := benchVariantsFromEnv()
	ctx := context.Background()
	bin := memBinaries(b)
	out := benchOutDir(b)
	for range b.N {
		byVariant := map[string][]schedBoundRun{}
		rows := [][]string{{"variant", "rep", "pods", "seconds_to_last_bind", "seconds_to_first_bind", "pods_per_sec_after_first_bind", "cpu_ms_per_pod", "api_writes_per_pod", "peak_rss_mib"}}
		for rep := range s.Reps {
			for i := range variants {
				v := variants[(i+rep)%len(variants)]
				prof := ""
				if os.Getenv("MUSTER_BENCH_SB_PROFILE") == "1" && rep == s.Reps-1 {
					prof = filepath.Join(out, fmt.Sprintf("schedbound-%d", s.Nodes))
				}
				r, err := runSchedBound(ctx, b, bin, s, v, rep, prof)
				if err != nil {
					b.Fatal(err)
				}
				b.Logf("rep %d %-7s %d pods: first bind %.1fs, last bind %.1fs, %.0f pods/s after the first bind, %.2f ms CPU/pod, %.2f writes/pod, peak %.0f MiB",
					rep, v, r.Pods, r.FirstBind.Seconds(), r.Elapsed.Seconds(), r.podsPerSec(), perPodMs(r), r.Writes/float64(r.Pods), r.PeakMiB)
				b.Logf("rep %d %-7s API writes: %s", rep, v, r.WritesByKind)
				byVariant[v] = append(byVariant[v], r)
				rows = append(rows, []string{v, strconv.Itoa(rep), strconv.Itoa(r.Pods), f3(r.Elapsed.Seconds()), f3(r.FirstBind.Seconds()), f3(r.podsPerSec()), f3(perPodMs(r)), f3(r.Writes / float64(r.Pods)), f3(r.PeakMiB)})
			}
		}
		var md strings.Builder
		fmt.Fprintf(&md, "%d nodes × %d GPUs, %d pods in gangs of %d, %d repetitions (medians)\n\n", s.Nodes, s.GPUsPerNode, s.pods(), s.GangSize, s.Reps)
		md.WriteString("| variant | start → last bind (s) | start → first bind (s) | pods/s after first bind | CPU ms/pod | API writes/pod | peak RSS (MiB) |\n|---|---|---|---|---|---|---|\n")
		med := map[string]float64{}
		for _, v := range variants {
			col := func(f func(schedBoundRun) float64) float64 {
				var xs []float64
				for _, r := range byVariant[v] {
					xs = append(xs, f(r))
				}
				return median(xs)
			}
			last := col(func(r schedBoundRun) float64 { return r.Elapsed.Seconds() })
			med[v] = last
			fmt.Fprintf(&md, "| %s | %.1f | %.1f | %.0f | %.2f | %.2f | %.0f |\n", v, last,
				col(func(r schedBoundRun) float64 { return r.FirstBind.Seconds() }),
				col(schedBoundRun.podsPerSec), col(perPodMs),
				col(func(r schedBoundRun) float64 { return r.Writes / float64(r.Pods) }),
				col(func(r schedBoundRun) float64 { return r.PeakMiB }))
			b.ReportMetric(float64(s.pods())/last, v+"-pods/s")
		}
		if m := med[variantMuster]; m > 0 {
			for _, v := range variants {
				if v != variantMuster && med[v] > 0 {
					fmt.Fprintf(&md, "\nmuster / %s (start → last bind, medians): %.2f×", v, med[v]/m)
					b.ReportMetric(med[v]/m, "muster/"+v)
				}
			}
			md.WriteString("\n")
		}
		b.Log("\n" + md.String())
		name := fmt.Sprintf("schedbound-%d", s.Nodes)
		if err := benchreport.WriteCSV(filepath.Join(out, name+".csv"), rows); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, name+".md"), []byte(md.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func perPodMs(r schedBoundRun) float64 {
	return float64(r.CPU.Milliseconds()) / float64(r.Pods)
}

// BenchmarkPodGrouperCatchUp is scenario 3b: MUSTER_BENCH_CU_PODS (20000)
// pods of JobSet-shaped gangs of 8 already exist with no PodGroup; the
// shipped muster-podgrouper binary starts, and the clock runs until every
// pod carries its PodGroup label (the label is written after the PodGroup).
// That is the pod-grouper's own rate, not the API server's create rate.
func BenchmarkPodGrouperCatchUp(b *testing.B) {
	pods := envInt("MUSTER_BENCH_CU_PODS", 20000)
	const perGang = 8
	gangs := pods / perGang
	ctx := context.Background()
	bin := memBinaries(b)
	out := benchOutDir(b)
	for range b.N {
		ns := testNamespace(b, "bench-cu-")
		b.Cleanup(func() { cleanupRunOrFail(b, ns) })
		sched := "cu-" + ns
		if err := createJobSetShapedPods(ctx, b, ns, sched, gangs, perGang); err != nil {
			b.Fatal(err)
		}
		tr, err := trackLabels(ctx, ns)
		if err != nil {
			b.Fatal(err)
		}
		defer tr.stop()
		// The pods are "already in the cluster": let the control plane
		// finish with their creates before the clock starts, as the
		// ceiling below gets a settled control plane too.
		settled, err := settleControlPlane(ctx, 2*time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("control plane settled after %s", settled.Round(100*time.Millisecond))
		pgrAddr := fmt.Sprintf("127.0.0.1:%d", freePort(b))
		writesBefore := apiWrites()
		start := time.Now()
		args := []string{"--kubeconfig", controlPlane.KubeconfigPath,
			"--scheduler-name", sched, "--leader-elect=false", "--bind-address", pgrAddr, "--workers", strconv.Itoa(envInt("MUSTER_BENCH_CU_WORKERS", 16)),
			"--kube-api-qps", "2000", "--kube-api-burst", "4000"}
		profile := os.Getenv("MUSTER_BENCH_CU_PROFILE") == "1"
		if profile {
			args = append(args, "--profiling")
		}
		cmd := startBinary(b, filepath.Join(bin, "muster-podgrouper"), args...)
		cpuProfile := make(chan error, 1)
		if profile {
			// A CPU profile of the catch-up's middle, where the rate is
			// the pod-grouper's and the API server's, not start-up's.
			go func() {
				time.Sleep(5 * time.Second)
				cpuProfile <- fetchProfile(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pgrAddr, envInt("MUSTER_BENCH_CU_PROFILE_SECONDS", 30)),
					filepath.Join(out, "podgrouper-catchup.cpu.pprof"))
			}()
		} else {
			cpuProfile <- nil
		}
		lastLog := start
		if !waitUntil(ctx, 20*time.Minute, func() bool {
			n := tr.labelled()
			if time.Since(lastLog) > 10*time.Second {
				lastLog = time.Now()
				b.Logf("%4.0fs: %d of %d pods labelled", time.Since(start).Seconds(), n, gangs*perGang)
			}
			return n == gangs*perGang
		}) {
			b.Fatalf("after 20 minutes: %d of %d pods labelled", tr.labelled(), gangs*perGang)
		}
		elapsed := time.Since(start)
		writes := apiWrites() - writesBefore
		if err := <-cpuProfile; err != nil {
			b.Fatal(err)
		}
		cpu, err := procCPU(cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		_, hwm, err := procMem(cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		pgs, err := podGroups(b).SchedulingV1alpha1().PodGroups(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			b.Fatal(err)
		}
		if len(pgs.Items) != gangs {
			b.Fatalf("%d PodGroups, want %d", len(pgs.Items), gangs)
		}
		// The ceiling: how fast 16 clients can patch one label onto each
		// of the same pods right now, the pod-grouper's least work per pod.
		ceilStart := time.Now()
		if err := parallel(gangs*perGang, 16, func(i int) error {
			_, err := controlPlane.Client.CoreV1().Pods(ns).Patch(ctx, fmt.Sprintf("g%d-workers-0-%d", i/perGang, i%perGang),
				types.MergePatchType, []byte(`{"metadata":{"labels":{"bench-touched":"1"}}}`), metav1.PatchOptions{})
			return err
		}); err != nil {
			b.Fatal(err)
		}
		ceiling := float64(gangs*perGang) / time.Since(ceilStart).Seconds()
		b.ReportMetric(ceiling, "patches/s-ceiling")
		first := tr.firstAt().Sub(start)
		rate := float64(gangs*perGang) / elapsed.Seconds()
		b.ReportMetric(rate, "pods/s")
		b.ReportMetric(float64(gangs*perGang)/(elapsed-first).Seconds(), "pods/s-after-first")
		md := fmt.Sprintf("| pods | gangs | start → first label (s) | start → last label (s) | pods/s (whole) | pods/s after first label | CPU ms/pod | API writes/pod | peak RSS (MiB) | API server ceiling: label patches/s, 16 clients |\n|---|---|---|---|---|---|---|---|---|---|\n| %d | %d | %.1f | %.1f | %.0f | %.0f | %.3f | %.2f | %.0f | %.0f |\n",
			gangs*perGang, gangs, first.Seconds(), elapsed.Seconds(), rate, float64(gangs*perGang)/(elapsed-first).Seconds(),
			float64(cpu.Microseconds())/1000/float64(gangs*perGang), writes/float64(gangs*perGang), hwm, ceiling)
		b.Log("\n" + md)
		if err := os.WriteFile(filepath.Join(out, "podgrouper-catchup.md"), []byte(md), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// settleControlPlane waits until this process, which hosts the API
// server, etcd and the controllers, uses under a quarter of a core for
// three seconds in a row, or bound passes; it returns how long it waited.
func settleControlPlane(ctx context.Context, bound time.Duration) (time.Duration, error) {
	start := time.Now()
	prev, err := procCPU(os.Getpid())
	if err != nil {
		return 0, err
	}
	quiet := 0
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for quiet < 3 && time.Since(start) < bound {
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-tick.C:
		}
		cur, err := procCPU(os.Getpid())
		if err != nil {
			return 0, err
		}
		if cur-prev < 250*time.Millisecond {
			quiet++
		} else {
			quiet = 0
		}
		prev = cur
	}
	return time.Since(start), nil
}

// labelTracker counts, through an informer, the benchmark's pods that carry
// a PodGroup label, and when the first got it.
type labelTracker struct {
	mu    sync.Mutex
	seen  map[string]bool
	first time.Time
	stop  func()
}

func trackLabels(ctx context.Context, ns string) (*labelTracker, error) {
	t := &labelTracker{seen: map[string]bool{}}
	observe := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Labels["bench"] != "1" || p.Labels[api.LabelPodGroup] == "" {
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if !t.seen[p.Name] && len(t.seen) == 0 {
			t.first = time.Now()
		}
		t.seen[p.Name] = true
	}
	stop, err := watchBenchPods(ctx, observe, informers.WithNamespace(ns))
	if err != nil {
		return nil, err
	}
	t.stop = stop
	return t, nil
}

func (t *labelTracker) labelled() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.seen)
}

func (t *labelTracker) firstAt() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.first
}
