package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/muster-io/muster/localcluster"
)

// TestFaultSchedulerKills is R1: the muster scheduler is killed at 10
// random points while 100 gangs are admitted on a contended cluster.
//
// Size: 100 gangs of 2 to 4 members × 1 GPU (about 300 pods), created in
// random order while the kills go on, on a pool of 8-GPU nodes with room for
// about half of their GPUs at once. Each gang bound whole runs for 0.5 to 2 s
// and then succeeds (its GPUs free up), so admission goes on until every
// gang has run. A kill is an abrupt stop: the scheduler's context is
// cancelled — members waiting at the barrier, binds in flight and the
// plugin's memory (reservations, grace timers) go with it, nothing is handed
// over — and a new instance starts at once. The kills fall 0 to 50 ms after
// barrier releases drawn at random among the first 80, that is while a
// released gang's members are being bound. Partial-gang grace period: 10 s.
// The run takes 15 to 70 s on 2 shared cores, depending on their load.
//
// What must hold: the fault rule of gangLedger throughout; after the last
// kill every gang ends bound whole, or with none bound when its bound
// members were evicted (bare pods: nothing recreates them); and then no gang
// is partly bound for a while.
func TestFaultSchedulerKills(t *testing.T) {
	seed := faultSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	const gangs, gpusPerNode = 100, 8
	size := map[string]int{}
	gpus := 0
	for i := range gangs {
		n := 2 + rng.IntN(3)
		size[fmt.Sprintf("g%03d", i)] = n
		gpus += n
	}
	nodes := (gpus/2 + gpusPerNode - 1) / gpusPerNode
	ns := testNamespace(t, "fault-r1-")
	sched := "muster-" + ns
	gpuPool(t, ns, nodes, gpusPerNode)
	t.Logf("%d gangs, %d pods × 1 GPU, on %d nodes × %d GPUs (%d GPUs)", gangs, gpus, nodes, gpusPerNode, nodes*gpusPerNode)

	// The workload side: a gang bound whole runs a while, then succeeds.
	ctx, cancel := context.WithCancel(context.Background())
	var background sync.WaitGroup
	t.Cleanup(func() { cancel(); background.Wait() })
	holds := rand.New(rand.NewPCG(seed, 2)) // used by the sampling goroutine only
	l := startFinishingLedger(ctx, t, &background, holds, ns, size)

	stop := startGangScheduler(t, sched, faultSchedulerArgs)
	begin := time.Now()
	// The gangs arrive while the kills go on.
	pgc := podGroups(t)
	order := rng.Perm(gangs)
	created := make(chan error, 1)
	background.Add(1)
	go func() {
		defer background.Done()
		created <- createFaultGangs(ctx, pgc, ns, sched, order, size)
	}()

	points := rng.Perm(80)[:10]
	slices.Sort(points)
	killSchedulerAtReleases(t, rng, l, ns, sched, size, points, begin, stop)
	if err := <-created; err != nil {
		t.Fatalf("creating the gangs: %v", err)
	}
	t.Logf("all gangs created %s after the start", time.Since(begin).Round(time.Millisecond))

	// Every gang runs in the end, unless its bound members were evicted.
	evicted := waitGangsSettled(t, ns, size)
	holdsFor(t, 2*time.Second, "no gang partly bound", gangsBound(ns, func(bound, _ map[string]int) bool { return len(l.partial(bound)) == 0 }))
	sort.Strings(evicted)
	t.Logf("all settled %s after the start: %d gangs ran whole, %d evicted %v", time.Since(begin).Round(time.Millisecond), gangs-len(evicted), len(evicted), evicted)
	// An eviction is within the promise, but say why the gang was not
	// completed instead.
	for _, g := range evicted {
		t.Logf("gang %s: %s", g, strings.Join(gangEvents(t, controlPlane, ns, g), " | "))
	}
	l.check(t)
}

