package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/muster-io/muster/test/benchreport"
)

// ---- Scenario 1: throughput ----

type throughputRun struct {
	Variant  string
	Rep      int
	Pods     int
	Gangs    int
	Elapsed  time.Duration // first create → last pod bound
	Creating time.Duration // first create → last create returned
	Curve    []benchreport.Point
	// Writes counts the scheduler's API writes from the first create to the
	// last bind, by "VERB resource"; WritesTotal sums them.
	Writes      map[string]int
	WritesTotal int
}

// turnoverStats splits the idle time of a gang handover into its parts,
// medians and 90th percentiles over the run. DoneSpread: first to last pod
// of a finishing gang seen done (its first GPUs idle until its last are
// free, as a waiting gang of the same size needs them all). Gap: a
// finishing gang's last pod done to the first bind of the gang that took
// its place (the scheduler's reaction). BindSpread: a starting gang's first
// to last bind. The means are what allocation pays: at 3 s per gang, 95%
// allows about 158 ms of idle GPU time per handover.
type turnoverStats struct {
	N                                       int
	DoneSpread50, DoneSpread90, DoneSpreadM time.Duration
	Gap50, Gap90, GapM                      time.Duration
	Bind50, Bind90, BindM                   time.Duration
}

func (t turnoverStats) String() string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond)) }
	return fmt.Sprintf("%d handovers, ms p50/p90/mean: done spread %s/%s/%s, last done → next first bind %s/%s/%s, bind spread %s/%s/%s",
		t.N, ms(t.DoneSpread50), ms(t.DoneSpread90), ms(t.DoneSpreadM), ms(t.Gap50), ms(t.Gap90), ms(t.GapM), ms(t.Bind50), ms(t.Bind90), ms(t.BindM))
}

// turnovers matches, in time order, each gang that finished (all its pods
// done) with the next gang whose first bind came after the first finish:
// with every gang the same size and the cluster full, the k-th such start
// uses the room of the k-th finish. Call with the tracker's lock held.
func turnovers(pods map[string]*podState) turnoverStats {
	type span struct{ first, last time.Time }
	bound, done := map[string]*span{}, map[string]*span{}
	widen := func(m map[string]*span, g string, t time.Time) {
		if t.IsZero() {
			return
		}
		s := m[g]
		if s == nil {
			m[g] = &span{t, t}
			return
		}
		if t.Before(s.first) {
			s.first = t
		}
		if t.After(s.last) {
			s.last = t
		}
	}
	for _, p := range pods {
		widen(bound, p.gang, p.boundAt)
		widen(done, p.gang, p.doneAt)
	}
	var finishes, doneSpread []time.Duration
	var firstFinish time.Time
	var finishAt []time.Time
	for _, s := range done {
		finishAt = append(finishAt, s.last)
		doneSpread = append(doneSpread, s.last.Sub(s.first))
		if firstFinish.IsZero() || s.first.Before(firstFinish) {
			firstFinish = s.first
		}
	}
	var startAt []time.Time
	var bindSpread []time.Duration
	for _, s := range bound {
		if !firstFinish.IsZero() && s.first.After(firstFinish) {
			startAt = append(startAt, s.first)
			bindSpread = append(bindSpread, s.last.Sub(s.first))
		}
	}
	slices.SortFunc(finishAt, func(a, b time.Time) int { return a.Compare(b) })
	slices.SortFunc(startAt, func(a, b time.Time) int { return a.Compare(b) })
	for k := range min(len(finishAt), len(startAt)) {
		finishes = append(finishes, max(0, startAt[k].Sub(finishAt[k])))
	}
	q := func(xs []time.Duration, f float64) time.Duration {
		if len(xs) == 0 {
			return 0
		}
		ys := slices.Clone(xs)
		slices.Sort(ys)
		return ys[min(len(ys)-1, int(f*float64(len(ys))))]
	}
	mean := func(xs []time.Duration) time.Duration {
		if len(xs) == 0 {
			return 0
		}
		var sum time.Duration
		for _, x := range xs {
			sum += x
		}
		return sum / time.Duration(len(xs))
	}
	return turnoverStats{N: len(finishes),
		DoneSpread50: q(doneSpread, 0.5), DoneSpread90: q(doneSpread, 0.9), DoneSpreadM: mean(doneSpread),
		Gap50: q(finishes, 0.5), Gap90: q(finishes, 0.9), GapM: mean(finishes),
		Bind50: q(bindSpread, 0.5), Bind90: q(bindSpread, 0.9), BindM: mean(bindSpread)}
}

