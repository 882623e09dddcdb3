package e2e

// Issue 15's preemption benchmark (BENCHMARKS.md, "Scenario 7 —
// preemption"): a cluster full of low-priority gangs, then high-priority
// gangs arrive that fit only by evicting whole low-priority gangs. muster
// (the shipped profile) and native Kubernetes gang scheduling with its
// pod-group preemption (DefaultPreemption's PodGroupEvaluator, under the
// GenericWorkload gate the e2e control plane turns on) run side by side in
// one process. Sizes come from MUSTER_BENCH_PREEMPT_*; TestBenchSmokePreemption
// runs the same code small.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/test/benchreport"
)

// variantNativeSingle is native gang scheduling with the PodGroups'
// default disruption mode, Single: preemption may take a gang's pods one by
// one. variantNative sets disruptionMode All, native's whole-gang mode, the
// one to compare muster with.
const variantNativeSingle = "native-single"

// schedulerVariant is the scheduler and pod shape a preemption variant uses.
func schedulerVariant(v string) string {
	if v == variantNativeSingle {
		return variantNative
	}
	return v
}

// preemptSizes are the sizes of one preemption run.
type preemptSizes struct {
	Nodes, GPUsPerNode int
	// LowGangSize: the cluster is filled with Nodes*GPUsPerNode/LowGangSize
	// low-priority gangs of that many 1-GPU pods.
	LowGangSize int
	// HighGangs of HighGangSize 1-GPU pods arrive once the cluster is full.
	HighGangs, HighGangSize int
	Reps                    int
	// Timeout bounds the wait for the high-priority gangs (and the fill).
	Timeout time.Duration
	Workers int
}

func (s preemptSizes) lowGangs() int { return s.Nodes * s.GPUsPerNode / s.LowGangSize }

// minEvictedPods is the fewest low-priority pods whose eviction makes room:
// the high-priority demand rounded up to whole low-priority gangs.
func (s preemptSizes) minEvictedPods() int {
	demand := s.HighGangs * s.HighGangSize
	return (demand + s.LowGangSize - 1) / s.LowGangSize * s.LowGangSize
}

// preemptSizesFromEnv: issue 15's scenario, 100 nodes × 8 GPUs filled with
// 100 low-priority gangs of 8, then 25 high-priority gangs of 16 (400 GPUs:
// at least 50 low-priority gangs must go), unless MUSTER_BENCH_PREEMPT_NODES,
// _HIGH_GANGS, _REPS, _TIMEOUT_S say otherwise.
func preemptSizesFromEnv() preemptSizes {
	n := envInt("MUSTER_BENCH_PREEMPT_NODES", 100)
	return preemptSizes{
		Nodes: n, GPUsPerNode: 8, LowGangSize: 8,
		HighGangs: envInt("MUSTER_BENCH_PREEMPT_HIGH_GANGS", n/4), HighGangSize: 16,
		Reps:    envInt("MUSTER_BENCH_PREEMPT_REPS", 1),
		Timeout: time.Duration(envInt("MUSTER_BENCH_PREEMPT_TIMEOUT_S", 180)) * time.Second,
		Workers: 16,
	}
}

// preemptRun is what one variant did in one run.
type preemptRun struct {
	Variant string
	Rep     int
	// Filled: every low-priority pod was bound before the high-priority
	// gangs came; Fill is how long that took.
	Filled bool
	Fill   time.Duration
	// HighBound is how many high-priority pods were bound at the end;
	// AllHighBound whether all were, and Elapsed the time from the first
	// high-priority create to the last high-priority pod bound (or to the
	// timeout).
	HighBound    int
	AllHighBound bool
	Elapsed      time.Duration
	// EvictedPods and EvictedGangs count low-priority pods deleted and the
	// low-priority gangs that lost at least one pod.
	EvictedPods, EvictedGangs int
	// BrokenLowGangs are low-priority gangs left partly bound at the end
	// (some members evicted, others still bound): a gang broken by
	// preemption.
	BrokenLowGangs int
	Samples        int
	// PartialHigh / PartialLow sum, over samples, the high- and
	// low-priority gangs seen partly bound; MaxPartial is the most at once.
	PartialHigh, PartialLow, MaxPartial int
	// LongestHigh / LongestLow are the longest partial episodes (first
	// partial sample to the sample that saw the gang whole or empty).
	LongestHigh, LongestLow time.Duration
	// Violations: a partial high-priority muster gang not let through by
	// one barrier release, or any gang partly bound longer than
	// settleWindow.
	Violations []string
	Curve      []benchreport.Point // high-priority pods bound over time
}

