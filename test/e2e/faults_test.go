package e2e

import (
	"context"
	"errors"
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

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/muster-io/muster/api"
	podgrouperapp "github.com/muster-io/muster/cmd/muster-podgrouper/app"
	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/plugins/gang"
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
	var evicted, unsettled []string
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

// describeGangPods lists the pods of gang g in ns (labelled gang=g), one
// localcluster.DescribePod line each.
func describeGangPods(t testing.TB, ns, g string) []string {
	t.Helper()
	pods, err := controlPlane.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "gang=" + g})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := range pods.Items {
		out = append(out, localcluster.DescribePod(&pods.Items[i]))
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

// TestFaultAPIServerRestart is R5: the kube-apiserver restarts (etcd keeps
// its data) while gangs are being grouped and placed; the scheduler and the
// pod-grouper must recover by themselves, with no gang partly bound beyond
// the fault rule and no PodGroup duplicated.
//
// It runs on a control plane of its own (Options.Restartable; about 2 s to
// start), since a restart would disturb every test on the shared one.
//
// The pod-grouper is the shipped command with its defaults, leader election
// included (lease 15 s, renew deadline 10 s, retry period 2 s), run as its
// Deployment would run it: started again if it exits. An outage shorter
// than the renew deadline less a retry period must not make it exit — it
// keeps its lease and goes on; after a longer one (a slow apiserver start
// on a loaded machine) the shipped design is to exit and be restarted,
// which the test then plays. The scheduler is the shipped profile without
// leader election: kube-scheduler's app exits the process when it loses its
// lease, which a test process cannot play.
//
// Size: 20 Indexed Jobs of 2 to 4 pods × 1 GPU, each one gang
// (muster.io/min-member), created every 150 ms on nodes with room for all.
// The apiserver goes down 0 to 50 ms after one of the first 6 barrier
// releases — while a gang's members are being bound — and stays down 2 s
// plus the new instance's start; Jobs due meanwhile are retried until
// created. Partial-gang grace period: 10 s. The run takes 15 to 25 s.
func TestFaultAPIServerRestart(t *testing.T) {
	seed := faultSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	cp, err := localcluster.Start(localcluster.Options{NativePodGroups: true, Restartable: true})
	if err != nil {
		t.Fatalf("restartable control plane: %v", err)
	}
	t.Cleanup(cp.Stop)
	for _, crd := range shippedCRDs(t) {
		if err := cp.InstallCRD(ctx, crd); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cp.StartControllers(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.StartPodSimulator(ctx, localcluster.PodSimulatorOptions{}); err != nil {
		t.Fatal(err)
	}

	const jobs, gpusPerNode = 20, 8
	size := map[string]int{}
	var names []string
	gpus := 0
	for i := range jobs {
		name := fmt.Sprintf("j%02d", i)
		size[name] = 2 + rng.IntN(3)
		gpus += size[name]
		names = append(names, name)
	}
	const pool = "fault-r5"
	if _, err := cp.CreateNodes(ctx, (gpus+gpusPerNode-1)/gpusPerNode, func(i int) localcluster.NodeSpec {
		return localcluster.NodeSpec{Name: fmt.Sprintf("%s-%d", pool, i), GPUs: gpusPerNode, Pool: pool}
	}); err != nil {
		t.Fatal(err)
	}
	ns, err := cp.NewNamespace(ctx, "fault-r5-")
	if err != nil {
		t.Fatal(err)
	}
	sched := "muster-" + ns

	stopSched, err := localcluster.StartScheduler(ctx, cp, localcluster.SchedulerOptions{
		Config:            schedulerConfig(t, sched, faultSchedulerArgs),
		OutOfTreeRegistry: frameworkruntime.Registry{gang.Name: newObservedGang},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopSched)

	// The pod-grouper: the shipped command and its defaults; only the
	// kubeconfig and the listen address differ. It is started again when it
	// exits, as the kubelet restarts a container.
	pgCtx, pgCancel := context.WithCancel(ctx)
	pgDone := make(chan struct{})
	var pgMu sync.Mutex
	var pgExits []error
	var pgStopErr error // how the last run ended when asked to stop
	go func() {
		defer close(pgDone)
		for {
			cmd := podgrouperapp.NewCommand()
			cmd.SilenceErrors = true // recorded below
			cmd.SetArgs([]string{"--kubeconfig=" + cp.KubeconfigPath, "--scheduler-name=" + sched, "--bind-address=127.0.0.1:0"})
			err := cmd.ExecuteContext(pgCtx)
			if pgCtx.Err() != nil {
				pgStopErr = err
				return
			}
			if err == nil {
				err = errors.New("returned without an error")
			}
			pgMu.Lock()
			pgExits = append(pgExits, err)
			pgMu.Unlock()
			select {
			case <-pgCtx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	t.Cleanup(func() {
		pgCancel()
		<-pgDone
		if pgStopErr != nil {
			t.Errorf("pod-grouper, stopping: %v", pgStopErr)
		}
	})
	// The pod-grouper's defaults. Its last renewal may lie a retry period
	// before the outage began: only a shorter outage than the difference
	// is sure to leave it the lease.
	const renewDeadline, retryPeriod = 10 * time.Second, 2 * time.Second
	const keepsLease = renewDeadline - retryPeriod
	holder := waitLeaseHolder(t, cp, "kube-system", "muster-podgrouper")

	l := startLedger(t, func(ctx context.Context) (map[string]int, map[string]int, error) {
		return podsByLabel(ctx, cp, ns, batchv1.JobNameLabel)
	}, nil)
	for _, name := range names {
		l.expect(name, size[name])
	}

	// The stream: one Job every 150 ms, each retried through the outage.
	var streamErr error
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		for _, name := range names {
			job := faultJob(ns, name, sched, pool, size[name])
			if err := createPersistently(ctx, func(ctx context.Context) error {
				_, err := cp.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
				return err
			}); err != nil {
				streamErr = fmt.Errorf("creating Job %s: %w", name, err)
				return
			}
			time.Sleep(150 * time.Millisecond)
		}
	}()

	// The restart falls 0 to 50 ms after one of the first barrier
	// releases: while a gang's members are being bound.
	pgc, err := pgclientset.NewForConfig(cp.JSONConfig)
	if err != nil {
		t.Fatal(err)
	}
	release := 1 + rng.IntN(6)
	waitFor(t, gangTimeout, fmt.Sprintf("%d barrier releases", release), func(ctx context.Context) (bool, string, error) {
		pgs, err := pgc.SchedulingV1alpha1().PodGroups(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		n := 0
		for _, pg := range pgs.Items {
			n += barrierLog.count(ns + "/" + pg.Name)
		}
		return n >= release, fmt.Sprintf("%d releases", n), nil
	})
	time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond)
	bound, _, err := podsByLabel(ctx, cp, ns, batchv1.JobNameLabel)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restarting the apiserver: partly bound %v, bound %v", l.partial(bound), bound)
	l.faultBegins()
	begin := time.Now()
	err = cp.RestartAPIServer(ctx, 2*time.Second)
	l.faultEnds()
	if err != nil {
		t.Fatal(err)
	}
	outage := time.Since(begin)
	t.Logf("apiserver back after %s", outage.Round(time.Millisecond))

	<-streamDone
	if streamErr != nil {
		t.Fatal(streamErr)
	}
	var short []string
	err = localcluster.WaitFor(ctx, gangTimeout, fmt.Sprintf("%d gangs bound whole", jobs), func(ctx context.Context) (bool, string, error) {
		bound, _, err := podsByLabel(ctx, cp, ns, batchv1.JobNameLabel)
		if err != nil {
			return false, "", err
		}
		short = short[:0]
		for _, name := range names {
			if bound[name] != size[name] {
				short = append(short, name)
			}
		}
		return len(short) == 0, fmt.Sprintf("not whole: %v of %v", short, bound), nil
	})
	if err != nil {
		for _, name := range short {
			describeGang(t, cp, ns, name)
		}
		t.Fatal(err)
	}
	t.Logf("all %d gangs bound whole %s after the restart", jobs, time.Since(begin).Round(time.Millisecond))
	holdsFor(t, 2*time.Second, "every gang still whole", func(ctx context.Context) (bool, string, error) {
		bound, _, err := podsByLabel(ctx, cp, ns, batchv1.JobNameLabel)
		if err != nil {
			return false, "", err
		}
		for _, name := range names {
			if bound[name] != size[name] {
				return false, fmt.Sprintf("%s: %d of %d bound", name, bound[name], size[name]), nil
			}
		}
		return true, "", nil
	})

	// One PodGroup per Job, of the Job's size, holding exactly its pods.
	pgs, err := pgc.SchedulingV1alpha1().PodGroups(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	groupOf := map[string]string{}
	for _, pg := range pgs.Items {
		w := pg.Labels[api.LabelWorkloadName]
		if prev, dup := groupOf[w]; dup {
			t.Errorf("Job %s has two PodGroups: %s and %s", w, prev, pg.Name)
		}
		groupOf[w] = pg.Name
		if want, ok := size[w]; !ok || int(pg.Spec.MinMember) != want {
			t.Errorf("PodGroup %s (workload %q): minMember %d, want %d", pg.Name, w, pg.Spec.MinMember, want)
		}
	}
	if len(pgs.Items) != jobs {
		t.Errorf("%d PodGroups for %d Jobs", len(pgs.Items), jobs)
	}
	pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if j := p.Labels[batchv1.JobNameLabel]; p.Labels[api.LabelPodGroup] != groupOf[j] {
			t.Errorf("pod %s of Job %s: PodGroup label %q, want %q", p.Name, j, p.Labels[api.LabelPodGroup], groupOf[j])
		}
	}

	// Through an outage it is sure to outlast, the pod-grouper goes on as
	// the same leader: no exit, no failover.
	pgMu.Lock()
	exits := slices.Clone(pgExits)
	pgMu.Unlock()
	now := waitLeaseHolder(t, cp, "kube-system", "muster-podgrouper")
	switch {
	case outage < keepsLease && len(exits) > 0:
		t.Errorf("the pod-grouper exited during an outage of %s, shorter than its renew deadline %s less a retry period %s: %v", outage.Round(time.Millisecond), renewDeadline, retryPeriod, exits)
	case outage < keepsLease && now != holder:
		t.Errorf("pod-grouper lease holder %q before the restart, %q after", holder, now)
	case len(exits) > 0:
		t.Logf("outage %s ≥ %s: the pod-grouper lost its lease, exited and was started again (%v); lease holder now %q", outage.Round(time.Millisecond), keepsLease, exits, now)
	}
	l.check(t)
}

// describeGang logs what a gang that did not become whole looks like: its
// pods (node, phase, PodScheduled, PodGroup label) and the events on them
// and on its PodGroup.
func describeGang(t testing.TB, cp *localcluster.ControlPlane, ns, g string) {
	t.Helper()
	pods, err := cp.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Name != g && !strings.HasPrefix(p.Name, g+"-") {
			continue
		}
		sched := "no PodScheduled"
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				sched = fmt.Sprintf("PodScheduled=%s %s: %s", c.Status, c.Reason, c.Message)
			}
		}
		t.Logf("gang %s: pod %s node %q phase %s nominated %q deleting %v pod-group %q; %s", g, p.Name, p.Spec.NodeName, p.Status.Phase,
			p.Status.NominatedNodeName, p.DeletionTimestamp != nil, p.Labels[api.LabelPodGroup], sched)
	}
	pgc, err := pgclientset.NewForConfig(cp.JSONConfig)
	if err != nil {
		t.Fatal(err)
	}
	pgs, err := pgc.SchedulingV1alpha1().PodGroups(ns).List(context.Background(), metav1.ListOptions{LabelSelector: api.LabelWorkloadName + "=" + g})
	if err != nil {
		t.Fatal(err)
	}
	for _, pg := range pgs.Items {
		t.Logf("gang %s: PodGroup %s minMember %d status %+v", g, pg.Name, pg.Spec.MinMember, pg.Status)
	}
	for _, e := range gangEvents(t, cp, ns, g) {
		t.Logf("gang %s: event %s", g, e)
	}
}

// faultJob is an Indexed Job of n pods × 1 GPU on pool, one gang through
// muster.io/min-member.
func faultJob(ns, name, sched, pool string, n int) *batchv1.Job {
	pod := makePod(ns, podSpec{name: name, scheduler: sched, pool: pool, gpus: 1})
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{api.AnnotationMinMember: strconv.Itoa(n)}},
		Spec: batchv1.JobSpec{
			Parallelism:    ptr.To(int32(n)),
			Completions:    ptr.To(int32(n)),
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Template:       corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec},
		},
	}
}

