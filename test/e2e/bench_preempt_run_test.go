package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-io/muster/test/benchreport"
)

// runPreempt runs one variant once on a fresh namespace, node pool and
// scheduler: fill, then the high-priority gangs, sampled every 100 ms.
func runPreempt(ctx context.Context, tb testing.TB, s preemptSizes, variant string, rep int) (preemptRun, error) {
	res := preemptRun{Variant: variant, Rep: rep}
	ns, err := controlPlane.NewNamespace(ctx, "bench-pe-")
	if err != nil {
		return res, err
	}
	defer cleanupRunOrFail(tb, ns)
	low, high := ns+"-low", ns+"-high"
	const lowValue, highValue = 100, 100000
	deleteClasses, err := createPreemptClasses(ctx, tb, map[string]int32{low: lowValue, high: highValue})
	defer deleteClasses()
	if err != nil {
		return res, err
	}
	if err := createBenchNodes(ctx, ns, s.Nodes, s.GPUsPerNode, false); err != nil {
		return res, err
	}
	lows, highs := prefixedNames("low", s.lowGangs()), prefixedNames("high", s.HighGangs)
	if err := createPriorityGroups(ctx, tb, variant, ns, lows, s.LowGangSize, low, lowValue); err != nil {
		return res, err
	}
	if err := createPriorityGroups(ctx, tb, variant, ns, highs, s.HighGangSize, high, highValue); err != nil {
		return res, err
	}
	p := &preemptSampler{res: &res, variant: variant, ns: ns, size: map[string]int{}, isHigh: map[string]bool{}, partialSince: map[string]time.Time{}}
	for _, g := range lows {
		p.size[g] = s.LowGangSize
	}
	for _, g := range highs {
		p.size[g], p.isHigh[g] = s.HighGangSize, true
	}
	sched := "bench-" + variant + "-" + ns
	stop, err := startBenchScheduler(ctx, tb, schedulerVariant(variant), sched, true, nil)
	if err != nil {
		return res, err
	}
	defer stop()
	if p.pods, err = followGangPods(ctx, ns); err != nil {
		return res, err
	}
	defer p.pods.stop()

	// Fill the cluster with the low-priority gangs.
	begin := time.Now()
	if err := createPriorityGangPods(ctx, s, variant, sched, ns, lows, s.LowGangSize, low); err != nil {
		return res, err
	}
	lowPods := s.lowGangs() * s.LowGangSize
	isLow := func(g string) bool { return !p.isHigh[g] }
	res.Filled = waitUntil(ctx, s.Timeout, func() bool { return p.countBound(isLow) == lowPods })
	res.Fill = time.Since(begin)
	if !res.Filled {
		return res, fmt.Errorf("%s: the cluster was not filled: %d of %d low-priority pods bound after %s", variant, p.countBound(isLow), lowPods, s.Timeout)
	}

	// The high-priority gangs arrive; sample until all are bound.
	p.start = time.Now()
	createDone := make(chan error, 1)
	go func() { createDone <- createPriorityGangPods(ctx, s, variant, sched, ns, highs, s.HighGangSize, high) }()
	if err := p.run(createDone, s.Timeout, s.HighGangs*s.HighGangSize); err != nil {
		return res, err
	}
	p.settle(ctx)
	return res, nil
}

// createPreemptClasses creates the PriorityClasses of classes (name →
// value); cleanup deletes those created.
func createPreemptClasses(ctx context.Context, tb testing.TB, classes map[string]int32) (cleanup func(), err error) {
	var created []string
	cleanup = func() {
		for _, name := range created {
			if err := controlPlane.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				tb.Error(err)
			}
		}
	}
	for name, v := range classes {
		if _, err := controlPlane.Client.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: v}, metav1.CreateOptions{}); err != nil {
			return cleanup, err
		}
		created = append(created, name)
	}
	return cleanup, nil
}

