package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/muster-io/muster/test/benchreport"
)

// ---- Scenario 2: contention ----

type contentionRun struct {
	Variant string
	Rep     int
	Drained bool
	// Stuck: no bind or completion for Stall with pods pending.
	Stuck   bool
	Drain   time.Duration // first create → every gang's pods Succeeded
	Samples int
	// PartialSamples sums, over samples, the gangs seen partly bound
	// (0 < bound < size, gang not yet completing). MaxPartial is the most
	// in one sample.
	PartialSamples, MaxPartial int
	// Violations break the gang tests' rule (gang_watch_test.go): a
	// partial muster gang not let through by one barrier release, or any
	// gang partly bound longer than settleWindow.
	Violations []string
	// AllocQueued is the mean GPU allocation over the samples taken after
	// the last create while pods were still pending.
	AllocQueued float64
	Partial     []benchreport.Point
	Alloc       []benchreport.Point
	// Writes counts the scheduler's API writes during the run by request
	// kind; WritesTotal sums them.
	Writes      map[string]int
	WritesTotal int
	// Turnover says where a waiting gang's GPUs sat idle (turnovers).
	Turnover turnoverStats
	// Evictions counts Kueue's evictions of the run's Workloads (the
	// kueue- variants; waitForPodsReady's, nothing else evicts there).
	Evictions int
	// KueueWatch says where the evictions came from (kueueWatch.summary).
	KueueWatch string
}

