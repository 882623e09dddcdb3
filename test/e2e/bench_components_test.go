package e2e

// Scenarios 3 and 5 of BENCHMARKS.md: the pod-grouper's latency at several
// creation rates (BenchmarkPodGrouperLatency, swept), and the peak memory of
// the shipped scheduler and pod-grouper binaries at 1000 nodes / 10k pods.

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/informers"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/test/benchreport"
)

// BenchmarkPodGrouperRates runs BenchmarkPodGrouperLatency at 100, 250 and
// 500 pods/s (MUSTER_BENCH_PODGROUPER_RATES, comma-separated, overrides).
// Each sub-benchmark reports the rate actually reached (pods/s-sent).
func BenchmarkPodGrouperRates(b *testing.B) {
	rates := []int{100, 250, 500}
	if v := os.Getenv("MUSTER_BENCH_PODGROUPER_RATES"); v != "" {
		rates = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("MUSTER_BENCH_PODGROUPER_RATES=%q: %q is not a positive rate", v, f)
			}
			rates = append(rates, n)
		}
	}
	saved := pgrBenchRate
	defer func() { pgrBenchRate = saved }()
	for _, r := range rates {
		pgrBenchRate = r
		b.Run(fmt.Sprintf("rate=%d", r), BenchmarkPodGrouperLatency)
	}
}

// memBinaries returns the directory holding muster-scheduler and
// muster-podgrouper: MUSTER_BENCH_BIN (make bench passes bin/, built with
// the release ldflags), else a fresh build with the Makefile's K8S ldflags.
func memBinaries(b *testing.B) string {
	if d := os.Getenv("MUSTER_BENCH_BIN"); d != "" {
		return d
	}
	dir := b.TempDir()
	ld := "-X k8s.io/component-base/version.gitVersion=v1.37.2 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
	cmd := exec.Command("go", "build", "-ldflags", ld, "-o", dir+"/", "./cmd/muster-scheduler", "./cmd/muster-podgrouper")
	cmd.Dir = pgrRepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// waitPodGrouperReady waits up to a minute for a muster-podgrouper serving
// on addr to answer /readyz with 200.
func waitPodGrouperReady(ctx context.Context, tb testing.TB, addr string) {
	if !waitUntil(ctx, time.Minute, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}) {
		tb.Fatal("muster-podgrouper not ready after a minute")
	}
}

// procMem reads VmRSS and VmHWM (peak RSS) of pid in MiB.
func procMem(pid int) (rss, hwm float64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			hwm = kb / 1024
		}
	}
	return rss, hwm, sc.Err()
}

// startBinary starts a child process that is killed when b ends. Its log
// goes to MUSTER_BENCH_OUT/<binary>.log when that is set (kept for a look
// afterwards), else to a temporary file shown only if b fails.
func startBinary(b *testing.B, path string, args ...string) *exec.Cmd {
	return startBinaryEnv(b, nil, path, args...)
}

// startBinaryEnv is startBinary with env added to the benchmark's own
// environment (GOMEMLIMIT for one child, not for the test process that
// hosts the API server).
func startBinaryEnv(b testing.TB, env []string, path string, args ...string) *exec.Cmd {
	logDir := os.Getenv("MUSTER_BENCH_OUT")
	if logDir == "" {
		logDir = b.TempDir()
	} else if err := os.MkdirAll(logDir, 0o755); err != nil {
		b.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(logDir, filepath.Base(path)+".log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		if b.Failed() {
			data, _ := os.ReadFile(logf.Name())
			if len(data) > 4000 {
				data = data[len(data)-4000:]
			}
			b.Logf("%s log tail:\n%s", filepath.Base(path), data)
		}
	})
	return cmd
}