// gangPods follows the pods of a run through an informer: per pod its gang
// and whether it is bound and live (bound, not terminating, not finished);
// deletions and terminations of bound pods count as evictions.
type gangPods struct {
	mu      sync.Mutex
	pods    map[string]*gangPod
	evicted map[string]bool // pod name → evicted (once bound, then deleted)
	stop    func()
}

type gangPod struct {
	gang string
	uid  types.UID
	live bool
}

func followGangPods(ctx context.Context, ns string) (*gangPods, error) {
	g := &gangPods{pods: map[string]*gangPod{}, evicted: map[string]bool{}}
	ctx, cancel := context.WithCancel(ctx)
	f := informers.NewSharedInformerFactoryWithOptions(controlPlane.Client, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { g.observe(o, false) },
		UpdateFunc: func(_, o any) { g.observe(o, false) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			g.observe(o, true)
		},
	}); err != nil {
		cancel()
		return nil, err
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	g.stop = func() { cancel(); f.Shutdown() }
	return g, nil
}

func (g *gangPods) observe(obj any, deleted bool) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Labels["bench"] != "1" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.pods[p.Name]
	if s == nil {
		s = &gangPod{gang: p.Labels["gang"], uid: p.UID}
		g.pods[p.Name] = s
	}
	gone := deleted || p.DeletionTimestamp != nil
	if gone && p.Spec.NodeName != "" {
		g.evicted[p.Name] = true
	}
	s.live = !gone && p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// bound returns the live bound pods' UIDs per gang.
func (g *gangPods) bound() map[string][]types.UID {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string][]types.UID{}
	for _, s := range g.pods {
		if s.live {
			out[s.gang] = append(out[s.gang], s.uid)
		}
	}
	return out
}

// evictions returns the evicted pods and the gangs they were in.
func (g *gangPods) evictions() (pods int, gangs map[string]int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gangs = map[string]int{}
	for name := range g.evicted {
		gangs[g.pods[name].gang]++
	}
	return len(g.evicted), gangs
}

// createPriorityGroups creates the PodGroups of gangs for variant with
// priority class pc (value v): native PodGroups name the class (admission
// resolves spec.priority) and, but for native-single, are disrupted only
// whole; muster PodGroups carry the annotations the pod-grouper writes.
func createPriorityGroups(ctx context.Context, tb testing.TB, variant, ns string, gangs []string, size int, pc string, v int32) error {
	switch variant {
	case variantMuster:
		c := podGroups(tb).SchedulingV1alpha1().PodGroups(ns)
		return parallel(len(gangs), 16, func(i int) error {
			_, err := c.Create(ctx, &schedv1alpha1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Name: gangs[i], Annotations: map[string]string{api.AnnotationPriority: strconv.Itoa(int(v)), api.AnnotationPriorityClass: pc}},
				Spec:       schedv1alpha1.PodGroupSpec{MinMember: int32(size)}}, metav1.CreateOptions{})
			return err
		})
	case variantNative, variantNativeSingle:
		var mode *schedulingv1beta1.DisruptionMode
		if variant == variantNative {
			mode = &schedulingv1beta1.DisruptionMode{All: &schedulingv1beta1.AllDisruptionMode{}}
		}
		c := controlPlane.Client.SchedulingV1beta1().PodGroups(ns)
		return parallel(len(gangs), 16, func(i int) error {
			_, err := c.Create(ctx, &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: gangs[i]},
				Spec: schedulingv1beta1.PodGroupSpec{PriorityClassName: pc, DisruptionMode: mode, SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
					Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(size)}}}}, metav1.CreateOptions{})
			return err
		})
	}
	return fmt.Errorf("preemption benchmark: no variant %q", variant)
}