// preemptSampler samples the gangs of one preemption run into res.
type preemptSampler struct {
	res     *preemptRun
	variant string
	ns      string
	pods    *gangPods
	size    map[string]int  // gang → members
	isHigh  map[string]bool // gang → high priority
	start   time.Time       // first high-priority create

	partialSince map[string]time.Time // gang → start of its partial episode
}

// countBound counts the bound pods of the gangs want accepts.
func (p *preemptSampler) countBound(want func(string) bool) int {
	n := 0
	for g, uids := range p.pods.bound() {
		if want(g) {
			n += len(uids)
		}
	}
	return n
}

// endEpisode ends gang g's partial episode at now, if it has one.
func (p *preemptSampler) endEpisode(g string, now time.Time) {
	since, ok := p.partialSince[g]
	if !ok {
		return
	}
	delete(p.partialSince, g)
	if d := now.Sub(since); p.isHigh[g] {
		p.res.LongestHigh = max(p.res.LongestHigh, d)
	} else {
		p.res.LongestLow = max(p.res.LongestLow, d)
	}
}

func (p *preemptSampler) sample(now time.Time) {
	res := p.res
	bound := p.pods.bound()
	partial, highBound := 0, 0
	for g, uids := range bound {
		n := len(uids)
		if p.isHigh[g] {
			highBound += n
		}
		if n >= p.size[g] {
			p.endEpisode(g, now)
			continue
		}
		partial++
		if p.isHigh[g] {
			res.PartialHigh++
			if p.variant == variantMuster && !barrierLog.releasedTogether(p.ns+"/"+g, uids, p.size[g]) {
				res.Violations = append(res.Violations, fmt.Sprintf("%s: %d of %d bound, not all allowed together by one barrier release", g, n, p.size[g]))
			}
		} else {
			res.PartialLow++
		}
		if since, ok := p.partialSince[g]; !ok {
			p.partialSince[g] = now
		} else if now.Sub(since) > settleWindow {
			res.Violations = append(res.Violations, fmt.Sprintf("%s: %d of %d bound for %s (> %s)", g, n, p.size[g], now.Sub(since).Round(time.Millisecond), settleWindow))
			p.endEpisode(g, now)
		}
	}
	for g := range p.partialSince {
		if _, ok := bound[g]; !ok {
			p.endEpisode(g, now)
		}
	}
	res.Samples++
	res.MaxPartial = max(res.MaxPartial, partial)
	res.HighBound = highBound
	res.Curve = append(res.Curve, benchreport.Point{X: now.Sub(p.start).Seconds(), Y: float64(highBound)})
}

// run samples every 100 ms until the creates returned (createDone) and
// highPods high-priority pods are bound, or timeout; it returns a failed
// create's error.
func (p *preemptSampler) run(createDone <-chan error, timeout time.Duration, highPods int) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	created := false
	for {
		select {
		case err := <-createDone:
			if err != nil {
				return err
			}
			created = true
		case now := <-tick.C:
			p.sample(now)
			if created && p.res.HighBound == highPods {
				p.res.AllHighBound = true
				p.res.Elapsed = now.Sub(p.start)
				return nil
			}
		case <-deadline:
			p.res.Elapsed = time.Since(p.start)
			return nil
		}
	}
}

// settle lets binds and evictions in flight settle, then counts what is
// left broken and what was evicted.
func (p *preemptSampler) settle(ctx context.Context) {
	res := p.res
	settled := waitUntil(ctx, settleWindow, func() bool {
		for g, uids := range p.pods.bound() {
			if len(uids) < p.size[g] {
				return false
			}
		}
		return true
	})
	p.sample(time.Now())
	if !settled {
		for g, uids := range p.pods.bound() {
			if !p.isHigh[g] && len(uids) < p.size[g] {
				res.BrokenLowGangs++
			}
		}
	}
	var gangs map[string]int
	res.EvictedPods, gangs = p.pods.evictions()
	for g := range gangs {
		if !p.isHigh[g] {
			res.EvictedGangs++
		}
	}
}