// BenchmarkMemory is scenario 5: the shipped muster-scheduler and
// muster-podgrouper binaries, as separate processes against the in-process
// control plane, handle MUSTER_BENCH_MEM_NODES (1000) nodes × 8 GPUs and
// MUSTER_BENCH_MEM_PODS (10000) pods in JobSet-shaped gangs of 8 (so the
// pod-grouper groups every pod and the scheduler places 8000 of them; the
// rest wait whole). Reports each process's peak RSS (VmHWM) in MiB. Run it
// with -benchtime=1x.
//
// For sizes beyond the default: MUSTER_BENCH_MEM_MINUTES bounds the wait
// (15), MUSTER_BENCH_MEM_CLIENTS is the number of pod creators (16), and
// MUSTER_BENCH_MEM_SCHED_GOMEMLIMIT / MUSTER_BENCH_MEM_PGR_GOMEMLIMIT set
// GOMEMLIMIT for one child (as the Deployment does), never for the test
// process, which hosts the API server. MUSTER_BENCH_MEM_SCHED_ARGS adds
// flags to the scheduler's (space-separated; e.g.
// --feature-gates=GenericWorkload=false, which the scheduler otherwise
// turns on here because the control plane serves native PodGroups).
func BenchmarkMemory(b *testing.B) {
	nodes := envInt("MUSTER_BENCH_MEM_NODES", 1000)
	pods := envInt("MUSTER_BENCH_MEM_PODS", 10000)
	waitFor := time.Duration(envInt("MUSTER_BENCH_MEM_MINUTES", 15)) * time.Minute
	clients := envInt("MUSTER_BENCH_MEM_CLIENTS", 16)
	memLimit := map[string]string{
		"muster-scheduler":  os.Getenv("MUSTER_BENCH_MEM_SCHED_GOMEMLIMIT"),
		"muster-podgrouper": os.Getenv("MUSTER_BENCH_MEM_PGR_GOMEMLIMIT"),
	}
	const perGang = 8
	gangs := pods / perGang
	ctx := context.Background()
	bin := memBinaries(b)
	out := benchOutDir(b)
	for range b.N {
		ns := testNamespace(b, "bench-mem-")
		sched := "mem-" + ns
		b.Cleanup(func() { cleanupRunOrFail(b, ns) })
		if err := createBenchNodes(ctx, ns, nodes, 8, false); err != nil {
			b.Fatal(err)
		}
		r := &memRun{memLimit: memLimit}
		heap, schedPort, pgrAddr := r.startBinaries(ctx, b, bin, sched)
		r.measureIdle(b)
		// Progress comes from a watch, not from listing every pod every
		// few seconds: at 50 000 pods such lists cost the shared API
		// server more than the binaries under test.
		count, err := countMemPods(ctx, ns)
		if err != nil {
			b.Fatal(err)
		}
		defer count.stop()

		start := time.Now()
		stopSampling := r.sampleRSS(start)
		progress := func(prefix string) {
			exist, labelled, bound := count.counts()
			b.Logf("%s%4.0fs: %d pods exist, %d labelled, %d bound; RSS %s; load %s", prefix, time.Since(start).Seconds(), exist, labelled, bound, rssLine(r.procs), loadAvg())
		}
		writesBefore := apiWritesByKind()
		created := make(chan error, 1)
		go func() { created <- createJobSetShapedPodsN(ctx, b, ns, sched, gangs, perGang, clients) }()
		// Done when every pod is labelled and the cluster is full: 8 GPUs
		// per node, one per pod.
		want := min(gangs*perGang, nodes*8/perGang*perGang)
		ok, createErr := memWaitFull(ctx, b, count, created, waitFor, gangs*perGang, want, start, progress)
		elapsed := time.Since(start)
		time.Sleep(3 * time.Second) // steady state after the last bind
		stopSampling()
		progress("end ")
		// Everyone's writes, the harness's creates included: the API
		// server both binaries wait on is shared.
		b.Logf("API writes during the run: %s", writesDelta(writesBefore, apiWritesByKind()))
		_, labelled, bound := count.counts()
		if createErr != nil {
			b.Fatal(createErr)
		}
		if !ok {
			b.Fatalf("after %s: %d of %d pods labelled, %d of %d bound", waitFor, labelled, gangs*perGang, bound, want)
		}
		if heap {
			saveHeapProfile(b, fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/heap", schedPort), filepath.Join(out, "memory-muster-scheduler.heap.pprof"))
			saveHeapProfile(b, "http://"+pgrAddr+"/debug/pprof/heap", filepath.Join(out, "memory-muster-podgrouper.heap.pprof"))
		}
		r.report(b, out, nodes, gangs*perGang, labelled, bound, elapsed)
	}
}

// memRun is one run of BenchmarkMemory: the two processes and what is
// measured of them.
type memRun struct {
	memLimit map[string]string              // process name → its GOMEMLIMIT ("" for none)
	procs    map[string]int                 // process name → pid
	idle     map[string]float64             // RSS after start-up (MiB)
	idleCPU  map[string]time.Duration       // CPU time used by start-up
	series   map[string]*benchreport.Series // RSS over the run, for the chart
}

// startBinaries starts the shipped binaries of bin for sched and waits
// until both are ready. heap says whether both serve heap profiles, the
// scheduler on schedPort, the pod-grouper on pgrAddr.
func (r *memRun) startBinaries(ctx context.Context, b *testing.B, bin, sched string) (heap bool, schedPort int, pgrAddr string) {
	childEnv := func(name string) []string {
		if v := r.memLimit[name]; v != "" {
			return []string{"GOMEMLIMIT=" + v}
		}
		return nil
	}
	// The shipped profile under a name of its own, no leader election.
	cfgPath := schedulerBinaryConfig(b, variantMuster, sched, false)
	pgrAddr = fmt.Sprintf("127.0.0.1:%d", freePort(b))
	// MUSTER_BENCH_HEAP=1 also saves both processes' heap profiles
	// (memory-<process>.heap.pprof) once the cluster is full: the
	// scheduler serves them on its secure port to anonymous callers
	// for that path only, the pod-grouper with --profiling.
	heap = os.Getenv("MUSTER_BENCH_HEAP") == "1"
	schedArgs := []string{"--config", cfgPath, "--secure-port=0"}
	pgrArgs := []string{"--kubeconfig", controlPlane.KubeconfigPath,
		"--scheduler-name", sched, "--leader-elect=false", "--bind-address", pgrAddr, "--workers", "16", "--kube-api-qps", "1000", "--kube-api-burst", "2000"}
	extra := strings.Fields(os.Getenv("MUSTER_BENCH_MEM_SCHED_ARGS"))
	schedArgs = append(schedArgs, extra...)
	if heap {
		schedPort = freePort(b)
		schedArgs = []string{"--config", cfgPath, "--secure-port", strconv.Itoa(schedPort), "--bind-address=127.0.0.1",
			"--authorization-always-allow-paths=/healthz,/readyz,/livez,/debug/pprof/*"}
		schedArgs = append(schedArgs, extra...)
		pgrArgs = append(pgrArgs, "--profiling")
	}
	schedCmd := startBinaryEnv(b, childEnv("muster-scheduler"), filepath.Join(bin, "muster-scheduler"), schedArgs...)
	pgrCmd := startBinaryEnv(b, childEnv("muster-podgrouper"), filepath.Join(bin, "muster-podgrouper"), pgrArgs...)
	waitPodGrouperReady(ctx, b, pgrAddr)
	time.Sleep(2 * time.Second) // the scheduler's informers sync
	r.procs = map[string]int{"muster-scheduler": schedCmd.Process.Pid, "muster-podgrouper": pgrCmd.Process.Pid}
	return heap, schedPort, pgrAddr
}

// measureIdle takes both processes' RSS and CPU time after start-up.
func (r *memRun) measureIdle(b *testing.B) {
	r.idle = map[string]float64{}
	r.idleCPU = map[string]time.Duration{}
	for name, pid := range r.procs {
		rss, _, err := procMem(pid)
		if err != nil {
			b.Fatalf("%s exited early: %v", name, err)
		}
		r.idle[name] = rss
		if r.idleCPU[name], err = procCPU(pid); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
	}
}

// sampleRSS samples RSS every second for the chart until stop is called.
func (r *memRun) sampleRSS(start time.Time) (stop func()) {
	r.series = map[string]*benchreport.Series{}
	for name := range r.procs {
		r.series[name] = &benchreport.Series{Name: name}
	}
	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Add(1)
	go func() {
		defer sampling.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
			for name, pid := range r.procs {
				if rss, _, err := procMem(pid); err == nil {
					r.series[name].Points = append(r.series[name].Points, benchreport.Point{X: time.Since(start).Seconds(), Y: rss})
				}
			}
		}
	}()
	return func() {
		close(stopSampling)
		sampling.Wait()
	}
}