func (r throughputRun) podsPerSec() float64  { return float64(r.Pods) / r.Elapsed.Seconds() }
func (r throughputRun) gangsPerSec() float64 { return float64(r.Gangs) / r.Elapsed.Seconds() }

// runThroughput runs one variant once on a fresh namespace and node pool.
func runThroughput(ctx context.Context, tb testing.TB, s benchSizes, variant string, rep int) (throughputRun, error) {
	res := throughputRun{Variant: variant, Rep: rep, Pods: s.pods(), Gangs: s.Gangs}
	ns, gangs, err := prepareBenchRun(ctx, tb, s, variant, "bench-tp-")
	if ns != "" {
		defer cleanupRunOrFail(tb, ns)
	}
	if err != nil {
		return res, err
	}
	sched := "bench-" + variant + "-" + ns
	writes := newWriteCounter()
	stop, err := startBenchScheduler(ctx, tb, variant, sched, false, writes)
	if err != nil {
		return res, err
	}
	defer stop()
	tr, err := trackPods(ctx, ns, s.GangSize, nil)
	if err != nil {
		return res, err
	}
	defer tr.stop()

	writes.start()
	start := time.Now()
	if err := createGangPodsConcurrently(ctx, s, variant, sched, ns, gangs); err != nil {
		return res, err
	}
	res.Creating = time.Since(start)
	if !waitUntil(ctx, s.Timeout, func() bool { b, _ := tr.counts(); return b == s.pods() }) {
		b, _ := tr.counts()
		return res, fmt.Errorf("%s: %d of %d pods bound after %s", variant, b, s.pods(), s.Timeout)
	}
	// The scheduler's writes while the pods were created and bound (the
	// benchmark's own creates are not counted).
	res.Writes, res.WritesTotal = writes.stop()
	tr.mu.Lock()
	times := append([]time.Time(nil), tr.boundTimes...)
	tr.mu.Unlock()
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	res.Elapsed = times[len(times)-1].Sub(start)
	res.Curve = []benchreport.Point{{X: 0, Y: 0}}
	for i, at := range times {
		res.Curve = append(res.Curve, benchreport.Point{X: at.Sub(start).Seconds(), Y: float64(i + 1)})
	}
	res.Curve = thin(res.Curve, 400)
	return res, nil
}