// runContention runs one variant once: demand twice the capacity, gangs in
// random order; a gang runs s.Hold once whole, then its pods are marked
// Succeeded. A partly bound gang holds its GPUs and never completes on its
// own, as a real job waiting for its missing workers.
func runContention(ctx context.Context, tb testing.TB, s benchSizes, variant string, rep int, seed int64) (contentionRun, error) {
	res := contentionRun{Variant: variant, Rep: rep}
	fullVariant := variant
	variant, withKueue := kueueVariant(variant)
	if withKueue {
		// Started first, stopped last: its finalizers on the pods go
		// only while it runs, and the namespace's cleanup waits for them.
		stopKueue, err := startBenchKueue(ctx)
		if err != nil {
			return res, err
		}
		defer stopKueue()
	}
	ns, err := controlPlane.NewNamespace(ctx, "bench-ct-")
	if err != nil {
		return res, err
	}
	defer cleanupRunOrFail(tb, ns)
	if err := createBenchNodes(ctx, ns, s.Nodes, s.GPUsPerNode, false); err != nil {
		return res, err
	}
	gangs := gangNames(s.Gangs, rand.New(rand.NewSource(seed)))
	sched := "bench-" + variant + "-" + ns
	if withKueue {
		cleanupQueues, err := prepareBenchKueue(ctx, ns, s.Nodes*s.GPUsPerNode)
		defer cleanupQueues()
		if err != nil {
			return res, err
		}
	}
	writes := newWriteCounter()
	var stop func()
	if variant == variantKAI {
		// KAI runs as its own processes (bench_kai_test.go).
		bin, err := kaiBinaries(ctx)
		if err != nil {
			return res, err
		}
		if err := prepareKAI(ctx, ns, gangs, s.GangSize, s.Nodes*s.GPUsPerNode); err != nil {
			return res, err
		}
		procs := startKAI(tb, bin, sched)
		stop = func() {
			for _, c := range procs {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
		}
	} else {
		if err := createGroups(ctx, tb, variant, ns, gangs, s.GangSize); err != nil {
			return res, err
		}
		if stop, err = startBenchScheduler(ctx, tb, variant, sched, true, writes); err != nil {
			return res, err
		}
	}
	defer stop()
	writes.start()

	runCtx, cancel := context.WithCancel(ctx)
	fin := &gangFinisher{ctx: runCtx, ns: ns, hold: s.Hold, sem: make(chan struct{}, 32), completing: map[string]bool{}}
	defer func() { cancel(); fin.wg.Wait() }()
	tr, err := trackPods(runCtx, ns, s.GangSize, fin.gangWhole)
	if err != nil {
		return res, err
	}
	fin.setTracker(tr)
	defer tr.stop()
	var kw *kueueWatch
	if withKueue {
		var stopWatch func()
		if kw, stopWatch, err = watchKueueWorkloads(runCtx, ns, tr); err != nil {
			return res, err
		}
		defer stopWatch()
	}

	c := &contentionSampler{s: s, variant: variant, ns: ns, tr: tr, fin: fin, res: &res,
		capacity: float64(s.Nodes * s.GPUsPerNode), start: time.Now(), partialSince: map[string]time.Time{}}
	createDone := make(chan error, 1)
	go func() {
		err := createGangPodsConcurrently(runCtx, s, fullVariant, sched, ns, gangs)
		c.createdMu.Lock()
		c.created = time.Now()
		c.createdMu.Unlock()
		createDone <- err
	}()
	if err := c.run(createDone); err != nil {
		return res, err
	}
	res.Writes, res.WritesTotal = writes.stop()
	if withKueue {
		if res.Evictions, err = kueueEvictions(ctx, ns); err != nil {
			return res, err
		}
		res.KueueWatch = kw.summary()
	}
	if c.allocN > 0 {
		res.AllocQueued = c.allocSum / float64(c.allocN)
	}
	tr.mu.Lock()
	res.Turnover = turnovers(tr.pods)
	tr.mu.Unlock()
	fin.mu.Lock()
	defer fin.mu.Unlock()
	if fin.err != nil {
		return res, fin.err
	}
	return res, nil
}

// gangFinisher marks a gang's pods Succeeded hold after the gang is whole.
type gangFinisher struct {
	ctx  context.Context
	ns   string
	hold time.Duration
	sem  chan struct{} // bounds the Succeed calls of the whole run
	wg   sync.WaitGroup

	mu         sync.Mutex
	tr         *podTracker
	completing map[string]bool // gangs whose pods are being finished
	err        error           // the last failed Succeed
}

func (f *gangFinisher) setTracker(tr *podTracker) {
	f.mu.Lock()
	f.tr = tr
	f.mu.Unlock()
}

// gangWhole is trackPods' callback for gang g.
func (f *gangFinisher) gangWhole(g string) {
	f.wg.Add(1)
	time.AfterFunc(f.hold, func() {
		defer f.wg.Done()
		f.mu.Lock()
		f.completing[g] = true
		tr := f.tr
		f.mu.Unlock()
		var names []string
		tr.mu.Lock()
		for name, st := range tr.pods {
			if st.gang == g {
				names = append(names, name)
			}
		}
		tr.mu.Unlock()
		// A distributed job's workers exit together: the gang's pods
		// finish concurrently (bounded by sem for the whole run), as
		// kubelets on different nodes report them, not one after the
		// other.
		var gangDone sync.WaitGroup
		for _, name := range names {
			gangDone.Go(func() {
				f.sem <- struct{}{}
				defer func() { <-f.sem }()
				if err := podSim.Succeed(f.ctx, f.ns, name); err != nil && f.ctx.Err() == nil {
					f.mu.Lock()
					f.err = err
					f.mu.Unlock()
				}
			})
		}
		gangDone.Wait()
	})
}

// retired returns a copy of the gangs being finished.
func (f *gangFinisher) retired() map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	retired := make(map[string]bool, len(f.completing))
	for g := range f.completing {
		retired[g] = true
	}
	return retired
}

// contentionSampler samples a contention run into res every 100 ms until
// it drains, stalls or times out.
type contentionSampler struct {
	s       benchSizes
	variant string
	ns      string
	tr      *podTracker
	fin     *gangFinisher
	res     *contentionRun

	capacity     float64
	start        time.Time
	createdMu    sync.Mutex
	created      time.Time // zero until every create returned
	partialSince map[string]time.Time
	allocSum     float64
	allocN       int
}

// run samples until every pod is done after createDone said every create
// returned, or no progress for s.Stall, or s.Timeout; it returns a failed
// create's error.
func (c *contentionSampler) run(createDone <-chan error) error {
	s, res, tr := c.s, c.res, c.tr
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(s.Timeout)
	createReturned := false
	for {
		select {
		case createErr := <-createDone:
			createReturned = true
			if createErr != nil {
				return createErr
			}
		case now := <-tick.C:
			c.sample(now)
			if _, done := tr.counts(); createReturned && done == s.pods() {
				res.Drained = true
				res.Drain = now.Sub(c.start)
				return nil
			}
			tr.mu.Lock()
			last := tr.progress
			tr.mu.Unlock()
			if createReturned && s.Stall > 0 && !last.IsZero() && now.Sub(last) > s.Stall {
				res.Stuck = true
				return nil
			}
		case <-deadline:
			return nil
		}
	}
}