// startFinishingLedger starts the ledger of the gangs of size in ns; a gang
// bound whole runs a while (0.5 to 2 s drawn from holds), then its pods
// succeed. The goroutines it starts are counted in background and end with
// ctx.
func startFinishingLedger(ctx context.Context, t *testing.T, background *sync.WaitGroup, holds *rand.Rand, ns string, size map[string]int) *gangLedger {
	var l *gangLedger
	l = startLedger(t, func(ctx context.Context) (map[string]int, map[string]int, error) { return boundByGang(ctx, ns) }, func(g string) {
		hold := 500*time.Millisecond + time.Duration(holds.IntN(1500))*time.Millisecond
		background.Add(1)
		go func() {
			defer background.Done()
			select {
			case <-ctx.Done():
				return
			case <-time.After(hold):
			}
			for i := range size[g] {
				if err := podSim.Succeed(ctx, ns, fmt.Sprintf("%s-%d", g, i)); err != nil && ctx.Err() == nil {
					l.fail("finishing gang %s: %v", g, err)
				}
			}
		}()
	})
	for g, n := range size {
		l.expect(g, n)
	}
	return l
}

// createFaultGangs creates the PodGroup and the pods of gang g<i> for each
// i of order, each retried through the faults.
func createFaultGangs(ctx context.Context, pgc pgclientset.Interface, ns, sched string, order []int, size map[string]int) error {
	for _, i := range order {
		g := fmt.Sprintf("g%03d", i)
		pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: g}, Spec: schedv1alpha1.PodGroupSpec{MinMember: int32(size[g])}}
		if err := createPersistently(ctx, func(ctx context.Context) error {
			_, err := pgc.SchedulingV1alpha1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("PodGroup %s: %w", g, err)
		}
		for j := range size[g] {
			pod := makePod(ns, podSpec{name: fmt.Sprintf("%s-%d", g, j), scheduler: sched, pool: ns, gang: g, gpus: 1})
			if err := createPersistently(ctx, func(ctx context.Context) error {
				_, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
				return err
			}); err != nil {
				return fmt.Errorf("pod %s: %w", pod.Name, err)
			}
		}
	}
	return nil
}

// killSchedulerAtReleases kills the scheduler (stopped by stop) 0 to 50 ms
// after barrier release p+1 of the gangs of size, for each p of points, and
// starts a new one at once, telling l when each fault begins and ends.
func killSchedulerAtReleases(t *testing.T, rng *rand.Rand, l *gangLedger, ns, sched string, size map[string]int, points []int, begin time.Time, stop func()) {
	releases := func() int {
		n := 0
		for g := range size {
			n += barrierLog.count(ns + "/" + g)
		}
		return n
	}
	hitPartial := 0
	for k, p := range points {
		release := p + 1
		waitFor(t, gangTimeout, fmt.Sprintf("%d barrier releases", release), func(context.Context) (bool, string, error) {
			n := releases()
			return n >= release, fmt.Sprintf("%d releases", n), nil
		})
		time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond)
		l.faultBegins()
		stop()
		bound, _, err := boundByGang(context.Background(), ns)
		if err != nil {
			t.Fatal(err)
		}
		partial := l.partial(bound)
		stop = startGangScheduler(t, sched, faultSchedulerArgs)
		l.faultEnds()
		if len(partial) > 0 {
			hitPartial++
		}
		t.Logf("kill %d at %s, after release %d: %d gangs admitted whole so far; partly bound at the kill: %v",
			k+1, time.Since(begin).Round(time.Millisecond), release, l.wholeCount(), partial)
	}
	t.Logf("%d of %d kills left a gang partly bound", hitPartial, len(points))
}

// waitGangsSettled waits until every gang of size in ns is bound whole, or
// has none bound with members evicted, and returns the evicted ones.
func waitGangsSettled(t *testing.T, ns string, size map[string]int) (evicted []string) {
	var unsettled []string
	if err := localcluster.WaitFor(context.Background(), gangTimeout, "every gang bound whole, or none bound with members evicted", gangsBound(ns, func(bound, total map[string]int) bool {
		evicted, unsettled = evicted[:0], unsettled[:0]
		for g, n := range size {
			switch {
			case bound[g] == n:
			case bound[g] == 0 && total[g] < n:
				evicted = append(evicted, g)
			default:
				unsettled = append(unsettled, g)
			}
		}
		return len(unsettled) == 0
	})); err != nil {
		// Say why the gangs left wait: their pods' conditions and
		// nominations, and the events on them.
		sort.Strings(unsettled)
		for _, g := range unsettled {
			t.Logf("gang %s: %s", g, strings.Join(describeGangPods(t, ns, g), " | "))
			t.Logf("gang %s events: %s", g, strings.Join(gangEvents(t, controlPlane, ns, g), " | "))
		}
		t.Fatal(err)
	}
	return evicted
}