// thin keeps at most n points of a curve, always the last.
func thin(pts []benchreport.Point, n int) []benchreport.Point {
	if len(pts) <= n {
		return pts
	}
	out := make([]benchreport.Point, 0, n+1)
	step := float64(len(pts)) / float64(n)
	for i := 0.0; int(i) < len(pts); i += step {
		out = append(out, pts[int(i)])
	}
	if out[len(out)-1] != pts[len(pts)-1] {
		out = append(out, pts[len(pts)-1])
	}
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// throughputReport is the outcome of all runs of scenario 1.
type throughputReport struct {
	Runs       []throughputRun
	MedianPods map[string]float64 // pods/s by variant
}

// runThroughputScenario runs every variant s.Reps times, rotating the order
// in each repetition so no variant always goes first, and writes
// throughput.csv, throughput.svg and throughput.md to out.
func runThroughputScenario(ctx context.Context, tb testing.TB, s benchSizes, variants []string, out string) (throughputReport, error) {
	rep := throughputReport{MedianPods: map[string]float64{}}
	for w := range s.Warmup {
		run, err := runThroughput(ctx, tb, s, variants[0], -1-w)
		if err != nil {
			return rep, err
		}
		tb.Logf("throughput %-7s warm-up (not recorded): %.0f pods/s", variants[0], run.podsPerSec())
	}
	for r := range s.Reps {
		for i := range variants {
			v := variants[(i+r)%len(variants)]
			run, err := runThroughput(ctx, tb, s, v, r)
			if err != nil {
				return rep, err
			}
			tb.Logf("throughput %-7s rep %d: %d pods in %s (%.0f pods/s, %.1f gangs/s; creates took %s)", v, r, run.Pods,
				run.Elapsed.Round(time.Millisecond), run.podsPerSec(), run.gangsPerSec(), run.Creating.Round(time.Millisecond))
			tb.Logf("throughput %-7s rep %d: scheduler API writes %d (%.2f per pod): %s", v, r, run.WritesTotal,
				float64(run.WritesTotal)/float64(run.Pods), formatWrites(run.Writes))
			rep.Runs = append(rep.Runs, run)
		}
	}
	rows := [][]string{{"variant", "rep", "pods", "gangs", "elapsed_s", "creating_s", "pods_per_s", "gangs_per_s", "scheduler_writes"}}
	chart := benchreport.Chart{
		Title:  fmt.Sprintf("Scenario 1: pods bound over time (%d nodes x %d GPUs, %d gangs of %d; median run)", s.Nodes, s.GPUsPerNode, s.Gangs, s.GangSize),
		XLabel: "seconds since first create", YLabel: "pods bound",
	}
	for _, v := range variants {
		var rates []float64
		var runs []throughputRun
		for _, run := range rep.Runs {
			if run.Variant != v {
				continue
			}
			runs = append(runs, run)
			rates = append(rates, run.podsPerSec())
			rows = append(rows, []string{v, strconv.Itoa(run.Rep), strconv.Itoa(run.Pods), strconv.Itoa(run.Gangs),
				f3(run.Elapsed.Seconds()), f3(run.Creating.Seconds()), f3(run.podsPerSec()), f3(run.gangsPerSec()), strconv.Itoa(run.WritesTotal)})
		}
		rep.MedianPods[v] = median(rates)
		sort.Slice(runs, func(i, j int) bool { return runs[i].podsPerSec() < runs[j].podsPerSec() })
		if len(runs) > 0 {
			chart.Series = append(chart.Series, benchreport.Series{Name: v, Points: runs[len(runs)/2].Curve})
		}
	}
	if err := benchreport.WriteCSV(filepath.Join(out, "throughput.csv"), rows); err != nil {
		return rep, err
	}
	if err := chart.WriteFiles(out, "throughput-curve"); err != nil {
		return rep, err
	}
	var md strings.Builder
	fmt.Fprintf(&md, "| scheduler | median pods/s | median gangs/s | runs (pods/s) | ratio muster / this |\n|---|---|---|---|---|\n")
	for _, v := range variants {
		var each []string
		for _, run := range rep.Runs {
			if run.Variant == v {
				each = append(each, fmt.Sprintf("%.0f", run.podsPerSec()))
			}
		}
		ratio := "–"
		if m := rep.MedianPods[v]; m > 0 && rep.MedianPods[variantMuster] > 0 {
			ratio = fmt.Sprintf("%.2f×", rep.MedianPods[variantMuster]/m)
		}
		fmt.Fprintf(&md, "| %s | %.0f | %.1f | %s | %s |\n", v, rep.MedianPods[v], rep.MedianPods[v]/float64(s.GangSize), strings.Join(each, ", "), ratio)
	}
	return rep, os.WriteFile(filepath.Join(out, "throughput.md"), []byte(md.String()), 0o644)
}

func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