// sample records one sample taken at now and returns the pods pending.
func (c *contentionSampler) sample(now time.Time) (pending int) {
	s, res := c.s, c.res
	c.createdMu.Lock()
	allCreated := !c.created.IsZero()
	c.createdMu.Unlock()
	retired := c.fin.retired()
	bound := map[string][]types.UID{}
	gpus := 0
	c.tr.mu.Lock()
	for _, st := range c.tr.pods {
		switch {
		case st.bound:
			gpus++
			bound[st.gang] = append(bound[st.gang], st.uid)
		case !st.done:
			pending++
		}
	}
	c.tr.mu.Unlock()
	partial := 0
	for g, uids := range bound {
		if retired[g] || len(uids) >= s.GangSize {
			delete(c.partialSince, g)
			continue
		}
		partial++
		if c.variant == variantMuster && !barrierLog.releasedTogether(c.ns+"/"+g, uids, s.GangSize) {
			res.Violations = append(res.Violations, fmt.Sprintf("%s: %d of %d bound, not all allowed together by one barrier release", g, len(uids), s.GangSize))
		}
		if since, ok := c.partialSince[g]; !ok {
			c.partialSince[g] = now
		} else if now.Sub(since) > settleWindow && c.variant != variantDefault {
			res.Violations = append(res.Violations, fmt.Sprintf("%s: %d of %d bound for %s (> %s)", g, len(uids), s.GangSize, now.Sub(since).Round(time.Millisecond), settleWindow))
			delete(c.partialSince, g)
		}
	}
	for g := range c.partialSince {
		if _, ok := bound[g]; !ok {
			delete(c.partialSince, g)
		}
	}
	res.Samples++
	res.PartialSamples += partial
	res.MaxPartial = max(res.MaxPartial, partial)
	alloc := float64(gpus) / c.capacity
	t := now.Sub(c.start).Seconds()
	res.Partial = append(res.Partial, benchreport.Point{X: t, Y: float64(partial)})
	res.Alloc = append(res.Alloc, benchreport.Point{X: t, Y: 100 * alloc})
	if allCreated && pending > 0 {
		c.allocSum += alloc
		c.allocN++
	}
	return pending
}

type contentionReport struct {
	Runs []contentionRun
}

// runContentionScenario runs every variant s.Reps times (rotating order, the
// same random gang order for every variant of a repetition) and writes
// contention.csv, contention-partial.svg, contention-alloc.svg and
// contention.md to out.
// contentionCounters are the metric families MUSTER_BENCH_COUNTERS logs per
// contention run: the plugin's gang attempts and the queue's moves.
// The duration histograms give their count and their sum in milliseconds:
// where the scheduler's part of a handover goes (a scheduling cycle, the
// wait at Permit, each extension point).
var contentionCounters = []string{"muster_gang_", "scheduler_schedule_attempts_total", "scheduler_pod_scheduling_attempts", "scheduler_queue_incoming_pods_total",
	"scheduler_scheduling_attempt_duration_seconds", "scheduler_permit_wait_duration_seconds", "scheduler_framework_extension_point_duration_seconds"}