// createPriorityGangPods creates size members of every gang with priority
// class pc, s.Workers creators taking whole gangs.
func createPriorityGangPods(ctx context.Context, s preemptSizes, variant, sched, ns string, gangs []string, size int, pc string) error {
	return parallel(len(gangs), s.Workers, func(i int) error {
		for k := range size {
			p := benchPod(schedulerVariant(variant), sched, ns, gangs[i], k)
			p.Spec.PriorityClassName = pc
			if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
}

func prefixedNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}

type preemptReport struct{ Runs []preemptRun }

// runPreemptScenario runs every variant s.Reps times (rotating order) and
// writes preempt.csv, preempt.md and preempt-curve.svg to out.
func runPreemptScenario(ctx context.Context, tb testing.TB, s preemptSizes, variants []string, out string) (preemptReport, error) {
	var rep preemptReport
	for r := range s.Reps {
		for i := range variants {
			v := variants[(i+r)%len(variants)]
			run, err := runPreempt(ctx, tb, s, v, r)
			if err != nil {
				return rep, err
			}
			tb.Logf("preempt %-6s rep %d: filled %d low-priority pods in %s; high-priority pods bound %d of %d (all=%v) %s after the first create; evicted %d low-priority pods in %d gangs (minimum %d pods in %d gangs); low-priority gangs left partly bound %d; %d samples, partial-gang samples high %d low %d (max %d at once; longest episode high %s low %s), %d rule violations",
				v, r, s.lowGangs()*s.LowGangSize, run.Fill.Round(time.Millisecond), run.HighBound, s.HighGangs*s.HighGangSize, run.AllHighBound, run.Elapsed.Round(time.Millisecond),
				run.EvictedPods, run.EvictedGangs, s.minEvictedPods(), s.minEvictedPods()/s.LowGangSize, run.BrokenLowGangs, run.Samples, run.PartialHigh, run.PartialLow, run.MaxPartial, run.LongestHigh.Round(time.Millisecond), run.LongestLow.Round(time.Millisecond), len(run.Violations))
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
	rows := [][]string{{"variant", "rep", "fill_s", "high_bound", "high_pods", "all_high_bound", "elapsed_s", "evicted_pods", "evicted_gangs", "min_evicted_pods", "broken_low_gangs", "samples", "partial_high_samples", "partial_low_samples", "max_partial", "longest_partial_high_s", "longest_partial_low_s", "violations"}}
	chart := benchreport.Chart{Title: fmt.Sprintf("Scenario 7: high-priority pods bound (%d nodes x %d GPUs full of gangs of %d; %d gangs of %d arrive; rep 0)", s.Nodes, s.GPUsPerNode, s.LowGangSize, s.HighGangs, s.HighGangSize),
		XLabel: "seconds since the first high-priority create", YLabel: "high-priority pods bound"}
	var md strings.Builder
	fmt.Fprintf(&md, "| scheduler | high-priority pods bound | first create → last bound | low-priority pods evicted (minimum %d) | low-priority gangs hit (minimum %d) | low-priority gangs left partly bound | partial-gang samples (high / low) | longest partial episode (high / low) | rule violations |\n|---|---|---|---|---|---|---|---|---|\n",
		s.minEvictedPods(), s.minEvictedPods()/s.LowGangSize)
	sort.SliceStable(rep.Runs, func(i, j int) bool { return rep.Runs[i].Rep < rep.Runs[j].Rep })
	for _, v := range variants {
		for _, run := range rep.Runs {
			if run.Variant != v {
				continue
			}
			rows = append(rows, []string{v, strconv.Itoa(run.Rep), f3(run.Fill.Seconds()), strconv.Itoa(run.HighBound), strconv.Itoa(s.HighGangs * s.HighGangSize), strconv.FormatBool(run.AllHighBound),
				f3(run.Elapsed.Seconds()), strconv.Itoa(run.EvictedPods), strconv.Itoa(run.EvictedGangs), strconv.Itoa(s.minEvictedPods()), strconv.Itoa(run.BrokenLowGangs),
				strconv.Itoa(run.Samples), strconv.Itoa(run.PartialHigh), strconv.Itoa(run.PartialLow), strconv.Itoa(run.MaxPartial), f3(run.LongestHigh.Seconds()), f3(run.LongestLow.Seconds()), strconv.Itoa(len(run.Violations))})
			elapsed := fmt.Sprintf("%.1f s", run.Elapsed.Seconds())
			if !run.AllHighBound {
				elapsed = fmt.Sprintf("not all bound in %.0f s", run.Elapsed.Seconds())
			}
			fmt.Fprintf(&md, "| %s (rep %d) | %d of %d | %s | %d | %d | %d | %d / %d | %.1f / %.1f s | %d |\n", v, run.Rep, run.HighBound, s.HighGangs*s.HighGangSize, elapsed,
				run.EvictedPods, run.EvictedGangs, run.BrokenLowGangs, run.PartialHigh, run.PartialLow, run.LongestHigh.Seconds(), run.LongestLow.Seconds(), len(run.Violations))
			if run.Rep == 0 {
				chart.Series = append(chart.Series, benchreport.Series{Name: v, Points: thin(run.Curve, 400)})
			}
		}
	}
	if err := benchreport.WriteCSV(filepath.Join(out, "preempt.csv"), rows); err != nil {
		return rep, err
	}
	if err := chart.WriteFiles(out, "preempt-curve"); err != nil {
		return rep, err
	}
	return rep, os.WriteFile(filepath.Join(out, "preempt.md"), []byte(md.String()), 0o644)
}

// preemptVariants are MUSTER_BENCH_PREEMPT_VARIANTS (comma-separated),
// else muster, native (disruptionMode All) and native-single.
func preemptVariants() []string {
	if v := os.Getenv("MUSTER_BENCH_PREEMPT_VARIANTS"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{variantMuster, variantNative, variantNativeSingle}
}

// BenchmarkPreemption is the preemption scenario (run it with
// -benchtime=1x). It reports; it does not fail a variant that binds
// nothing: whether preemption works is the e2e tests' job.
func BenchmarkPreemption(b *testing.B) {
	s := preemptSizesFromEnv()
	b.Logf("sizes: %+v (low-priority gangs %d; minimum eviction %d pods)", s, s.lowGangs(), s.minEvictedPods())
	out := benchOutDir(b)
	for range b.N {
		rep, err := runPreemptScenario(context.Background(), b, s, preemptVariants(), out)
		if err != nil {
			b.Fatal(err)
		}
		for _, run := range rep.Runs {
			b.ReportMetric(float64(run.HighBound), run.Variant+"-high-bound")
			b.ReportMetric(float64(run.EvictedPods), run.Variant+"-evicted")
		}
	}
}

// TestBenchSmokePreemption runs the preemption scenario small (4 nodes × 8
// GPUs full of gangs of 8, one high-priority gang of 16) so its code cannot
// rot: the cluster fills, the files are written, and both muster and native
// pod-group preemption (disruptionMode all) bind the high-priority gang by
// evicting whole low-priority gangs, at least the minimum, never leaving one
// partly bound.
func TestBenchSmokePreemption(t *testing.T) {
	s := preemptSizes{Nodes: 4, GPUsPerNode: 8, LowGangSize: 8, HighGangs: 1, HighGangSize: 16, Reps: 1, Timeout: time.Minute, Workers: 4}
	out := t.TempDir()
	variants := []string{variantMuster, variantNative}
	rep, err := runPreemptScenario(context.Background(), t, s, variants, out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != len(variants) {
		t.Fatalf("%d runs, want %d", len(rep.Runs), len(variants))
	}
	for _, run := range rep.Runs {
		if !run.Filled || !run.AllHighBound || run.HighBound != 16 || run.EvictedPods < s.minEvictedPods() || run.EvictedPods%s.LowGangSize != 0 ||
			run.BrokenLowGangs != 0 || len(run.Violations) > 0 || run.Samples == 0 {
			t.Errorf("%s: %+v; want filled, 16 high-priority pods bound, whole low-priority gangs evicted (≥ %d pods), none left partly bound, no rule violation",
				run.Variant, run, s.minEvictedPods())
		}
	}
	for _, f := range []string{"preempt.csv", "preempt.md", "preempt-curve.svg"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("result file %s: %v", f, err)
		}
	}
}