// podsByLabel counts live bound and live pods per value of label in ns of
// cp (boundByGang for any control plane and label).
func podsByLabel(ctx context.Context, cp *localcluster.ControlPlane, ns, label string) (bound, total map[string]int, err error) {
	pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	bound, total = map[string]int{}, map[string]int{}
	for _, p := range pods.Items {
		g := p.Labels[label]
		if g == "" || p.DeletionTimestamp != nil {
			continue
		}
		total[g]++
		if p.Spec.NodeName != "" {
			bound[g]++
		}
	}
	return bound, total, nil
}

// waitLeaseHolder waits until Lease ns/name has a holder and returns it.
func waitLeaseHolder(t testing.TB, cp *localcluster.ControlPlane, ns, name string) string {
	t.Helper()
	var holder string
	waitFor(t, localcluster.ShortTimeout, fmt.Sprintf("a holder of lease %s/%s", ns, name), func(ctx context.Context) (bool, string, error) {
		l, err := cp.Client.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "no lease", nil
		}
		if err != nil {
			return false, "", err
		}
		holder = ptr.Deref(l.Spec.HolderIdentity, "")
		return holder != "", "no holder", nil
	})
	return holder
}

// TestFaultMemberBoundOutsideBarrier isolates what R5 found: a member bound
// without passing this scheduler's barrier — its bind was stored by the
// apiserver while the scheduler saw the connection drop, so it was
// unreserved and retried — leaves the members waiting at the barrier
// waiting for it until the permit timeout, the gang partly bound meanwhile.
// Here member b names another scheduler, so a is planned with b and waits
// at the barrier; then b is bound through the API, as that lost bind was.
// The quorum is there: a must be let go at once, not after the 30 s permit
// timeout.
func TestFaultMemberBoundOutsideBarrier(t *testing.T) {
	ns, sched := gangTest(t, "fault-bind-", 1, 4, map[string]any{"permitTimeoutSeconds": 30})
	createPodGroup(t, ns, "g", 2, nil)
	createGangPods(t, ns, 1, podSpec{name: "a", scheduler: sched, pool: ns, gang: "g", gpus: 1})
	createGangPods(t, ns, 1, podSpec{name: "b", scheduler: sched + "-elsewhere", pool: ns, gang: "g", gpus: 1})
	waitFor(t, gangTimeout, "a waiting at the barrier (nominated)", objectIs(controlPlane.Client.CoreV1().Pods(ns), "a-0", func(p *corev1.Pod) (bool, string) {
		return p.Status.NominatedNodeName != "" && p.Spec.NodeName == "", fmt.Sprintf("nominated %q node %q", p.Status.NominatedNodeName, p.Spec.NodeName)
	}))
	noneBound(t, ns, "g", time.Second)
	if err := controlPlane.Client.CoreV1().Pods(ns).Bind(context.Background(), &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b-0"},
		Target:     corev1.ObjectReference{Kind: "Node", Name: ns + "-0"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	waitGangBound(t, ns, "g", 2, settleWindow)
	t.Logf("a bound %s after b", time.Since(begin).Round(time.Millisecond))
}

// TestFaultStaleNominations: a scheduler that dies after writing its
// members' nominatedNodeName and before binding them leaves the nominations
// behind. The next scheduler's queue records a pod's nomination even while
// the pod waits in PreEnqueue, keeps it across failed attempts, and its
// filters count the pod on that node. A gang that cannot be completed (a
// member evicted: its others wait for good) or never fits would so hold room
// nobody uses. What must hold: the stale pods get their turn even behind a
// gang the queue tries first, the room goes to the gang that fits, and the
// stale nominations are cleared in the API (a cluster autoscaler counts a
// nominated pod on its node; so would the next scheduler).
func TestFaultStaleNominations(t *testing.T) {
	ns := testNamespace(t, "fault-nnn-")
	sched := "muster-" + ns
	gpuPool(t, ns, 1, 8)
	node := ns + "-0"
	stale := func(g string, minMember int32, n int, gpus int64) []string {
		createPodGroup(t, ns, g, minMember, nil)
		var names []string
		for i := range n {
			pod := makePod(ns, podSpec{name: fmt.Sprintf("%s-%d", g, i), scheduler: sched, pool: ns, gang: g, gpus: gpus})
			got, err := controlPlane.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got.Status.NominatedNodeName = node
			if _, err := controlPlane.Client.CoreV1().Pods(ns).UpdateStatus(context.Background(), got, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			names = append(names, got.Name)
		}
		return names
	}
	// The gang that fits is older, its name sorts first and its pods are
	// there when the scheduler starts: the queue tries it before the stale
	// gangs, which must still get their turn (their attempts clear the
	// nominations). A plan kept onto the nominated room failed, was made
	// again at once and kept the head of the queue.
	createPodGroup(t, ns, "a-fits", 2, nil)
	createGangPods(t, ns, 2, podSpec{name: "fits", scheduler: sched, pool: ns, gang: "a-fits", gpus: 4})
	// Two of three members left: they wait in PreEnqueue for good.
	nominated := stale("left", 3, 2, 4)
	// Complete, but 16 GPUs on one 8-GPU node: tried and refused.
	nominated = append(nominated, stale("big", 2, 2, 8)...)
	startGangScheduler(t, sched, faultSchedulerArgs)
	waitGangBound(t, ns, "a-fits", 2, gangTimeout)
	waitFor(t, gangTimeout, "stale nominations cleared", func(ctx context.Context) (bool, string, error) {
		var left []string
		for _, name := range nominated {
			p, err := controlPlane.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			if p.Status.NominatedNodeName != "" {
				left = append(left, name+"→"+p.Status.NominatedNodeName)
			}
		}
		return len(left) == 0, fmt.Sprintf("still nominated: %v", left), nil
	})
}