// memWaitFull waits up to waitFor until the creates returned (created),
// all pods are labelled and want are bound, logging progress every 10 s.
// A failed create ends the wait; it is returned.
func memWaitFull(ctx context.Context, b *testing.B, count *memPodCounter, created <-chan error, waitFor time.Duration, pods, want int, start time.Time, progress func(string)) (ok bool, createErr error) {
	createsDone := false
	lastProgress := start
	ok = waitUntil(ctx, waitFor, func() bool {
		if !createsDone {
			select {
			case createErr = <-created:
				createsDone = true
				b.Logf("creates took %s", time.Since(start).Round(time.Second))
				if createErr != nil {
					return true // reported once sampling stops
				}
			default:
			}
		}
		if now := time.Now(); now.Sub(lastProgress) >= 10*time.Second {
			lastProgress = now
			progress("")
		}
		_, labelled, bound := count.counts()
		return createsDone && labelled == pods && bound >= want
	})
	return ok, createErr
}

// report reports each process's peak RSS and CPU per pod and writes
// memory.csv, memory.md and the RSS chart to out.
func (r *memRun) report(b *testing.B, out string, nodes, pods, labelled, bound int, elapsed time.Duration) {
	rows := [][]string{{"process", "idle_rss_mib", "peak_rss_mib", "nodes", "pods", "bound", "seconds", "cpu_seconds", "cpu_ms_per_pod", "gomemlimit"}}
	var md strings.Builder
	fmt.Fprintf(&md, "| process | RSS after start (MiB) | peak RSS, VmHWM (MiB) | CPU ms per pod | GOMEMLIMIT |\n|---|---|---|---|---|\n")
	chart := benchreport.Chart{Title: fmt.Sprintf("Scenario 5: RSS of the shipped binaries (%d nodes, %d pods)", nodes, pods), XLabel: "seconds since first create", YLabel: "RSS (MiB)"}
	total := 0.0
	for _, name := range []string{"muster-scheduler", "muster-podgrouper"} {
		_, hwm, err := procMem(r.procs[name])
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		// CPU from the end of start-up (informers synced) to now,
		// per pod of the run: the price of GOMEMLIMIT's extra
		// collections shows here.
		cpu, err := procCPU(r.procs[name])
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		cpu -= r.idleCPU[name]
		cpuPerPod := float64(cpu.Microseconds()) / 1000 / float64(pods)
		b.ReportMetric(cpuPerPod, name+"-cpu-ms/pod")
		total += hwm
		b.ReportMetric(hwm, name+"-peak-MiB")
		rows = append(rows, []string{name, f3(r.idle[name]), f3(hwm), strconv.Itoa(nodes), strconv.Itoa(pods), strconv.Itoa(bound), f3(elapsed.Seconds()), f3(cpu.Seconds()), f3(cpuPerPod), r.memLimit[name]})
		fmt.Fprintf(&md, "| %s | %.0f | %.0f | %.2f | %s |\n", name, r.idle[name], hwm, cpuPerPod, cmp.Or(r.memLimit[name], "unset"))
		chart.Series = append(chart.Series, *r.series[name])
	}
	fmt.Fprintf(&md, "| both | %.0f | %.0f | | |\n", r.idle["muster-scheduler"]+r.idle["muster-podgrouper"], total)
	b.Logf("%d pods labelled, %d bound in %s; peak RSS total %.0f MiB", labelled, bound, elapsed.Round(time.Second), total)
	if err := benchreport.WriteCSV(filepath.Join(out, "memory.csv"), rows); err != nil {
		b.Fatal(err)
	}
	if err := chart.WriteFiles(out, "memory-rss"); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "memory.md"), []byte(md.String()), 0o644); err != nil {
		b.Fatal(err)
	}
}

