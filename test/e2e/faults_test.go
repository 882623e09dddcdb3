package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/localcluster"
)

// The fault tests (issue 14, item 7) break a component while gangs are
// being placed and check muster's promise under the fault: a gang may be
// seen partly bound only until it is completed or its bound members are
// evicted, within the partial-gang grace period after the fault, and in the
// end every gang is bound whole or not at all. Their randomness comes from
// one seed, logged; MUSTER_FAULT_SEED=<seed> replays a run's sizes, order
// and fault points (the timing of the machine still varies).

// faultGrace is the schedulers' partialGangGracePeriodSeconds in the fault
// tests: 10 s instead of the shipped 30 s, so that a gang the faults leave
// partly bound is resolved within the test's minute. It stays twice the
// shipped backoffSeconds (5 s), as the shipped grace is well above it: a
// partly bound gang whose first try after a fault is refused is planned
// again only after one backoff, and must get that try before its grace runs
// out.
const faultGrace = 10 * time.Second

// faultSchedulerArgs are the MusterGang args of the fault tests' schedulers.
var faultSchedulerArgs = map[string]any{"partialGangGracePeriodSeconds": int(faultGrace / time.Second)}

// faultSeed is MUSTER_FAULT_SEED if set, else the clock; it is logged.
func faultSeed(t testing.TB) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("MUSTER_FAULT_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("MUSTER_FAULT_SEED=%q: %v", v, err)
		}
		seed = s
	}
	t.Logf("seed %d (replay with MUSTER_FAULT_SEED=%d)", seed, seed)
	return seed
}

// gangLedger samples the bound members of every expected gang every 100 ms
// (count gives bound and live members per gang) and holds the fault rule:
// a gang seen partly bound — some members bound, fewer than its size — is
// whole or has none bound within faultGrace + settleWindow of the later of
// the first such sample and the end of the latest fault. The no-fault rule
// of the other gang tests (partialWatcher: one barrier release per gang, no
// partial gang that goes back to none) does not hold under faults: a
// scheduler that dies between binds leaves members bound by one instance
// for the next to complete or evict, and either is what muster promises.
type gangLedger struct {
	count func(ctx context.Context) (bound, total map[string]int, err error)
	// onWhole, if set, is called once per gang, from the sampling
	// goroutine, when the gang is first seen whole.
	onWhole func(gang string)

	mu       sync.Mutex
	size     map[string]int
	faulting bool
	faultEnd time.Time
	open     map[string]time.Time // gang -> first sample of its partial episode
	whole    map[string]bool
	samples  int
	// skipped: samples lost to the fault itself (the apiserver down).
	skipped        int
	partialSamples int
	evicted        []string // gangs whose partial episode ended with none bound
	longest        time.Duration
	failures       []string

	stop, done chan struct{}
	checked    sync.Once
}

