package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/utils/ptr"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/muster-io/muster/api"
	podgrouperapp "github.com/muster-io/muster/cmd/muster-podgrouper/app"
	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/plugins/gang"
)

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
	cp := startRestartableControlPlane(ctx, t)

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

	pgExits := runPodGrouperAsDeployment(ctx, t, cp, sched)
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
	streamDone := streamFaultJobs(ctx, cp, ns, sched, pool, names, size)

	// The restart falls 0 to 50 ms after one of the first barrier
	// releases: while a gang's members are being bound.
	pgc, err := pgclientset.NewForConfig(cp.JSONConfig)
	if err != nil {
		t.Fatal(err)
	}
	waitPodGroupReleases(t, pgc, ns, 1+rng.IntN(6))
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

	if err := <-streamDone; err != nil {
		t.Fatal(err)
	}
	waitJobGangsWhole(ctx, t, cp, ns, names, size, begin)
	checkPodGroupPerJob(ctx, t, cp, pgc, ns, size)

	// Through an outage it is sure to outlast, the pod-grouper goes on as
	// the same leader: no exit, no failover.
	exits := pgExits()
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

// startRestartableControlPlane starts a control plane of the test's own
// whose apiserver can be restarted, with the shipped CRDs, the controllers
// and the pod simulator.
func startRestartableControlPlane(ctx context.Context, t *testing.T) *localcluster.ControlPlane {
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
	return cp
}

// runPodGrouperAsDeployment runs the pod-grouper for sched on cp: the
// shipped command and its defaults; only the kubeconfig and the listen
// address differ. It is started again when it exits, as the kubelet
// restarts a container. exits returns how each run that ended on its own
// ended.
func runPodGrouperAsDeployment(ctx context.Context, t *testing.T, cp *localcluster.ControlPlane, sched string) (exits func() []error) {
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
	return func() []error {
		pgMu.Lock()
		defer pgMu.Unlock()
		return slices.Clone(pgExits)
	}
}

// streamFaultJobs creates the Jobs names of size in ns, one every 150 ms,
// each retried through the outage. The channel gets nil once all are
// created, or the first Job that could not be.
func streamFaultJobs(ctx context.Context, cp *localcluster.ControlPlane, ns, sched, pool string, names []string, size map[string]int) <-chan error {
	done := make(chan error, 1)
	go func() {
		for _, name := range names {
			job := faultJob(ns, name, sched, pool, size[name])
			if err := createPersistently(ctx, func(ctx context.Context) error {
				_, err := cp.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
				return err
			}); err != nil {
				done <- fmt.Errorf("creating Job %s: %w", name, err)
				return
			}
			time.Sleep(150 * time.Millisecond)
		}
		done <- nil
	}()
	return done
}

// waitPodGroupReleases waits for release barrier releases of the PodGroups
// of ns, all together.
func waitPodGroupReleases(t *testing.T, pgc pgclientset.Interface, ns string, release int) {
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
}

// waitJobGangsWhole waits until every Job of names in ns has size[name]
// pods bound, describing those that do not if it gives up, and checks that
// they stay so for a while. begin is when the restart began.
func waitJobGangsWhole(ctx context.Context, t *testing.T, cp *localcluster.ControlPlane, ns string, names []string, size map[string]int, begin time.Time) {
	var short []string
	err := localcluster.WaitFor(ctx, gangTimeout, fmt.Sprintf("%d gangs bound whole", len(names)), func(ctx context.Context) (bool, string, error) {
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
	t.Logf("all %d gangs bound whole %s after the restart", len(names), time.Since(begin).Round(time.Millisecond))
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
}

// checkPodGroupPerJob checks one PodGroup per Job of size in ns, of the
// Job's size, holding exactly its pods.
func checkPodGroupPerJob(ctx context.Context, t *testing.T, cp *localcluster.ControlPlane, pgc pgclientset.Interface, ns string, size map[string]int) {
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
	if len(pgs.Items) != len(size) {
		t.Errorf("%d PodGroups for %d Jobs", len(pgs.Items), len(size))
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