// freePort is localcluster.FreePort for a test.
func freePort(tb testing.TB) int {
	tb.Helper()
	port, err := localcluster.FreePort()
	if err != nil {
		tb.Fatal(err)
	}
	return port
}

// saveHeapProfile fetches a heap profile (after a GC, as pprof's gc=1 asks)
// into path.
func saveHeapProfile(tb testing.TB, url, path string) {
	tb.Helper()
	if err := fetchProfile(url+"?gc=1", path); err != nil {
		tb.Errorf("heap profile: %v", err)
	}
}

// insecureClient reads the scheduler's pprof endpoints: its serving
// certificate is self-signed.
var insecureClient = &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

// fetchProfile saves what url serves (a pprof profile) into path.
func fetchProfile(url, path string) error {
	r, err := insecureClient.Get(url)
	if err != nil {
		return err
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, r.Status)
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return os.WriteFile(path, data, 0o644)
}

// createJobSetShapedPods creates gangs JobSet-shaped workloads (a JobSet and
// one Job of perGang per gang, the Job managed by someone else so the Job
// controller stays out), then their pods, 16 creators at once, on the nodes
// of pool ns, for scheduler sched.
func createJobSetShapedPods(ctx context.Context, tb testing.TB, ns, sched string, gangs, perGang int) error {
	return createJobSetShapedPodsN(ctx, tb, ns, sched, gangs, perGang, 16)
}