func runContentionScenario(ctx context.Context, tb testing.TB, s benchSizes, variants []string, out string) (contentionReport, error) {
	var rep contentionReport
	for w := range s.Warmup {
		run, err := runContention(ctx, tb, s, variants[0], -1-w, int64(999-w))
		if err != nil {
			return rep, err
		}
		tb.Logf("contention %-7s warm-up (not recorded): GPU allocation while queued %.1f%%", variants[0], 100*run.AllocQueued)
	}
	for r := range s.Reps {
		seed := int64(1000 + r)
		for i := range variants {
			v := variants[(i+r)%len(variants)]
			before := counterSnapshot(contentionCounters...)
			run, err := runContention(ctx, tb, s, v, r, seed)
			if err != nil {
				return rep, err
			}
			if os.Getenv("MUSTER_BENCH_COUNTERS") != "" {
				tb.Logf("contention %s rep %d counters:%s", v, r, counterDelta(before, counterSnapshot(contentionCounters...)))
			}
			tb.Logf("contention %-7s rep %d: drained=%v in %s (stuck=%v); %d samples, %d partial-gang samples (max %d at once), %d rule violations; GPU allocation while queued %.1f%%",
				v, r, run.Drained, run.Drain.Round(time.Millisecond), run.Stuck, run.Samples, run.PartialSamples, run.MaxPartial, len(run.Violations), 100*run.AllocQueued)
			if _, k := kueueVariant(v); k {
				tb.Logf("contention %-7s rep %d: Kueue evictions %d; %s", v, r, run.Evictions, run.KueueWatch)
			}
			tb.Logf("contention %-7s rep %d: scheduler writes %.2f per pod (%s)", v, r, float64(run.WritesTotal)/float64(s.pods()), formatWrites(run.Writes))
			tb.Logf("contention %-7s rep %d: %s", v, r, run.Turnover)
			for i, vio := range run.Violations {
				if i == 5 {
					tb.Logf("  … %d more", len(run.Violations)-5)
					break
				}
				tb.Logf("  violation: %s", vio)
			}
			rep.Runs = append(rep.Runs, run)
		}
	}
	rows := [][]string{{"variant", "rep", "drained", "stuck", "drain_s", "samples", "partial_gang_samples", "max_partial", "violations", "gpu_alloc_while_queued", "kueue_evictions"}}
	partialChart := benchreport.Chart{Title: fmt.Sprintf("Scenario 2: partially bound gangs (%d nodes x %d GPUs, %d gangs of %d; rep 0)", s.Nodes, s.GPUsPerNode, s.Gangs, s.GangSize),
		XLabel: "seconds since first create", YLabel: "gangs partly bound"}
	allocChart := benchreport.Chart{Title: "Scenario 2: GPU allocation (rep 0)", XLabel: "seconds since first create", YLabel: "% of GPUs allocated", YMax: 100}
	var md strings.Builder
	fmt.Fprintf(&md, "| scheduler | drained (runs) | median time to drain | partial-gang samples per run | max partial at once | rule violations | median GPU allocation while queued |\n|---|---|---|---|---|---|---|\n")
	for _, v := range variants {
		var drains, allocs []float64
		var partials, maxes, viol []string
		drained := 0
		for _, run := range rep.Runs {
			if run.Variant != v {
				continue
			}
			rows = append(rows, []string{v, strconv.Itoa(run.Rep), strconv.FormatBool(run.Drained), strconv.FormatBool(run.Stuck), f3(run.Drain.Seconds()), strconv.Itoa(run.Samples),
				strconv.Itoa(run.PartialSamples), strconv.Itoa(run.MaxPartial), strconv.Itoa(len(run.Violations)), f3(run.AllocQueued), strconv.Itoa(run.Evictions)})
			if run.Drained {
				drained++
				drains = append(drains, run.Drain.Seconds())
			}
			allocs = append(allocs, run.AllocQueued)
			partials = append(partials, strconv.Itoa(run.PartialSamples))
			maxes = append(maxes, strconv.Itoa(run.MaxPartial))
			viol = append(viol, strconv.Itoa(len(run.Violations)))
			if run.Rep == 0 {
				partialChart.Series = append(partialChart.Series, benchreport.Series{Name: v, Points: run.Partial})
				allocChart.Series = append(allocChart.Series, benchreport.Series{Name: v, Points: run.Alloc})
			}
		}
		drain := "not drained"
		if len(drains) > 0 {
			drain = fmt.Sprintf("%.1f s", median(drains))
		}
		fmt.Fprintf(&md, "| %s | %d of %d | %s | %s | %s | %s | %.1f%% |\n", v, drained, len(allocs), drain,
			strings.Join(partials, ", "), strings.Join(maxes, ", "), strings.Join(viol, ", "), 100*median(allocs))
	}
	if err := benchreport.WriteCSV(filepath.Join(out, "contention.csv"), rows); err != nil {
		return rep, err
	}
	if err := partialChart.WriteFiles(out, "contention-partial"); err != nil {
		return rep, err
	}
	if err := allocChart.WriteFiles(out, "contention-alloc"); err != nil {
		return rep, err
	}
	return rep, os.WriteFile(filepath.Join(out, "contention.md"), []byte(md.String()), 0o644)
}