// startLedger starts sampling; its check runs in t's cleanup too.
func startLedger(t testing.TB, count func(ctx context.Context) (bound, total map[string]int, err error), onWhole func(string)) *gangLedger {
	l := &gangLedger{
		count: count, onWhole: onWhole,
		size: map[string]int{}, open: map[string]time.Time{}, whole: map[string]bool{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go func() {
		defer close(l.done)
		wait.Until(func() { l.sample(context.Background()) }, 100*time.Millisecond, l.stop)
	}()
	t.Cleanup(func() { l.check(t) })
	return l
}

// expect adds a gang of size members.
func (l *gangLedger) expect(gang string, size int) {
	l.mu.Lock()
	l.size[gang] = size
	l.mu.Unlock()
}

// faultBegins and faultEnds bracket a fault; the rule's clock restarts at
// its end.
func (l *gangLedger) faultBegins() {
	l.mu.Lock()
	l.faulting = true
	l.mu.Unlock()
}

func (l *gangLedger) faultEnds() {
	l.mu.Lock()
	l.faulting, l.faultEnd = false, time.Now()
	l.mu.Unlock()
}

// fail records a failure of a helper goroutine; check reports it.
func (l *gangLedger) fail(format string, args ...any) {
	l.mu.Lock()
	l.failures = append(l.failures, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// wholeCount is the number of gangs seen whole so far.
func (l *gangLedger) wholeCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.whole)
}

func (l *gangLedger) sample(ctx context.Context) {
	started := time.Now()
	bound, _, err := l.count(ctx)
	now := time.Now()
	l.mu.Lock()
	if err != nil {
		if l.faulting || started.Before(l.faultEnd) {
			l.skipped++
		} else {
			l.failures = append(l.failures, fmt.Sprintf("sampling the bindings: %v", err))
		}
		l.mu.Unlock()
		return
	}
	l.samples++
	limit := faultGrace + settleWindow
	var newlyWhole []string
	for g, size := range l.size {
		n := bound[g]
		since, open := l.open[g]
		if n == 0 || n >= size {
			if n >= size && !l.whole[g] {
				l.whole[g] = true
				newlyWhole = append(newlyWhole, g)
			}
			if open {
				delete(l.open, g)
				l.longest = max(l.longest, now.Sub(since))
				if n == 0 {
					l.evicted = append(l.evicted, g)
				}
			}
			continue
		}
		l.partialSamples++
		if !open {
			l.open[g] = now
			continue
		}
		if l.faulting {
			continue // the clock starts again when the fault ends
		}
		from := since
		if l.faultEnd.After(from) {
			from = l.faultEnd
		}
		if now.Sub(from) > limit {
			what := "it was first seen partly bound"
			if from.Equal(l.faultEnd) {
				what = "the last fault ended"
			}
			l.failures = append(l.failures, fmt.Sprintf("gang %s: %d of %d bound for %s since %s (limit %s = grace %s + settle window %s)",
				g, n, size, now.Sub(from).Round(time.Millisecond), what, limit, faultGrace, settleWindow))
			delete(l.open, g) // reported; a later episode starts afresh
		}
	}
	l.mu.Unlock()
	if l.onWhole != nil {
		for _, g := range newlyWhole {
			l.onWhole(g)
		}
	}
}

// partial lists the gangs partly bound in bound.
func (l *gangLedger) partial(bound map[string]int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for g, size := range l.size {
		if n := bound[g]; n > 0 && n < size {
			out = append(out, fmt.Sprintf("%s: %d of %d", g, n, size))
		}
	}
	sort.Strings(out)
	return out
}

// check stops sampling and fails t on every break of the rule. It runs once.
func (l *gangLedger) check(t testing.TB) {
	t.Helper()
	l.checked.Do(func() {
		close(l.stop)
		<-l.done
		l.sample(context.Background()) // the state as the test ends
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.samples == 0 {
			l.failures = append(l.failures, "no binding samples were taken")
		}
		// A test stopped early ends mid-placement: the end it did not reach
		// says nothing.
		if !t.Failed() {
			for g, since := range l.open {
				l.failures = append(l.failures, fmt.Sprintf("gang %s still partly bound at the end (since %s)", g, since.Format(time.TimeOnly)))
			}
		}
		for _, f := range l.failures {
			t.Errorf("fault rule: %s", f)
		}
		t.Logf("%d binding samples (%d lost to the fault); %d samples of a gang partly bound; %d partial episodes ended in eviction %v; longest partial episode %s",
			l.samples, l.skipped, l.partialSamples, len(l.evicted), l.evicted, l.longest.Round(time.Millisecond))
	})
}

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
	releases := func() int {
		n := 0
		for g := range size {
			n += barrierLog.count(ns + "/" + g)
		}
		return n
	}

	stop := startGangScheduler(t, sched, faultSchedulerArgs)
	begin := time.Now()
	// The gangs arrive while the kills go on.
	pgc := podGroups(t)
	order := rng.Perm(gangs)
	created := make(chan error, 1)
	background.Add(1)
	go func() {
		defer background.Done()
		created <- func() error {
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
		}()
	}()

	points := rng.Perm(80)[:10]
	slices.Sort(points)
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
	if err := <-created; err != nil {
		t.Fatalf("creating the gangs: %v", err)
	}
	t.Logf("all gangs created %s after the start", time.Since(begin).Round(time.Millisecond))

	// Every gang runs in the end, unless its bound members were evicted.
	var evicted []string
	waitFor(t, gangTimeout, "every gang bound whole, or none bound with members evicted", gangsBound(ns, func(bound, total map[string]int) bool {
		evicted = evicted[:0]
		for g, n := range size {
			switch {
			case bound[g] == n:
			case bound[g] == 0 && total[g] < n:
				evicted = append(evicted, g)
			default:
				return false
			}
		}
		return true
	}))
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

// gangEvents lists the events on PodGroup g of ns and on its pods (named
// <g>-<i>), oldest first, as "kind/name reason: note".
func gangEvents(t testing.TB, cp *localcluster.ControlPlane, ns, g string) []string {
	t.Helper()
	evs, err := cp.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Events written through events.k8s.io carry the precise time.
	when := func(e eventsv1.Event) time.Time {
		if !e.EventTime.IsZero() {
			return e.EventTime.Time
		}
		return e.CreationTimestamp.Time
	}
	sort.Slice(evs.Items, func(i, j int) bool { return when(evs.Items[i]).Before(when(evs.Items[j])) })
	var out []string
	for _, e := range evs.Items {
		if r := e.Regarding; r.Name == g || strings.HasPrefix(r.Name, g+"-") {
			out = append(out, fmt.Sprintf("%s %s/%s %s: %s", when(e).Format("15:04:05.000"), r.Kind, r.Name, e.Reason, e.Note))
		}
	}
	return out
}

// createPersistently runs create until it succeeds, as a controller
// retries: through an apiserver outage, and through the server-side
// timeouts of an overloaded machine. A create cut off in flight may have
// been stored: AlreadyExists counts as created. It gives up after
// gangTimeout.
func createPersistently(ctx context.Context, create func(context.Context) error) error {
	deadline := time.Now().Add(gangTimeout)
	for {
		err := create(ctx)
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}