// createJobSetShapedPodsN is createJobSetShapedPods with clients creators.
func createJobSetShapedPodsN(ctx context.Context, tb testing.TB, ns, sched string, gangs, perGang, clients int) error {
	jobs := make([]*unstructured.Unstructured, gangs)
	if err := parallel(gangs, clients, func(g int) error {
		var err error
		jobs[g], err = pgrBenchGang(ctx, tb, ns, sched, g, perGang)
		return err
	}); err != nil {
		return err
	}
	sel, tol := localcluster.PoolPlacement(ns)
	return parallel(gangs*perGang, clients, func(i int) error {
		g, k := i/perGang, i%perGang
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("g%d-workers-0-%d", g, k), Labels: map[string]string{
				"bench": "1", "gang": fmt.Sprintf("g%d", g),
				"jobset.sigs.k8s.io/jobset-name": fmt.Sprintf("g%d", g), "jobset.sigs.k8s.io/replicatedjob-name": "workers", "jobset.sigs.k8s.io/job-index": "0",
			}, OwnerReferences: []metav1.OwnerReference{pgrControllerRef(jobs[g])}},
			Spec: pgrGPUPodSpec(sched, 1),
		}
		// The pool's nodes are tainted to it.
		p.Spec.NodeSelector, p.Spec.Tolerations = sel, []corev1.Toleration{tol}
		_, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		return err
	})
}

// memPodCounter counts the benchmark's pods, labelled and bound, from a
// watch. Its informer keeps only the three facts it counts, so the test
// process (which hosts the API server) does not hold another copy of every
// pod.
type memPodCounter struct {
	mu    sync.Mutex
	state map[string]uint8 // pod name → memLabelled|memBound
	stop  func()
}

const (
	memLabelled uint8 = 1 << iota
	memBound
)

func countMemPods(ctx context.Context, ns string) (*memPodCounter, error) {
	c := &memPodCounter{state: map[string]uint8{}}
	opts := []informers.SharedInformerOption{informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "bench=1" }),
		informers.WithTransform(func(obj any) (any, error) {
			p, ok := obj.(*corev1.Pod)
			if !ok {
				return obj, nil
			}
			small := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, ResourceVersion: p.ResourceVersion}}
			if v := p.Labels[api.LabelPodGroup]; v != "" {
				small.Labels = map[string]string{api.LabelPodGroup: v}
			}
			small.Spec.NodeName = p.Spec.NodeName
			return small, nil
		})}
	observe := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		var s uint8
		if p.Labels[api.LabelPodGroup] != "" {
			s |= memLabelled
		}
		if p.Spec.NodeName != "" {
			s |= memBound
		}
		c.mu.Lock()
		c.state[p.Name] = s
		c.mu.Unlock()
	}
	stop, err := watchBenchPods(ctx, observe, opts...)
	if err != nil {
		return nil, err
	}
	c.stop = stop
	return c, nil
}

func (c *memPodCounter) counts() (exist, labelled, bound int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.state {
		if s&memLabelled != 0 {
			labelled++
		}
		if s&memBound != 0 {
			bound++
		}
	}
	return len(c.state), labelled, bound
}

// rssLine is the current RSS of each process, for the progress lines.
func rssLine(procs map[string]int) string {
	var parts []string
	for _, name := range []string{"muster-scheduler", "muster-podgrouper"} {
		rss, hwm, err := procMem(procs[name])
		if err != nil {
			parts = append(parts, name+" gone: "+err.Error())
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.0f (peak %.0f) MiB", name, rss, hwm))
	}
	return strings.Join(parts, ", ")
}

// loadAvg is the machine's 1, 5 and 15-minute load averages: the
// benchmark shares its cores with other work, and the numbers say so.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
